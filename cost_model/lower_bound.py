"""Lower bounds on the simulated step time, and a memory feasibility check, from the problem alone.

`step_time_lower_bound(problem)` = max(critical path, work bound); it holds for *every* decision
(any placement, priorities and, unless `fusion=False` is promised, fusion groups):

- Per-node weights. Without fusion each kernel is one node, so a node costs at least its fastest
  roofline time `node_time[n, t]` (launch included). With fusion a kernel's time is
  max(sum of its FLOP times, boundary bytes / bandwidth) + one launch, which can be less than the
  sum of its nodes' times, so two *additive* measures are used instead, each a lower bound alone:
  F[n, t] = FLOP time, and M[n, t] = unavoidable bytes / bandwidth, where the unavoidable bytes of
  a node are its share of each constant or graph input it reads (bytes / number of consumer
  nodes: a kernel reads such a value once, whichever of its nodes use it) plus the graph outputs
  and unused outputs it writes (always written).
- Critical path: a path's kernels run one after another, and each kernel lasts at least the sum
  of the path nodes' weights inside it, plus one launch; transfers only add. So the longest path
  under min-over-device-types weights, plus the smallest launch overhead, is a bound.
- Work bound: for any positive speeds s_d, put w_n = min_d t[n, d] * s_d; then t[n, d] >= w_n / s_d
  for every device, each device's busy time is at most T, and summing s_d * busy_d over devices
  gives T >= sum_n w_n / sum_d s_d. This is "total work / total throughput" made exact for
  heterogeneous devices; several choices of s (uniform, peak FLOP/s, bandwidth, 1 / time to run
  the whole graph alone) are tried and the largest bound kept.

`memory_feasible(problem)` checks necessary conditions only: every constant fits somewhere, the
constants altogether fit in the total capacity, and each node's unavoidable working set fits the
largest device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cost_model.simulator.problem import VALUE_CONSTANT, VALUE_INPUT, SimulationProblem

__all__ = [
    "step_time_lower_bound",
    "critical_path_bound",
    "work_bound",
    "unavoidable_node_bytes",
    "memory_feasible",
    "MemoryFeasibility",
]


def unavoidable_node_bytes(problem: SimulationProblem) -> np.ndarray:
    """Per node: bytes every kernel containing it must move (see the module docstring)."""
    uv, un = problem.use_value, problem.use_node
    kind = problem.value_kind[uv]
    shared = (kind == VALUE_CONSTANT) | (kind == VALUE_INPUT)
    share = problem.value_bytes[uv[shared]] / np.maximum(problem.value_num_uses[uv[shared]], 1)
    out = np.bincount(un[shared], weights=share, minlength=problem.num_nodes).astype(np.float64)
    written = (problem.value_producer >= 0) & (problem.value_is_output | (problem.value_num_uses == 0))
    ids = np.flatnonzero(written)
    out += np.bincount(problem.value_producer[ids], weights=problem.value_bytes[ids], minlength=problem.num_nodes)
    return out


def _weights(problem: SimulationProblem, fusion: bool) -> list[np.ndarray]:
    """Additive per-node, per-device-type time measures, each a valid lower bound on kernel time."""
    if not fusion:
        return [problem.node_time]
    memory = unavoidable_node_bytes(problem)[:, None] / problem.type_bandwidth[None, :]
    return [problem.flop_time, memory]


def _longest_path(problem: SimulationProblem, weight: np.ndarray) -> float:
    """Longest node-weighted path; node indices are topological, so one forward sweep suffices."""
    if weight.size == 0:
        return 0.0
    src, dst = problem.node_edges()
    order = np.argsort(dst, kind="stable")
    src_sorted = src[order].tolist()
    ptr = np.searchsorted(dst[order], np.arange(problem.num_nodes + 1)).tolist()
    dist = weight.tolist()
    for node in range(problem.num_nodes):
        lo, hi = ptr[node], ptr[node + 1]
        if lo < hi:
            dist[node] += max([dist[p] for p in src_sorted[lo:hi]])
    return max(dist)


def critical_path_bound(problem: SimulationProblem, *, fusion: bool = True) -> float:
    """Longest path with every node on its fastest device type and free transfers."""
    if problem.num_nodes == 0:
        return 0.0
    best = max(_longest_path(problem, w.min(axis=1)) for w in _weights(problem, fusion))
    if fusion:
        best += float(problem.type_launch.min())  # at least one kernel, with its launch
    return best


def work_bound(problem: SimulationProblem, *, fusion: bool = True) -> float:
    """max over speed vectors s of sum_n min_d(t[n, d] s_d) / sum_d s_d (see the module docstring)."""
    if problem.num_nodes == 0:
        return 0.0
    type_of = problem.device_type_of
    types = problem.device_types
    counts = np.bincount(type_of, minlength=len(types)).astype(np.float64)  # devices per type
    best = 0.0
    for weight in _weights(problem, fusion):
        speeds = [
            np.ones(len(types)),
            np.array([t.peak("fp32") for t in types]),
            np.array([t.mem_bandwidth for t in types]),
        ]
        totals = weight.sum(axis=0)
        if np.all(totals > 0):
            speeds.append(1.0 / totals)
        for s in speeds:
            bound = float((weight * s[None, :]).min(axis=1).sum() / (counts * s).sum())
            best = max(best, bound)
    return best


def step_time_lower_bound(problem: SimulationProblem, *, fusion: bool = True) -> float:
    """max(critical path, work bound); `fusion=False` gives a tighter bound valid only for
    decisions without fusion groups."""
    return max(critical_path_bound(problem, fusion=fusion), work_bound(problem, fusion=fusion))


@dataclass(frozen=True)
class MemoryFeasibility:
    feasible: bool
    reasons: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.feasible


def memory_feasible(problem: SimulationProblem, *, fusion: bool = True) -> MemoryFeasibility:
    """Necessary conditions for some decision to run without OOM (not sufficient)."""
    capacities = np.array([d.memory_bytes for d in problem.topology.devices], dtype=np.float64)
    largest, total = float(capacities.max()), float(capacities.sum())
    reasons: list[str] = []
    constants = np.flatnonzero((problem.value_kind == VALUE_CONSTANT) & (problem.value_num_uses > 0))
    const_bytes = problem.value_bytes[constants]
    if const_bytes.sum() > total:
        reasons.append(f"constants need {int(const_bytes.sum())} bytes, all devices hold {int(total)}")
    if const_bytes.size and const_bytes.max() > largest:
        name = problem.values[int(constants[int(const_bytes.argmax())])].name
        reasons.append(f"constant %{name} ({int(const_bytes.max())} bytes) fits no device ({int(largest)} bytes)")
    uv, un = problem.use_value, problem.use_node
    if fusion:
        kind = problem.value_kind[uv]
        keep = (kind == VALUE_CONSTANT) | (kind == VALUE_INPUT)
        need = np.bincount(un[keep], weights=problem.value_bytes[uv[keep]], minlength=problem.num_nodes)
        out = np.flatnonzero((problem.value_producer >= 0) & problem.value_is_output)
    else:
        need = np.bincount(un, weights=problem.value_bytes[uv], minlength=problem.num_nodes)
        out = np.flatnonzero(problem.value_producer >= 0)
    need = need + np.bincount(problem.value_producer[out], weights=problem.value_bytes[out], minlength=problem.num_nodes)
    if need.size and need.max() > largest:
        node = int(need.argmax())
        reasons.append(
            f"node {problem.nodes[node].name!r} needs {int(need[node])} bytes at once, the largest device holds {int(largest)}"
        )
    return MemoryFeasibility(not reasons, tuple(reasons))
