"""Local search from the contiguous DP's placement (`dp-ls`): moves and swaps of co-location groups.

The DP's optimum is over contiguous splits only; on training graphs a non-contiguous placement
can do much better (Tarnawski et al. report 90.95 against the DP's 107.00 on GNMT training), and
this is the refinement that finds such placements.

- State: a device per group (colour class on a profiled workload, a node on a graph); a group
  may go to any device all its members allow (the CPU included on profiled workloads: a move
  there is kept only when it helps).
- Comparison: `ctx.evaluate_key`, lexicographic: the objective, then tie-breakers (under max-load
  the loads in decreasing order, so emptying one of two equally loaded bottlenecks counts).
- Moves, first improvement: under max-load the groups on the most loaded device (known from the
  last counted evaluation) move to every other device, then swap with groups elsewhere; under
  other objectives every group, in random order, moves to its neighbours' devices first. Each
  candidate is one counted evaluation.
- Move order `slack` (latency objective, simulated contexts): groups in increasing slack of their
  least-slack member under the current placement's simulation (`cost_model.simulator.slack`:
  0 = on the critical path), ties in random order. A move off the critical path cannot shorten
  the step, and on held-out polish traces the least-slack order ranked improving moves at AUC
  0.56-0.99 (random 0.45-0.60). As the search's order it is faster on 17 of 30 paper-size cells
  but slower overall (0.547x vs 0.536x the expert; rnnlm-8 up to 49% slower: first improvement
  keeps taking small critical-path gains), so `random` stays the default (RESULTS.md h9).
- At a local optimum, a kick (2 to 4 random groups to random devices) and a new descent from the
  best placement so far (iterated local search), until the budget is spent or `max_rounds`
  kicks in a row bring nothing.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import PlacementError
from passes.placement.context_base import BudgetExhausted, PlacementContextBase, members_by_group

__all__ = ["MOVE_ORDERS", "LocalSearchPlacement", "fusion_units", "local_search"]

MOVE_ORDERS = ("random", "slack")

logger = logging.getLogger(__name__)


def fusion_units(fusion_group: np.ndarray) -> np.ndarray:
    """A unit index per node for `local_search(units=...)`: the members of each fusion group
    (id >= 0) share a unit, every other node is a unit of its own. Moving one member of a group
    splits it and the group runs unfused, so under fused scoring most single-node moves are wasted
    evaluations (RESULTS.md h7: 1000 evaluations from single-device, wavenet training 2xV100,
    243.3 ms with group moves vs 253.0 with node moves)."""
    groups = np.asarray(fusion_group, dtype=np.int64)
    first = np.arange(groups.size, dtype=np.int64)  # each node's group's first member
    grouped = groups >= 0
    ids, index = np.unique(groups[grouped], return_inverse=True)
    lowest = np.full(ids.size, groups.size, dtype=np.int64)
    np.minimum.at(lowest, index, first[grouped])
    first[grouped] = lowest[index]
    return np.unique(first, return_inverse=True)[1].astype(np.int64)


class _Search:
    def __init__(
        self, ctx: PlacementContextBase, start: np.ndarray, seed: int, units: np.ndarray | None = None, order: str = "random"
    ) -> None:
        if order not in MOVE_ORDERS:
            raise ValueError(f"move order {order!r}: expected one of {', '.join(MOVE_ORDERS)}")
        self.ctx = ctx
        self.order = order
        self.rng = np.random.default_rng(seed)
        # The moved units: the context's co-location groups, or coarser ones (`fusion_units`; a
        # split start keeps its split until the unit is moved, to its first member's device).
        group_of = ctx.group_of if units is None else np.asarray(units, dtype=np.int64)
        self.group_of = group_of
        self.groups = ctx.groups if units is None else members_by_group(group_of)
        self.allowed = [np.flatnonzero(ctx.allowed[members].all(axis=0)) for members in self.groups]
        self.neighbours = [
            sorted({int(group_of[m]) for n in members.tolist() for m in ctx.preds[n] + ctx.succs[n]} - {g})
            for g, members in enumerate(self.groups)
        ]
        self.allowed_sets = [set(a.tolist()) for a in self.allowed]
        self.first_member = np.array([int(members[0]) for members in self.groups], dtype=np.int64)
        self.current = np.asarray(start, dtype=np.int64).copy()
        self.key = ctx.evaluate_key(self.current)
        self.loads = None if ctx.last_loads is None else ctx.last_loads.copy()
        self.result = ctx.last_result  # the current placement's simulation (slack order)
        self.best, self.best_key = self.current.copy(), self.key

    def device_of(self, g: int) -> int:
        return int(self.current[self.groups[g][0]])

    def try_change(self, changes: list[tuple[int, int]]) -> bool:
        """Apply (group, device) changes; keep them if the key improves."""
        old = [(g, self.device_of(g)) for g, _ in changes]
        for g, d in changes:
            self.current[self.groups[g]] = d
        key = self.ctx.evaluate_key(self.current)
        if key < self.key:
            self.key = key
            self.loads = None if self.ctx.last_loads is None else self.ctx.last_loads.copy()
            self.result = self.ctx.last_result
            if key < self.best_key:
                self.best, self.best_key = self.current.copy(), key
            return True
        for g, d in old:
            self.current[self.groups[g]] = d
        return False

    def candidates(self) -> Iterator[list[tuple[int, int]]]:
        """Candidate changes in the order they are tried, made lazily: descent stops at the first
        improvement, and listing every move of a 20k-node graph up front cost more than the
        simulator. Random draws happen before the first candidate, as when the list was eager."""
        count = len(self.groups)
        owner = self.current[self.first_member]
        if self.ctx.objective == "throughput" and self.loads is not None:
            hot = int(np.argmax(self.loads))
            mine = [g for g in self.rng.permutation(count).tolist() if owner[g] == hot]
            # Boundary groups first: moving them can also remove transfers.
            mine.sort(key=lambda g: not any(owner[h] != hot for h in self.neighbours[g]))
            others = [h for h in self.rng.permutation(count).tolist() if owner[h] != hot]
            return itertools.chain(
                ([(g, int(d))] for g in mine for d in self.allowed[g] if d != hot),
                (
                    [(g, int(owner[h])), (h, hot)]
                    for g in mine
                    for h in others
                    if int(owner[h]) in self.allowed_sets[g] and hot in self.allowed_sets[h]
                ),
            )
        groups = self.rng.permutation(count)
        if self.order == "slack" and self.result is not None and self.ctx.objective == "latency":
            groups = groups[np.argsort(self._group_slack()[groups], kind="stable")]
        return self._neighbour_moves(owner, groups.tolist())

    def _group_slack(self) -> np.ndarray:
        """(groups,) the least slack of each group's members under the current simulation."""
        from cost_model.costs import node_slack

        slack = np.full(len(self.groups), np.inf)
        np.minimum.at(slack, self.group_of, node_slack(self.result))
        return slack

    def _neighbour_moves(self, owner: np.ndarray, groups: list[int]) -> Iterator[list[tuple[int, int]]]:
        for g in groups:
            mine = int(owner[g])
            near = dict.fromkeys(int(owner[h]) for h in self.neighbours[g] if owner[h] != mine)
            allowed = self.allowed_sets[g]
            yield from ([(g, d)] for d in near if d in allowed)
            yield from ([(g, int(d))] for d in self.allowed[g] if d != mine and d not in near)

    def descend(self) -> None:
        improved = True
        while improved:
            improved = False
            for change in self.candidates():
                if self.try_change(change):
                    improved = True
                    break

    def kick(self) -> None:
        self.current = self.best.copy()
        count = len(self.groups)
        for g in self.rng.choice(count, size=min(count, int(self.rng.integers(2, 5))), replace=False).tolist():
            self.current[self.groups[g]] = int(self.rng.choice(self.allowed[g]))
        self.key = self.ctx.evaluate_key(self.current)
        self.loads = None if self.ctx.last_loads is None else self.ctx.last_loads.copy()
        self.result = self.ctx.last_result


