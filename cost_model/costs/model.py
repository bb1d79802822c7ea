"""Whole-graph cost: `estimate(graph_or_problem, decisions) -> Cost`.

`SimulatorCostModel` answers with the event-driven simulator, using the target's kernel cost
source (roofline, profiled, learned) for node and kernel times; callers (passes, the policy, the
autotuner, `optimize`) see only `Cost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Union, runtime_checkable

from cost_model.costs.target import Target
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
    """`CostModel` backed by the simulator on a target (a `Target`, a device spec or a Topology).

    Pass a `SimulationProblem` (from `problem(graph)`) when estimating many decisions for one
    graph: building it walks every node (and, for measured sources, times them); simulating
    reuses its arrays.
    """

    def __init__(self, target: Target | Topology | str) -> None:
        if not isinstance(target, Target):
            target = Target(devices=target)
        self.target = target

    @property
    def topology(self) -> Topology:
        return self.target.topology

    def problem(self, graph: Graph) -> SimulationProblem:
        return self.target.problem(graph)

    def estimate(self, graph_or_problem: GraphOrProblem, decisions: Decisions | None = None) -> Cost:
        if isinstance(graph_or_problem, SimulationProblem):
            problem = graph_or_problem
            if decisions is None:
                decisions = Decisions.from_graph(_root_graph(problem), problem.topology, nodes=problem.nodes)
        else:
            problem = self.problem(graph_or_problem)
            if decisions is None:
                decisions = Decisions.from_graph(graph_or_problem, problem.topology, nodes=problem.nodes)
        return Cost.from_result(simulate(problem, decisions))


def _root_graph(problem: SimulationProblem) -> Graph:
    if not problem.nodes or problem.nodes[0].graph is None:
        from graph_ir.graph import Graph

        return Graph()
    return problem.nodes[0].graph
