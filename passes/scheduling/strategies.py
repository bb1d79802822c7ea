"""Scheduling strategies: a priority per node (higher runs first among ready kernels on a device).

All work on a `SimulationProblem` (node index order is topological; dependencies include values
captured by subgraphs) and the nodes' current device decisions.
- `topological`: the graph's order, first node highest.
- `critical-path`: list-scheduling priorities = bottom level, the longest path from the node to
  a sink, counting each node's roofline time on its device and, on edges that cross devices, the
  transfer time on idle links. The node that heads the longest remaining chain goes first
  (HLFET / HEFT's upward rank).
- `memory`: a greedy sequential order that keeps the live set small. Objective: the peak over
  the order of the bytes held, where a node's outputs are allocated when it runs and a value is
  freed after its last consumer runs (graph outputs are never freed, constants do not count).
  At each step, among the ready nodes, run the one whose net change (bytes it allocates minus
  bytes it frees) is smallest; ties go to the larger bottom level, then the earlier node. This
  is the classic greedy for the (NP-hard) minimum-peak-memory ordering; it is exact on
  series-parallel graphs of independent branches that each end in a small value, the case it
  targets (run each branch to its reduction before starting the next).
"""

from __future__ import annotations

import heapq

import numpy as np

from cost_model.decisions import Decisions
from cost_model.costs import SimulationProblem
from cost_model.costs import VALUE_CONSTANT

__all__ = ["STRATEGIES", "bottom_levels", "memory_order", "schedule_priorities", "sequential_peak_bytes"]

STRATEGIES = ("topological", "critical-path", "memory")


def _edges(problem: SimulationProblem) -> tuple[list[list[int]], list[list[int]]]:
    src, dst = problem.node_edges()
    preds: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    succs: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for a, b in zip(src.tolist(), dst.tolist()):
        preds[b].append(a)
        succs[a].append(b)
    return preds, succs


def bottom_levels(problem: SimulationProblem, decisions: Decisions) -> np.ndarray:
    """Longest path to a sink under the current placement (module docstring)."""
    n = problem.num_nodes
    device = decisions.device.astype(np.int64)
    time = problem.node_time[np.arange(n), problem.device_type_of[device]]
    topo = problem.topology
    uv, un = problem.use_value, problem.use_node
    producer = problem.value_producer[uv]
    keep = producer >= 0
    crossing: dict[tuple[int, int], float] = {}
    for v, p, c in zip(uv[keep].tolist(), producer[keep].tolist(), un[keep].tolist()):
        if device[p] != device[c]:
            crossing[(p, c)] = crossing.get((p, c), 0.0) + float(problem.value_bytes[v])
    _, succs = _edges(problem)
    level = time.astype(np.float64).copy()
    for node in range(n - 1, -1, -1):
        best = 0.0
        for s in succs[node]:
            nbytes = crossing.get((node, s))
            delay = 0.0 if nbytes is None else topo.transfer_time(int(device[node]), int(device[s]), nbytes)
            best = max(best, delay + level[s])
        level[node] += best
    return level


def _value_tables(problem: SimulationProblem) -> tuple[list[list[int]], list[list[int]], list[int], list[float], list[bool]]:
    """Per node: values it produces, values it reads (non-constant); per value: consumer count,
    bytes, and whether it lives to the end (graph output)."""
    n = problem.num_nodes
    produces: list[list[int]] = [[] for _ in range(n)]
    for v, p in enumerate(problem.value_producer.tolist()):
        if p >= 0:
            produces[p].append(v)
    reads: list[list[int]] = [[] for _ in range(n)]
    for v, c in zip(problem.use_value.tolist(), problem.use_node.tolist()):
        if problem.value_kind[v] != VALUE_CONSTANT:
            reads[c].append(v)
    return produces, reads, problem.value_num_uses.tolist(), problem.value_bytes.astype(float).tolist(), problem.value_is_output.tolist()


def memory_order(problem: SimulationProblem, tie_break: np.ndarray | None = None) -> list[int]:
    """The greedy minimum-live-memory order (module docstring)."""
    n = problem.num_nodes
    preds, succs = _edges(problem)
    produces, reads, uses, nbytes, is_output = _value_tables(problem)
    remaining = list(uses)
    tie = tie_break if tie_break is not None else np.zeros(n)

    def delta(node: int) -> float:
        alloc = sum(nbytes[v] for v in produces[node] if remaining[v] > 0 or is_output[v])
        freed = sum(nbytes[v] for v in reads[node] if remaining[v] == 1 and not is_output[v])
        return alloc - freed

    waiting = [len(p) for p in preds]
    ready = {node for node in range(n) if waiting[node] == 0}
    order: list[int] = []
    while ready:
        # The live-set change of a ready node depends on what ran before; recompute each step
        # (ready sets are small next to the graph).
        node = min(ready, key=lambda v: (delta(v), -tie[v], v))
        ready.remove(node)
        order.append(node)
        for v in reads[node]:
            remaining[v] -= 1
        for s in succs[node]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.add(s)
    return order


def sequential_peak_bytes(problem: SimulationProblem, order: list[int]) -> float:
    """Peak live bytes when the nodes run one after another in `order` (the memory objective)."""
    produces, reads, uses, nbytes, is_output = _value_tables(problem)
    remaining = list(uses)
    live = sum(nbytes[v] for v in range(len(nbytes)) if problem.value_producer[v] < 0 and problem.value_kind[v] != VALUE_CONSTANT)
    peak = live
    for node in order:
        live += sum(nbytes[v] for v in produces[node])
        peak = max(peak, live)
        for v in produces[node]:
            if remaining[v] == 0 and not is_output[v]:
                live -= nbytes[v]
        for v in reads[node]:
            remaining[v] -= 1
            if remaining[v] == 0 and not is_output[v]:
                live -= nbytes[v]
    return peak


def schedule_priorities(problem: SimulationProblem, decisions: Decisions, strategy: str) -> tuple[np.ndarray, list[int]]:
    """(priority per node, the order it induces) for `strategy`."""
    n = problem.num_nodes
    if strategy == "topological":
        order = list(range(n))
    elif strategy == "critical-path":
        level = bottom_levels(problem, decisions)
        return level, _order_by_priority(problem, level)
    elif strategy == "memory":
        order = memory_order(problem, bottom_levels(problem, decisions))
    else:
        raise ValueError(f"unknown scheduling strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    priority = np.empty(n, dtype=np.float64)
    priority[np.asarray(order, dtype=np.int64)] = np.arange(n, 0, -1, dtype=np.float64)
    return priority, order


def _order_by_priority(problem: SimulationProblem, priority: np.ndarray) -> list[int]:
    """A topological order that takes the highest-priority ready node first."""
    preds, succs = _edges(problem)
    waiting = [len(p) for p in preds]
    heap = [(-priority[v], v) for v in range(problem.num_nodes) if waiting[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, v = heapq.heappop(heap)
        order.append(v)
        for s in succs[v]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(heap, (-priority[s], s))
    return order
