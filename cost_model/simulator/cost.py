"""The one interface every cost source answers through: `estimate(graph_or_problem, decisions) -> Cost`.

The simulator is the first implementation (`SimulatorCostModel`); profiled tables, the learned
kernel model and real measurement will implement the same `CostModel` protocol, so passes, the
policy and the autotuner never care which one answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Union, runtime_checkable

from cost_model.decisions import Decisions
from cost_model.simulator.problem import SimulationProblem
from cost_model.simulator.simulate import simulate

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.simulator.result import SimulationResult
    from graph_ir.graph import Graph

__all__ = ["Cost", "CostModel", "SimulatorCostModel"]

GraphOrProblem = Union["Graph", SimulationProblem]


@dataclass(frozen=True)
class Cost:
    """What any cost source reports for one graph under one set of decisions."""

    step_time_s: float
    busy_s: tuple[float, ...]  # per device
    peak_memory_bytes: tuple[int, ...]  # per device
    bytes_moved: int
    oom: bool
    device_names: tuple[str, ...] = ()

    @classmethod
    def from_result(cls, result: SimulationResult) -> Cost:
        return cls(
            step_time_s=result.step_time_s,
            busy_s=tuple(result.busy_s.tolist()),
            peak_memory_bytes=tuple(int(x) for x in result.peak_memory_bytes.tolist()),
            bytes_moved=int(result.bytes_moved),
            oom=result.any_oom,
            device_names=result.device_names,
        )


@runtime_checkable
class CostModel(Protocol):
    def estimate(self, graph_or_problem: GraphOrProblem, decisions: Decisions | None = None) -> Cost:
        """Cost of running the graph under `decisions` (default: the decisions on its nodes)."""
        ...


class SimulatorCostModel:
    """`CostModel` backed by the event-driven simulator with roofline kernel times.

    Pass a `SimulationProblem` when estimating many decisions for one graph: building the
    problem from a graph walks every node; simulating reuses its arrays.
    """

    def __init__(self, topology: Topology | str) -> None:
        if isinstance(topology, str):
            from cost_model.devices.loader import load_topology

            topology = load_topology(topology)
        self.topology = topology

    def problem(self, graph: Graph) -> SimulationProblem:
        return SimulationProblem.from_graph(graph, self.topology)

    def estimate(self, graph_or_problem: GraphOrProblem, decisions: Decisions | None = None) -> Cost:
        if isinstance(graph_or_problem, SimulationProblem):
            problem = graph_or_problem
            if decisions is None:
                decisions = Decisions.from_graph(_root_graph(problem), self.topology, nodes=problem.nodes)
        else:
            problem = self.problem(graph_or_problem)
            if decisions is None:
                decisions = Decisions.from_graph(graph_or_problem, self.topology, nodes=problem.nodes)
        return Cost.from_result(simulate(problem, decisions))


def _root_graph(problem: SimulationProblem) -> Graph:
    if not problem.nodes or problem.nodes[0].graph is None:
        from graph_ir.graph import Graph

        return Graph()
    return problem.nodes[0].graph
