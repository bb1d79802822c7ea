"""`simulate(problem, decisions)`: build the task graph, run the event loop, measure memory.

Also `throughput_objective`, the pipelined-throughput objective, which needs no event loop.
"""

from __future__ import annotations

import numpy as np

from cost_model.decisions import DecisionError, Decisions
from cost_model.simulator.engine import run_event_loop
from cost_model.simulator.memory import peak_memory
from cost_model.simulator.problem import SimulationProblem
from cost_model.simulator.result import SimulationResult
from cost_model.simulator.tasks import TaskGraph, build_task_graph

__all__ = ["simulate", "throughput_objective", "device_loads"]


def simulate(problem: SimulationProblem, decisions: Decisions) -> SimulationResult:
    """Event-driven execution of the problem's graph under `decisions` (deterministic)."""
    tasks = build_task_graph(problem, decisions)
    start, end, stuck = run_event_loop(
        tasks.num_resources,
        tasks.duration,
        tasks.resource,
        tasks.rank,
        tasks.by_rank,
        tasks.succ_ptr,
        tasks.succ,
        tasks.pending,
    )
    if stuck:
        raise _deadlock(problem, tasks, stuck)
    step = float(end.max()) if end.size else 0.0
    num_devices = problem.num_devices
    busy = np.bincount(tasks.kernel_device, weights=tasks.kernel_duration, minlength=num_devices)
    link_busy = np.bincount(tasks.hop_link, weights=tasks.hop_duration, minlength=len(problem.topology.links))
    capacity = problem._cache.get("capacity")
    if capacity is None:
        capacity = problem._cache["capacity"] = np.array([d.memory_bytes for d in problem.topology.devices])
    return SimulationResult(
        step_time_s=step,
        busy_s=busy,
        link_busy_s=link_busy,
        bytes_moved=int(tasks.xfer_bytes.sum()),
        peak_memory_bytes=peak_memory(problem, tasks, start, end, step),
        memory_capacity_bytes=capacity,
        task_start=start,
        task_end=end,
        tasks=tasks,
        problem=problem,
    )


def _deadlock(problem: SimulationProblem, tasks: TaskGraph, stuck: int) -> DecisionError:
    """Kernels that never ran: fused groups that depend on each other in a cycle."""
    fused = np.flatnonzero(tasks.kernel_size > 1)
    names = []
    for kernel in fused[:3].tolist():
        members = np.flatnonzero(tasks.kernel_of_node == kernel)[:3]
        names.append("[" + ", ".join(problem.nodes[i].name for i in members.tolist()) + "]")
    return DecisionError(
        f"{stuck} of {tasks.num_tasks} tasks can never run: fusion groups form a cycle "
        f"(a path leaves a group and comes back into it); fused groups include {', '.join(names)}",
        field="fusion_group",
    )


def device_loads(problem: SimulationProblem, decisions: Decisions) -> np.ndarray:
    """Per device: compute time plus the time of every transfer hop it sends or receives."""
    tasks = build_task_graph(problem, decisions)
    num_devices = problem.num_devices
    loads = np.bincount(tasks.kernel_device, weights=tasks.kernel_duration, minlength=num_devices)
    if tasks.hop_link.size:
        src, dst = _link_ends(problem)
        loads += np.bincount(src[tasks.hop_link], weights=tasks.hop_duration, minlength=num_devices)
        loads += np.bincount(dst[tasks.hop_link], weights=tasks.hop_duration, minlength=num_devices)
    return loads


def throughput_objective(problem: SimulationProblem, decisions: Decisions) -> float:
    """Pipelined throughput objective: max over devices of compute plus its incoming and outgoing
    transfer time (lower is better; the steady-state time per sample of a pipeline)."""
    loads = device_loads(problem, decisions)
    return float(loads.max()) if loads.size else 0.0


def _link_ends(problem: SimulationProblem) -> tuple[np.ndarray, np.ndarray]:
    cached = problem._cache.get("link_ends")
    if cached is None:
        topo = problem.topology
        cached = problem._cache["link_ends"] = (
            np.array([topo.device_index(l.src) for l in topo.links], dtype=np.int64),
            np.array([topo.device_index(l.dst) for l in topo.links], dtype=np.int64),
        )
    return cached
