"""The interface every placement method programs against, and what its two implementations share.

`PlacementContextBase` is a placement problem as arrays (node index order is topological), with
a budgeted objective:
- `times[n, d]`: node n alone on device d (inf: it cannot run there);
- node-level edges `edge_src -> edge_dst` with `edge_bytes` (what `comm_time` moves), and
  `preds`/`succs`/`pred_edges`; `route_latency`/`route_inv_bw` between devices;
- `candidates` (where methods place by default) and `allowed[n, d]` (where node n may go at all);
- `groups`/`group_of`: nodes that must share a device (colour classes; singletons otherwise);
- `capacity[d]` and `memory_tracker()`: an incremental memory model for the m-* methods;
- `evaluate(device)` / `evaluate_key(device)`: the objective of a full placement (lower is
  better), counted against `budget` (`BudgetExhausted` past it);
- `repair(device)`: a valid placement near `device` (groups merged, forbidden devices and
  memory overflow fixed) for methods that cannot respect the constraints natively.
Implementations: `PlacementContext` (a graph on a topology, scored by the simulator) and
`ProfiledPlacementContext` (a profiled workload, scored by the paper's cost models).
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np

from cost_model.costs.target import OBJECTIVES
from cost_model.decisions import Decisions
from graph_ir.errors import CompilerOptError

__all__ = ["OBJECTIVES", "OOM_PENALTY_S", "BudgetExhausted", "PlacementContextBase", "PlacementError", "members_by_group"]

OOM_PENALTY_S = 1e3


class PlacementError(CompilerOptError):
    """A placement option is invalid, or a method cannot produce a placement."""


class BudgetExhausted(PlacementError):
    """A search asked for more objective evaluations than its budget allows."""


def members_by_group(group_of: np.ndarray) -> list[np.ndarray]:
    """The node indices of each group, by group index (`group_of`: a group index per node)."""
    group_of = np.asarray(group_of)
    order = np.argsort(group_of, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(group_of[order])) + 1) if group_of.size else []


class PlacementContextBase:
    """Shared machinery; subclasses set the arrays in `__init__` and implement `_objective`."""

    objective: str
    times: np.ndarray
    capacity: np.ndarray
    candidates: np.ndarray
    allowed: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_bytes: np.ndarray
    route_latency: np.ndarray
    route_inv_bw: np.ndarray
    node_names: list[str]
    device_names: list[str]

    def _init_common(self, objective: str, budget: int | None) -> None:
        if objective not in OBJECTIVES:
            raise PlacementError(f"objective must be one of {OBJECTIVES}, got {objective!r}", field="objective")
        if budget is not None and budget < 1:
            raise PlacementError(f"budget must be at least 1 evaluation, got {budget}", field="budget")
        self.objective = objective
        self.budget = budget
        self.evaluations = 0
        # A search's CPU deadline (`time.process_time()`; inf: none): the pass option `cpu_seconds`.
        self.deadline = math.inf
        # Methods that also decide an order (cp-sat) leave priorities here; extras hold
        # method-specific results (a solver's status) for callers that want them.
        self.priority: np.ndarray | None = None
        self.extras: dict[str, object] = {}
        # Per-device loads seen by the last counted throughput evaluation (None: unknown), so a
        # search can aim its next moves without spending another evaluation.
        self.last_loads: np.ndarray | None = None
        # The last counted simulation (None: not simulated, e.g. a profiled workload): a search
        # orders its next moves by its slack (`local_search`, move_order "slack").
        self.last_result: object | None = None

    def _adjacency(self) -> None:
        n = self.num_nodes
        self.preds: list[list[int]] = [[] for _ in range(n)]
        self.succs: list[list[int]] = [[] for _ in range(n)]
        self.pred_edges: list[list[int]] = [[] for _ in range(n)]
        for e, (a, b) in enumerate(zip(self.edge_src.tolist(), self.edge_dst.tolist())):
            self.succs[a].append(b)
            self.preds[b].append(a)
            self.pred_edges[b].append(e)

    # -- structure -------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return int(self.times.shape[0])

    @property
    def num_devices(self) -> int:
        return int(self.times.shape[1])

    @functools.cached_property
    def group_of(self) -> np.ndarray:
        """Group index of every node (singletons unless a subclass says otherwise)."""
        return np.arange(self.num_nodes, dtype=np.int64)

    @functools.cached_property
    def groups(self) -> list[np.ndarray]:
        return members_by_group(self.group_of)

    @functools.cached_property
    def group_choices(self) -> list[np.ndarray] | None:
        """Per group, the candidates all its members allow (else every device they allow); None
        when every group may use every candidate (the common case, kept on a fast path)."""
        choices = []
        for members in self.groups:
            ok = self.allowed[members].all(axis=0)
            inside = self.candidates[ok[self.candidates]]
            choices.append(inside if inside.size else np.flatnonzero(ok))
        if all(c.size == self.candidates.size for c in choices):
            return None
        return choices

    @functools.cached_property
    def device_speed(self) -> np.ndarray:
        """Relative speed of each candidate (inverse of its time for the whole graph)."""
        totals = np.where(np.isfinite(self.times[:, self.candidates]), self.times[:, self.candidates], 0.0).sum(axis=0)
        return 1.0 / np.maximum(totals, 1e-30)

    def comm_time(self, nbytes: float, src: int, dst: int) -> float:
        """Transfer time of `nbytes` from `src` to `dst` on idle links (0 on the same device)."""
        if src == dst:
            return 0.0
        return float(self.route_latency[src, dst] + nbytes * self.route_inv_bw[src, dst])

    def worst_comm_time(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        """The slowest transfer between two distinct candidate devices (a placement-free estimate)."""
        c = self.candidates
        if c.size < 2:
            return nbytes * 0.0
        lat = self.route_latency[np.ix_(c, c)]
        inv = self.route_inv_bw[np.ix_(c, c)]
        off = ~np.eye(c.size, dtype=bool)
        return lat[off].max() + np.asarray(nbytes) * inv[off].max()

    @functools.cached_property
    def fastest_device(self) -> int:
        """The candidate device running the whole graph's compute fastest."""
        totals = self.times[:, self.candidates].sum(axis=0)
        return int(self.candidates[int(np.argmin(totals))])

    @functools.cached_property
    def bottom_level(self) -> np.ndarray:
        """Longest path from each node to a sink: fastest-candidate node times plus the slowest
        candidate transfer per edge (the HEFT/CPOP 'upward rank' with placement-free costs)."""
        w = self.times[:, self.candidates].min(axis=1).tolist()
        comm = np.asarray(self.worst_comm_time(self.edge_bytes)).tolist() if self.edge_bytes.size else []
        level = list(w)
        out: list[list[tuple[int, float]]] = [[] for _ in range(self.num_nodes)]
        for e, (a, b) in enumerate(zip(self.edge_src.tolist(), self.edge_dst.tolist())):
            out[a].append((b, comm[e]))
        for node in range(self.num_nodes - 1, -1, -1):
            if out[node]:
                level[node] = w[node] + max(level[s] + c for s, c in out[node])
        return np.asarray(level)

    # -- evaluation ------------------------------------------------------------------------------
    def _count(self) -> None:
        if self.budget is not None and self.evaluations >= self.budget:
            raise BudgetExhausted(f"the evaluation budget of {self.budget} is spent", field="budget")
        if self.evaluations and time.process_time() >= self.deadline:  # like a budget: one evaluation always runs
            raise BudgetExhausted("the search's CPU seconds are spent", field="cpu_seconds")
        self.evaluations += 1

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.evaluations

    def evaluate(self, device: np.ndarray) -> float:
        """Objective of a placement through one counted evaluation."""
        return self.evaluate_key(device)[0]

    def evaluate_key(self, device: np.ndarray) -> tuple[float, ...]:
        """One counted evaluation: (objective, tie-breakers...) for searches that compare
        placements with equal objectives (e.g. the second-largest load under max-load)."""
        self._count()
        return self._objective(np.asarray(device, dtype=np.int64))

    def _objective(self, device: np.ndarray) -> tuple[float, ...]:
        raise NotImplementedError

    def decisions(self, device: np.ndarray) -> Decisions:
        """`device` as decisions (unfused, priority 0; the graph context keeps its own)."""
        n = self.num_nodes
        return Decisions(np.asarray(device), np.full(n, -1), np.zeros(n))

    def repair(self, device: np.ndarray) -> np.ndarray:
        """A valid placement near `device` (the default: `device` itself)."""
        return device

    def violations(self, device: np.ndarray) -> list[str]:
        """Hard-constraint violations of a final placement (empty when valid)."""
        return []

    def memory_tracker(self) -> Any:
        raise NotImplementedError
