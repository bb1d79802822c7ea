"""Event-driven execution simulator: a graph plus decisions in, step time, memory and a timeline out.

Passes and other callers reach it through the cost door, `cost_model.costs` (a `Target` builds
the problem with its kernel cost source; `SimulatorCostModel` wraps `simulate`).

    problem = SimulationProblem.from_graph(graph, load_topology("4xV100"))   # once per graph
    result = simulate(problem, Decisions.from_graph(graph, problem.topology)) # many times
    to_chrome_trace(result, "trace.json"); plot_gantt(result, "gantt.png")

What is modelled (details in each module's docstring):
- kernels: an unfused node, or the nodes sharing a fusion group id on one device; roofline time
  (a fused group: summed FLOP time, boundary bytes only, one launch) from `problem.py`/`tasks.py`;
- each device runs one kernel at a time, highest priority first among the ready ones (ties: the
  earlier node); each directed link has one copy engine; a value crosses to each destination
  device once, hop by hop (store-and-forward) along the topology's shortest route;
- graph inputs are available at t=0 on the device of their first consumer (in node order) and
  are transferred from there; constants are resident on every device that uses them;
- peak memory per device from value lifetimes (`memory.py`), OOM when it exceeds capacity.
Not modelled: bandwidth shared by several links (a PCIe root complex, an NVSwitch: each directed
link is its own resource), compute and copies competing for memory bandwidth, overlap of a
kernel with its own transfers (a value leaves when its kernel ends), host-side scheduling
overhead beyond the per-kernel launch, recomputation or offloading when memory runs out.
"""

from __future__ import annotations

from cost_model.simulator.export import plot_gantt, to_chrome_trace
from cost_model.simulator.problem import VALUE_CONSTANT, VALUE_INPUT, VALUE_OUTPUT, SimulationProblem
from cost_model.simulator.result import SimulationResult, TimelineEvent
from cost_model.simulator.simulate import device_loads, simulate, throughput_objective
from cost_model.simulator.tasks import TaskGraph, build_task_graph

__all__ = [
    "SimulationProblem",
    "SimulationResult",
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
