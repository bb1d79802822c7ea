"""Placement on the profiled workloads (Tarnawski et al.'s JSON), scored by the paper's cost models.

`ProfiledPlacementContext(workload, objective=...)` presents a `ProfiledWorkload` to every
placement method through `PlacementContextBase`:
- nodes are the workload's rows permuted into a topological order (methods rely on it);
  `to_rows`/`from_rows` convert device arrays; devices: 0 the CPU, 1..k accelerators;
- `times[n, 0]` = CPU latency, `times[n, d >= 1]` = accelerator latency (kept finite where the
  node is unsupported, so the heuristics' sums stay meaningful; `allowed` forbids it there, the
  objective scores such a placement inf and `repair` moves the node to the CPU);
- an edge u -> v moves u's output: `edge_bytes` holds the file's transfer *time* and every route
  has latency 0 and inverse bandwidth 1, so `comm_time(cost, a, b)` is the cost across devices;
- `candidates` = the accelerators (+ the CPU with `include_cpu`); `allowed`: the CPU always, an
  accelerator where supported; `groups` = colour classes; `capacity` = maxSizePerFPGA per
  accelerator, the memory model is the paper's (sum of the sizes placed there), the CPU unbounded.

Objectives (lower is better):
- throughput: the paper's max-load (`cost_model.profiled.device_loads`), ties broken by the
  next-largest loads;
- latency: one sample's end-to-end time, not pipelined. Every node runs on its device for its
  profiled latency; a device runs one node at a time; u's output reaches another device
  `cost(u)` after u ends (once per consuming device, links never queue; as the max-load model,
  a transfer is the edge's cost whichever devices it joins). Nodes are list-scheduled in
  decreasing bottom level under the placement (longest remaining path, transfers included; a
  topological order), each as early as its inputs and its device allow, after the nodes its
  device already runs (HEFT without insertion). The makespan is the latency;
- memory: the largest accelerator memory use as a fraction of capacity.
A placement over capacity scores `OOM_PENALTY_S * (1 + overflow)` more; one that puts an
unsupported node on an accelerator scores inf. `repair` merges colour classes, moves
unsupported nodes to the CPU and relieves over-full accelerators.
"""

from __future__ import annotations

import functools
import logging

import numpy as np

from cost_model.profiled import CPU, ProfiledWorkload, check_assignment, device_loads, topological_rows
from passes.placement.context_base import OOM_PENALTY_S, PlacementContextBase

__all__ = ["ProfiledMemoryTracker", "ProfiledPlacementContext"]

logger = logging.getLogger(__name__)


