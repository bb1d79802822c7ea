"""A derated roofline: each kernel at a fraction of the datasheet peaks, per math kind.

The presets hold datasheet peaks, which no real kernel reaches. `DeratedRoofline` is a
`KernelCostSource` that prices every kernel (lone node or fused group) as

    max(sum over its nodes of flops / (peak[family] * fraction[node]),
        bytes / (bandwidth * memory)) + launch

where a node's fraction is `conv[family]` for convolutions (cuDNN kernels, which on GPUs reach
a smaller share of the tensor-core peak than large GEMMs do: section g of RESULTS.md measured
fp16 ResNet convs at 7-14% of it and an 8192^3 fp16 matmul at 70%) and `compute[family]` for
every other op, and `memory` is the fraction of HBM bandwidth a streaming kernel reaches. Bytes are the same as
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
from graph_ir.op_kinds import OpKind

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem

__all__ = ["DeratedRoofline", "is_conv"]

logger = logging.getLogger(__name__)


def is_conv(problem: SimulationProblem) -> np.ndarray:
    """bool (N,): the problem's convolution nodes (cached on the problem)."""
    cached = problem._cache.get("is_conv")
    if cached is None:
        kinds = (OpKind.CONV, OpKind.CONV_TRANSPOSE)
        cached = problem._cache["is_conv"] = np.array([node.kind in kinds for node in problem.nodes], dtype=bool)
    return cached


class DeratedRoofline:
    """Roofline times at `compute[family]` of each FLOP peak and `memory` of the bandwidth."""

    def __init__(self, compute: Mapping[str, float], memory: float = 1.0, conv: Mapping[str, float] | None = None) -> None:
        conv = dict(compute if conv is None else conv)
        for family, fraction in {**compute, **{f"conv {k}": v for k, v in conv.items()}, "memory": memory}.items():
            if not 0.0 < float(fraction) <= 1.0:
                raise ValueError(f"derating for {family!r} must be in (0, 1], got {fraction!r}")
        unknown = (set(compute) | set(conv)) - set(DTYPE_FAMILIES)
        if unknown:
            raise ValueError(f"unknown FLOP families {sorted(unknown)} (known: {', '.join(DTYPE_FAMILIES)})")
        self.compute = {family: float(compute.get(family, 1.0)) for family in DTYPE_FAMILIES}
        self.conv = {family: float(conv.get(family, self.compute[family])) for family in DTYPE_FAMILIES}
        self.memory = float(memory)

    def _node_fraction(self, problem: SimulationProblem) -> np.ndarray:
        family = problem.family.astype(np.int64)
        general = np.array([self.compute[f] for f in DTYPE_FAMILIES], dtype=np.float64)[family]
        conv = np.array([self.conv[f] for f in DTYPE_FAMILIES], dtype=np.float64)[family]
        return np.where(is_conv(problem), conv, general)

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        compute = problem.flop_time / self._node_fraction(problem)[:, None]
        memory = problem.node_bytes[:, None] / (problem.type_bandwidth[None, :] * self.memory)
        return np.maximum(compute, memory) + problem.type_launch[None, :]

    def kernel_times(
        self, problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_size: np.ndarray, kernel_type: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        from cost_model.simulator.tasks import kernel_bytes

        num_kernels = int(kernel_size.shape[0])
        node_type = kernel_type[kernel_of_node]
        flop_time = problem.flop_time[np.arange(problem.num_nodes), node_type] / self._node_fraction(problem)
        compute = np.bincount(kernel_of_node, weights=flop_time, minlength=num_kernels)
        first = np.full(num_kernels, problem.num_nodes, dtype=np.int64)
        np.minimum.at(first, kernel_of_node, np.arange(problem.num_nodes))
        memory = kernel_bytes(problem, kernel_of_node, first, kernel_size) / (problem.type_bandwidth[kernel_type] * self.memory)
        return np.maximum(compute, memory) + problem.type_launch[kernel_type]
