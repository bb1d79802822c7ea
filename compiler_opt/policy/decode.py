"""Actions to simulator decisions without touching the IR.

`DecisionDecoder` is built once per `SimulationProblem`. It turns one episode's actions (device
index, fusion level, priority level per node) into a `cost_model.decisions.Decisions`:
- device: the sampled index;
- fusion groups: `fuse-by-priority`'s algorithm (passes/fusion/by_priority.py) with the fusion
  levels as priorities and the sampled devices as placement, on arrays: the same visiting
  order, the same `FusionGroups` legality (rules, one hero, size, no cycle between groups),
  only the device check reads the array instead of `node.device`. The producer/consumer
  structure and the rule checks are computed once per graph. The cycle check is the pass's:
  exact by default (`search_limit=None`, since RESULTS.md h19: a topological order of the groups
  is kept, `cycle_numba.merge_if_acyclic_ordered`), or a search capped at `search_limit` visited
  nodes that refuses a merge as unsure past it (`SEARCH_LIMIT` = 4096 before h19, where about
  half the merges on gnmt-8's 29k nodes were refused; a 32-node cap refused most merges on
  rnnlm-8). The groups equal `fuse-by-priority`'s exactly (tests/compiler_opt/policy/test_policy_decode.py);
- scheduling priority: the priority level.
So one episode is one `simulate()` call on the problem built once per graph. With numba (the
cycle check's engine, `select_cycle_engine`) the whole merge loop runs compiled on the same arrays
(`cycle_numba.priority_merges_compiled`), step for step the Python loop, so the groups are the
same (tested); decoding was about half of a zero-shot's CPU (gnmt-8 inference, 29k nodes: 40
decodings of ~0.47 s, 1.3M merge attempts from Python).

With `base_groups` (the framework's default fusion, as `GraphEnvironment` passes it) the fusion
levels are read relative to that default (`relative_groups`), so that joint decisions contain
placement-only ones: level 0 on most of a default group's members dissolves the group, level 1
keeps it, and levels 2 and up also start `fuse-by-priority` merges (priority = level) across and
beyond the default groups under the same legality rules. All-1 levels on the fused nodes decode to
exactly the default fusion kept within each device, which is what the classical rows get; the
absolute reading above lost 5-9% against it on inference graphs (inception-v3 4xV100 m-etf:
23.76 vs 21.78 ms; amoebanet 2xV100 one GPU: 6.46 vs 6.13 ms), because the default also takes
epilogues first and fuses sibling reductions, which priority order alone does not rebuild.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cost_model.decisions import DecisionError, Decisions
from passes.fusion.fuse import greedy_fuse
from passes.fusion.groups import FusionGroups, adjacency_arrays, csr_arrays, data_edges, select_cycle_engine
from passes.fusion.rules import can_fuse_into, is_epilogue, is_hero

if TYPE_CHECKING:
    from cost_model.costs import SimulationProblem

__all__ = ["SEARCH_LIMIT", "ArrayFusionGroups", "DecisionDecoder"]

SEARCH_LIMIT = 4096  # the capped cycle search every fusion used before RESULTS.md h19 (`exact_cycles=False`)


class ArrayFusionGroups(FusionGroups):
    """`FusionGroups` whose same-device rule reads a device array (decoder's precomputed graph)."""

    def __init__(self, decoder: DecisionDecoder, device: np.ndarray, *, max_nodes: int, search_limit: int | None) -> None:
        # Deliberately not calling FusionGroups.__init__: the structure comes precomputed.
        self.nodes = decoder.nodes
        self.index = decoder.index
        self.preds = decoder.preds
        self.succs = decoder.succs
        self.heroes = list(decoder.heroes)
        self.max_nodes = max_nodes
        self.search_limit = search_limit
        self.merges = 0
        self.device = np.asarray(device).tolist()
        if decoder.adjacency is None:
            decoder.adjacency = adjacency_arrays(decoder.preds, decoder.succs)
        self._init_partition(decoder.adjacency)

    def legal(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb or self.device[a] != self.device[b]:
            return False
        if len(self.members[ra]) + len(self.members[rb]) > self.max_nodes:
            return False
        if self.heroes[ra] + self.heroes[rb] > 1:
            return False
        return not self._creates_cycle(ra, rb)


class DecisionDecoder:
    """Per-graph precomputation for turning actions into `Decisions` (module docstring)."""

    def __init__(self, problem: SimulationProblem, *, max_nodes: int = 32, search_limit: int | None = None) -> None:
        self.problem = problem
        self.max_nodes = max_nodes
        self.search_limit = search_limit  # None: exact cycle checks
        self.nodes = problem.nodes
        n = len(self.nodes)
        # The same data edges FusionGroups builds, so the decoder's groups equal the pass's.
        self.index, self.preds, self.succs = data_edges(self.nodes)
        nodes = self.nodes
        self.heroes = [int(is_hero(node)) for node in nodes]
        self.fuse_into = [[u for u in self.succs[i] if can_fuse_into(nodes[i], nodes[u])] for i in range(n)]
        self.adjacency: tuple[np.ndarray, ...] | None = None  # CSR edges for the compiled cycle check, on first use
        self.epilogue = [len(self.succs[i]) == 1 and is_epilogue(nodes[i], nodes[self.succs[i][0]], 1) for i in range(n)]
        self._arrays: tuple[np.ndarray, ...] | None = None  # the compiled loop's per-graph arrays, on first use

    def _compiled_arrays(self) -> tuple[np.ndarray, ...]:
        """(fuse_ptr, fuse_idx, epilogue_user, heroes) for the compiled loop: `fuse_into` as CSR,
        each node's epilogue user or -1."""
        if self._arrays is None:
            if self.adjacency is None:
                self.adjacency = adjacency_arrays(self.preds, self.succs)
            ptr, idx = csr_arrays(self.fuse_into)
            epilogue_user = np.array([self.succs[i][0] if e else -1 for i, e in enumerate(self.epilogue)], dtype=np.int64)
            self._arrays = (ptr, idx, epilogue_user, np.asarray(self.heroes, dtype=np.int64))
        return self._arrays

    def _compiled_groups(self, score: np.ndarray, device: np.ndarray, threshold: float, adopt: list[np.ndarray]) -> np.ndarray:
        """The groups of `_priority_merges` (after adopting each of `adopt` whole) by the compiled loop."""
        from passes.fusion import cycle_numba as jit

        fuse_ptr, fuse_idx, epilogue_user, heroes = self._compiled_arrays()
        n = len(self.nodes)
        root, head, tail = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
        nxt = np.full(n, -1, dtype=np.int64)
        size = np.ones(n, dtype=np.int64)
        heroes = heroes.copy()
        if adopt:
            order = np.concatenate(adopt).astype(np.int64)
            bounds = np.cumsum([0] + [len(group) for group in adopt]).astype(np.int64)
            jit.adopt_groups_compiled(order, bounds, root, head, tail, nxt, size, heroes)
        visit = np.lexsort((np.arange(score.size), -score)).astype(np.int64)
        pred_ptr, pred_idx, succ_ptr, succ_idx = self.adjacency
        exact = self.search_limit is None
        try:
            position = jit.group_positions(root, head, nxt, succ_ptr, succ_idx) if exact else np.empty(0, dtype=np.int64)
        except ValueError as exc:  # only adopted groups can: a given default fusion that is not a legal partition
            raise DecisionError(f"the default fusion groups the levels are read against form a cycle ({exc})", field="fusion_group") from exc
        jit.priority_merges_compiled(
            visit, score, float(threshold), fuse_ptr, fuse_idx, epilogue_user, np.asarray(device, dtype=np.int64), self.max_nodes,
            0 if exact else self.search_limit, root, head, tail, nxt, size, heroes, pred_ptr, pred_idx, succ_ptr, succ_idx,
            np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64), np.empty(n, dtype=np.int64), position,
            np.empty(n if exact else 0, dtype=np.int64),
        )
        return jit.group_ids_compiled(root, size)

    def fusion_groups(self, fusion_priority: np.ndarray, device: np.ndarray, *, threshold: float = 0.0) -> np.ndarray:
        """`fuse-by-priority` on arrays: int32 (N,) group ids (-1: unfused)."""
        if select_cycle_engine()[1] is not None:
            return self._compiled_groups(np.asarray(fusion_priority, dtype=np.float64), device, threshold, [])
        groups = ArrayFusionGroups(self, device, max_nodes=self.max_nodes, search_limit=self.search_limit)
        self._priority_merges(groups, np.asarray(fusion_priority, dtype=np.float64), threshold)
        return groups.group_ids()

    def _priority_merges(self, groups: ArrayFusionGroups, score: np.ndarray, threshold: float) -> None:
        """`fuse-by-priority`'s visit: nodes above `threshold`, highest first, merge into their users."""
        for node in np.lexsort((np.arange(score.size), -score)).tolist():
            if score[node] <= threshold:
                break
            for user in sorted(self.fuse_into[node], key=lambda u: (-score[u], u)):
                groups.try_merge(node, user)
            if self.epilogue[node]:
                groups.try_merge(node, self.succs[node][0])

    def relative_groups(self, levels: np.ndarray, device: np.ndarray, base_groups: np.ndarray) -> np.ndarray:
        """Fusion levels read against a default fusion `base_groups` (module docstring): int32 (N,)."""
        from passes.fusion.defaults import colocated_groups

        levels = np.asarray(levels, dtype=np.float64)
        kept = colocated_groups(base_groups, device)
        members = np.flatnonzero(kept >= 0)
        adopted: list[np.ndarray] = []
        if members.size:
            order = members[np.argsort(kept[members], kind="stable")]
            bounds = np.flatnonzero(np.diff(kept[order])) + 1
            # kept unless dissolved by a majority at level 0
            adopted = [group for group in np.split(order, bounds) if np.count_nonzero(levels[group] == 0) * 2 <= group.size]
        if select_cycle_engine()[1] is not None:
            return self._compiled_groups(levels, device, 1.0, adopted)
        groups = ArrayFusionGroups(self, device, max_nodes=self.max_nodes, search_limit=self.search_limit)
        for group in adopted:
            groups.adopt(group.tolist())
        self._priority_merges(groups, levels, 1.0)
        return groups.group_ids()

    def default_fusion(self, device: np.ndarray) -> np.ndarray:
        """The `fuse` pass's XLA-like greedy fusion under placement `device` (reference runs), with
        the decoder's cycle check (exact by default, as the pass)."""
        groups = ArrayFusionGroups(self, device, max_nodes=self.max_nodes, search_limit=self.search_limit)
        greedy_fuse(groups)
        return groups.group_ids()

    def decisions(self, actions: np.ndarray, base_groups: np.ndarray | None = None) -> Decisions:
        """Decisions from one episode's final actions, int (N, 3): device, fusion level, priority
        level; with `base_groups` the fusion levels are relative to that default fusion."""
        actions = np.asarray(actions)
        device = actions[:, 0].astype(np.int32)
        levels = actions[:, 1].astype(np.float64)
        groups = self.fusion_groups(levels, device) if base_groups is None else self.relative_groups(levels, device, base_groups)
        return Decisions(device, groups, actions[:, 2].astype(np.float64))