class ProfiledPlacementContext(PlacementContextBase):
    """A profiled workload prepared for placement methods (module docstring)."""

    def __init__(
        self, workload: ProfiledWorkload, *, objective: str = "throughput", budget: int | None = None, include_cpu: bool = False
    ) -> None:
        self._init_common(objective, budget)
        self.workload = workload
        self.rows = np.asarray(topological_rows(workload), dtype=np.int64)  # context index -> row
        self.index_of_row = np.empty_like(self.rows)
        self.index_of_row[self.rows] = np.arange(self.rows.size)
        w, rows = workload, self.rows
        k = w.accelerators
        self.supported = w.supported[rows]
        self.times = np.empty((rows.size, k + 1))
        self.times[:, CPU] = w.cpu_latency[rows]
        self.times[:, 1:] = w.accel_latency[rows][:, None]
        self.cost = w.send_cost[rows]
        self.size = w.size[rows]
        pairs = np.unique(np.stack([self.index_of_row[w.edge_src], self.index_of_row[w.edge_dst]], axis=1), axis=0)
        pairs = pairs.reshape(-1, 2)
        self.edge_src, self.edge_dst = pairs[:, 0].copy(), pairs[:, 1].copy()
        self.edge_bytes = self.cost[self.edge_src]
        self._adjacency()
        self.route_latency = np.zeros((k + 1, k + 1))
        self.route_inv_bw = 1.0 - np.eye(k + 1)
        self.candidates = np.arange(0 if include_cpu else 1, k + 1, dtype=np.int64)
        self.allowed = np.ones((rows.size, k + 1), dtype=bool)
        self.allowed[:, 1:] = self.supported[:, None]
        self.capacity = np.full(k + 1, w.memory_per_accelerator, dtype=np.float64)
        self.capacity[CPU] = np.inf
        self.node_names = [f"node{int(i)}" for i in w.node_ids[rows]]
        self.device_names = ["cpu"] + [f"accelerator{d}" for d in range(1, k + 1)]

    # -- conversions -----------------------------------------------------------------------------
    def to_rows(self, device: np.ndarray) -> np.ndarray:
        """A device array in context order as one in the workload's row order."""
        out = np.empty_like(np.asarray(device, dtype=np.int64))
        out[self.rows] = device
        return out

    def from_rows(self, assignment: np.ndarray) -> np.ndarray:
        return np.asarray(assignment, dtype=np.int64)[self.rows]

    @functools.cached_property
    def group_of(self) -> np.ndarray:
        _, inverse = np.unique(self.workload.color[self.rows], return_inverse=True)
        return inverse.reshape(-1).astype(np.int64)

    @functools.cached_property
    def device_speed(self) -> np.ndarray:
        return 1.0 / np.maximum(self.times[:, self.candidates].sum(axis=0), 1e-30)

    # -- objectives ------------------------------------------------------------------------------
    def memory_used(self, device: np.ndarray) -> np.ndarray:
        return np.bincount(device, weights=self.size, minlength=self.num_devices)

    def _objective(self, device: np.ndarray) -> tuple[float, ...]:
        if (~self.allowed[np.arange(device.size), device]).any():
            return (np.inf,)
        used = self.memory_used(device)
        fraction = used[1:] / self.capacity[1:]
        overflow = float(np.maximum(fraction - 1.0, 0.0).max(initial=0.0))
        penalty = OOM_PENALTY_S * (1.0 + overflow) if overflow > 0 else 0.0
        if self.objective == "throughput":
            self.last_loads = device_loads(self.workload, self.to_rows(device))
            loads = np.sort(self.last_loads)[::-1]
            return (float(loads[0]) + penalty, *loads[1:].tolist())
        if self.objective == "latency":
            return (self.latency(device) + penalty,)
        return (float(fraction.max(initial=0.0)) + penalty,)

    def latency(self, device: np.ndarray) -> float:
        """One sample's end-to-end time under the list schedule of the module docstring."""
        return float(self.schedule(device)[1].max(initial=0.0))

    def schedule(self, device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, finish) per node of the latency model's list schedule."""
        n = self.num_nodes
        dev = device.tolist()
        duration = self.times[np.arange(n), device].tolist()
        cost = self.cost.tolist()
        succs, preds = self.succs, self.preds
        level = [0.0] * n
        for u in range(n - 1, -1, -1):
            du = dev[u]
            tail = 0.0
            for s in succs[u]:
                t = level[s] + (cost[u] if dev[s] != du else 0.0)
                if t > tail:
                    tail = t
            level[u] = duration[u] + tail
        order = sorted(range(n), key=lambda u: (-level[u], u))
        free = [0.0] * self.num_devices
        start = [0.0] * n
        finish = [0.0] * n
        for v in order:
            dv = dev[v]
            ready = free[dv]
            for u in preds[v]:
                t = finish[u] + (cost[u] if dev[u] != dv else 0.0)
                if t > ready:
                    ready = t
            start[v] = ready
            finish[v] = free[dv] = ready + duration[v]
        return np.asarray(start), np.asarray(finish)

    def lower_bound(self) -> float:
        """A bound no placement beats: throughput, the fractional knapsack of moving work to the
        CPU (`_load_bound`); latency, max(critical path with each node's fastest time and free
        transfers, total fastest work / number of devices); memory, total size / total capacity."""
        accel = np.where(self.supported, self.times[:, 1], np.inf)
        fastest = np.minimum(self.times[:, CPU], accel)
        if self.objective == "latency":
            path = fastest.copy()
            for v in range(self.num_nodes):
                if self.preds[v]:
                    path[v] += max(path[u] for u in self.preds[v])
            return float(max(path.max(initial=0.0), fastest.sum() / self.num_devices))
        if self.objective == "memory":
            return float(self.size[self.supported].sum() / self.capacity[1:].sum())
        return _load_bound(accel, self.times[:, CPU], self.num_devices - 1)

    # -- constraints -----------------------------------------------------------------------------
    def violations(self, device: np.ndarray) -> list[str]:
        return check_assignment(self.workload, self.to_rows(device))

    def repair(self, device: np.ndarray) -> np.ndarray:
        """Unsupported nodes to the CPU; each colour class onto one device (the CPU if a member
        must run there, else the device holding most of the class's accelerator work); then, while
        an accelerator is over capacity, its smallest class that fits elsewhere moves to the
        accelerator with the most free memory (the CPU if none has room)."""
        device = np.asarray(device, dtype=np.int64).copy()
        before = device.copy()
        device[(device != CPU) & ~self.supported] = CPU
        work = np.where(self.supported, self.times[:, 1], self.times[:, CPU])
        for members in self.groups:
            if members.size < 2:
                continue
            devices = device[members]
            if (devices == devices[0]).all():
                continue
            if (~self.supported[members]).any():
                device[members] = CPU
                continue
            share = np.bincount(devices, weights=work[members] + 1e-12, minlength=self.num_devices)
            device[members] = int(np.argmax(share))
        used = self.memory_used(device)
        for d in range(1, self.num_devices):
            while used[d] > self.capacity[d]:
                on_d = [g for g in range(len(self.groups)) if device[self.groups[g][0]] == d]
                sizes = [float(self.size[self.groups[g]].sum()) for g in on_d]
                free = self.capacity - used
                free[CPU], free[d] = -np.inf, -np.inf
                target = int(np.argmax(free))
                movable = [(s, g) for s, g in zip(sizes, on_d) if s > 0]
                fitting = [(s, g) for s, g in movable if s <= free[target]]
                s, g = min(fitting) if fitting else max(movable)
                to = target if fitting else CPU
                device[self.groups[g]] = to
                used[d] -= s
                used[to] += s
        changed = int((device != before).sum())
        if changed:
            logger.info("repair: moved %d nodes (colour classes, unsupported nodes, memory)", changed)
        return device

    def memory_tracker(self) -> ProfiledMemoryTracker:
        return ProfiledMemoryTracker(self)