def local_search(
    ctx: PlacementContextBase,
    start: np.ndarray,
    *,
    seed: int = 0,
    max_rounds: int = 50,
    units: np.ndarray | None = None,
    order: str = "random",
) -> np.ndarray:
    """Iterated first-improvement descent from `start` (module docstring); the best placement.
    `units`: a unit index per node, coarser than the context's groups, moved as one
    (`fusion_units`); None: the context's groups. `order`: `MOVE_ORDERS` (module docstring)."""
    try:
        search = _Search(ctx, start, seed, units, order)
    except BudgetExhausted:
        return np.asarray(start, dtype=np.int64)
    try:
        stale = 0
        while stale < max_rounds:
            before = search.best_key
            search.descend()
            stale = stale + 1 if not search.best_key < before else 0
            search.kick()
    except BudgetExhausted:
        pass
    logger.info("dp-ls: %.6g after %d evaluations", search.best_key[0], ctx.evaluations)
    return search.best


@register_pass
@dataclass(frozen=True)
class LocalSearchPlacement(PlacementPass):
    """The contiguous DP's placement refined by moves and swaps of groups (module docstring)."""

    name = "dp-ls"
    budget: int = option(2000, "objective evaluations spent by the local search, the start included")
    max_ideals: int = option(4000, "profiled workloads: most ideals the DP enumerates")
    max_rounds: int = option(50, "kicks in a row without improvement before stopping early")
    move_order: str = option("random", "latency: the order groups are tried in, random or slack (least slack first)")
    group_moves: bool = option(False, "moves carry whole fusion groups of the graph (with fused: the groups kept within each device), not single nodes")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.move_order not in MOVE_ORDERS:
            raise PlacementError(
                f"pass '{self.name}': move_order must be one of {', '.join(MOVE_ORDERS)}, got {self.move_order!r}", field="move_order"
            )

    @property
    def search_budget(self) -> int | None:
        return self.budget

    def assign(self, ctx: PlacementContextBase) -> np.ndarray:
        from passes.placement.dp import ContiguousDpPlacement

        # The DP's own evaluations (a few on graphs, none on profiled workloads) count too; a
        # `cpu_seconds` deadline bounds the search only (the DP always ends: its answer is the start).
        deadline, ctx.deadline = ctx.deadline, math.inf
        try:
            start = ContiguousDpPlacement(
                devices=self.devices, objective=self.objective, seed=self.seed, include_cpu=self.include_cpu, max_ideals=self.max_ideals
            ).assign(ctx)
        finally:
            ctx.deadline = deadline
        units = None
        base = getattr(ctx, "base", None)
        if self.group_moves and base is not None:
            units = fusion_units(np.asarray(base.fusion_group))
        return local_search(ctx, ctx.repair(start), seed=self.seed, max_rounds=self.max_rounds, units=units, order=self.move_order)
