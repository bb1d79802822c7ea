"""Event-driven execution simulator: a graph plus decisions in, step time, memory and a timeline out.

    problem = SimulationProblem.from_graph(graph, load_topology("4xV100"))   # once per graph
    result = simulate(problem, Decisions.from_graph(graph, problem.topology)) # many times
    to_chrome_trace(result, "trace.json"); plot_gantt(result, "gantt.png")
"""

from __future__ import annotations

from cost_model.simulator.cost import Cost, CostModel, SimulatorCostModel
from cost_model.simulator.export import plot_gantt, to_chrome_trace
from cost_model.simulator.problem import VALUE_CONSTANT, VALUE_INPUT, VALUE_OUTPUT, SimulationProblem
from cost_model.simulator.result import SimulationResult, TimelineEvent
from cost_model.simulator.simulate import device_loads, simulate, throughput_objective
from cost_model.simulator.tasks import TaskGraph, build_task_graph

__all__ = [
    "Cost",
    "CostModel",
    "SimulationProblem",
    "SimulationResult",
    "SimulatorCostModel",
    "TaskGraph",
    "TimelineEvent",
    "VALUE_CONSTANT",
    "VALUE_INPUT",
    "VALUE_OUTPUT",
    "build_task_graph",
    "device_loads",
    "plot_gantt",
    "simulate",
    "throughput_objective",
    "to_chrome_trace",
]
