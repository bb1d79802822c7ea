"""A derated roofline: each kernel at a fraction of the datasheet peaks, per math kind.

The presets hold datasheet peaks, which no real kernel reaches. `DeratedRoofline` is a
`KernelCostSource` that prices every kernel (lone node or fused group) as

    max(sum over FLOP families of flops / (peak[family] * compute[family]),
        bytes / (bandwidth * memory)) + launch

with `compute` the fraction of each dtype family's peak that cuBLAS/cuDNN-class kernels reach
and `memory` the fraction of HBM bandwidth a streaming kernel reaches. Bytes are the same as
the simulator's roofline (node bytes for a lone node, group boundary bytes for a fused group),
so with every fraction at 1.0 it reproduces the plain roofline exactly (tested). The fractions
used by the fidelity table are fitted there (benchmarks/bench_fidelity.py), not here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from cost_model.devices.spec import DTYPE_FAMILIES

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem

__all__ = ["DeratedRoofline"]

logger = logging.getLogger(__name__)


class DeratedRoofline:
    """Roofline times at `compute[family]` of each FLOP peak and `memory` of the bandwidth."""

    def __init__(self, compute: Mapping[str, float], memory: float = 1.0) -> None:
        for family, fraction in {**compute, "memory": memory}.items():
            if not 0.0 < float(fraction) <= 1.0:
                raise ValueError(f"derating for {family!r} must be in (0, 1], got {fraction!r}")
        unknown = set(compute) - set(DTYPE_FAMILIES)
        if unknown:
            raise ValueError(f"unknown FLOP families {sorted(unknown)} (known: {', '.join(DTYPE_FAMILIES)})")
        self.compute = {family: float(compute.get(family, 1.0)) for family in DTYPE_FAMILIES}
        self.memory = float(memory)

    def _node_fraction(self, problem: SimulationProblem) -> np.ndarray:
        fractions = np.array([self.compute[f] for f in DTYPE_FAMILIES], dtype=np.float64)
        return fractions[problem.family.astype(np.int64)]

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        compute = problem.flop_time / self._node_fraction(problem)[:, None]
        memory = problem.node_bytes[:, None] / (problem.type_bandwidth[None, :] * self.memory)
        return np.maximum(compute, memory) + problem.type_launch[None, :]

    def kernel_times(
        self, problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_size: np.ndarray, kernel_type: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        from cost_model.simulator.tasks import _boundary_bytes

        num_kernels = int(kernel_size.shape[0])
        node_type = kernel_type[kernel_of_node]
        flop_time = problem.flop_time[np.arange(problem.num_nodes), node_type] / self._node_fraction(problem)
        compute = np.bincount(kernel_of_node, weights=flop_time, minlength=num_kernels)
        first = np.full(num_kernels, problem.num_nodes, dtype=np.int64)
        np.minimum.at(first, kernel_of_node, np.arange(problem.num_nodes))
        boundary = _boundary_bytes(problem, kernel_of_node, num_kernels)
        kbytes = np.where(kernel_size == 1, problem.node_bytes[first], boundary)
        memory = kbytes / (problem.type_bandwidth[kernel_type] * self.memory)
        return np.maximum(compute, memory) + problem.type_launch[kernel_type]