def _load_bound(accel: np.ndarray, cpu: np.ndarray, k: int) -> float:
    """Smallest L with: some fraction of the work moved to the CPU costs at most L there, and the
    rest spread over k accelerators is at most L each (communication ignored). Moving work in
    order of accelerator time saved per CPU time spent is optimal for this relaxation."""
    finite = np.isfinite(accel)
    forced = float(cpu[~finite].sum())
    a, c = accel[finite], cpu[finite]
    order = np.argsort(-(a / np.maximum(c, 1e-30)), kind="stable")
    a, c = a[order], c[order]
    total = float(a.sum())
    lo, hi = max(forced, 0.0), max(forced + float(c.sum()), total / k, forced)
    for _ in range(100):  # bisection on L
        mid = (lo + hi) / 2
        room = mid - forced
        if room < 0:
            lo = mid
            continue
        spent = np.cumsum(c)
        full = int(np.searchsorted(spent, room, side="right"))
        saved = float(a[:full].sum())
        if full < a.size:
            saved += a[full] * (room - (spent[full - 1] if full else 0.0)) / max(c[full], 1e-30)
        if (total - saved) / k <= mid:
            hi = mid
        else:
            lo = mid
    return float(max(hi, 0.0))


class ProfiledMemoryTracker:
    """The paper's memory model, incrementally: an accelerator holds the sizes of its nodes."""

    def __init__(self, ctx: ProfiledPlacementContext) -> None:
        self.ctx = ctx
        self.used = np.zeros(ctx.num_devices, dtype=np.float64)
        self.device = np.full(ctx.num_nodes, -1, dtype=np.int64)
        self.overflows = 0  # as MemoryTracker's

    def extra(self, node: int, device: int) -> np.ndarray:
        add = np.zeros(self.ctx.num_devices)
        if device != CPU:
            add[device] = self.ctx.size[node]
        return add

    def fits(self, node: int, device: int) -> bool:
        if not self.ctx.allowed[node, device]:
            return False
        return device == CPU or self.used[device] + self.ctx.size[node] <= self.ctx.capacity[device]

    def place(self, node: int, device: int) -> None:
        self.used += self.extra(node, device)
        self.device[node] = device
