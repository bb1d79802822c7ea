"""`recorded`: node times written in the model itself, as the profiled placement workloads do.

The workloads of Tarnawski et al. (`cost_model.profiled`, `../shared/testdata/placement`) carry a
measured latency per node on the CPU and on an accelerator, and whether the accelerator supports
the node. `ProfiledWorkload.to_graph()` keeps them as node attributes (`cpu_latency`,
`accel_latency`, `supported_on_accelerator`); this source hands them to the simulator: the
CPU-kind devices of a topology take `cpu_latency`, every other device `accel_latency` (infinite
where unsupported). Times stay in the file's own units. Nodes without the attributes keep the
roofline, and fused kernels keep the simulator's estimate (the files know nothing of fusion).

What does not carry over: the files' per-edge communication costs and their max-load objective
are a different cost model from the simulator's (transfers from bytes over links, a list
schedule), so placement on those files keeps its own `ProfiledPlacementContext`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cost_model.costs.source import register_cost_source

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.graph import Graph

__all__ = ["RecordedCosts"]


class RecordedCosts:
    """A `KernelCostSource` reading per-node latencies from node attributes (module docstring)."""

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        times = np.full((problem.num_nodes, len(problem.device_types)), np.nan)
        is_cpu = np.array([t.kind == "cpu" for t in problem.device_types], dtype=bool)
        for index, node in enumerate(problem.nodes):
            attrs = node.attrs
            if "cpu_latency" not in attrs or "accel_latency" not in attrs:
                continue
            supported = "supported_on_accelerator" not in attrs or bool(attrs["supported_on_accelerator"].value)
            times[index, is_cpu] = float(attrs["cpu_latency"].value)
            times[index, ~is_cpu] = float(attrs["accel_latency"].value) if supported else np.inf
        return times

    def kernel_times(
        self, problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_size: np.ndarray, kernel_type: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        return np.asarray(default, dtype=np.float64)


def _recorded(graph: Graph, topology: Topology) -> RecordedCosts:
    return RecordedCosts()


register_cost_source(
    "recorded",
    _recorded,
    "per-node latencies recorded in the model (the profiled placement workloads' cpuLatency/fpgaLatency), in its own units",
)
