"""Fusion groups under construction: which merges are legal, and writing the result.

`FusionGroups` holds a partition of one graph level's nodes (union-find over `node_order`
indices). `try_merge(a, b)` joins the groups of two nodes only when
- both run on the same device (`node.device`; unplaced nodes count as one device),
- the merged group has at most `max_nodes` nodes and at most one *hero* (a reduction or heavy
  op, `rules.is_hero`: XLA builds each fusion around one such op),
- the merge creates no cycle between groups: no path leaves one of the two groups and enters
  the other through a third group (a fused kernel must be able to run as one unit). The check
  is a breadth-first search over groups from the edges leaving the pair; two cheap cases skip
  it (every outside predecessor of the consumer side is in the producer side, or vice versa),
  and a search that would visit more than `search_limit` nodes refuses the merge, so the
  answer is never wrong, only sometimes conservative. `search_limit=None` checks exactly: with
  numba a topological order of the groups is kept and the search stays between the two
  (`cycle_numba.ordered_check`, thirty-fifth session), in pure Python the same search
  without a limit; both merge exactly the same groups.
The search runs compiled (`cycle_numba.py`, numba over flat arrays: `fuse` 24-36x faster on
4-10k-node training graphs, benchmarks/RESULTS.md section k) when numba is installed and `COMPILER_OPT_NO_JIT` is not set, else in pure Python below;
both visit the same groups in the same order and refuse exactly the same merges (the `search_limit`
count included), so the groups never depend on the engine (tests/passes/fusion/test_groups_cycle.py).
`write()` numbers groups of two or more nodes 0, 1, ... in order of their first node and sets
`node.fusion_group` (None for the rest).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Sequence

import numpy as np

from graph_ir._jit import NO_JIT_ENV, choose_engine
from graph_ir.order import node_order
from passes.fusion.rules import is_hero

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["NO_JIT_ENV", "FusionGroups", "adjacency_arrays", "csr_arrays", "cycle_engine_name", "data_edges", "select_cycle_engine"]

logger = logging.getLogger(__name__)


# ("numba", compiled check) or ("python", None) once chosen; None until the first FusionGroups.
_engine: tuple[str, Callable[..., bool] | None] | None = None


def select_cycle_engine(*, refresh: bool = False) -> tuple[str, Callable[..., bool] | None]:
    """The cycle check `FusionGroups` uses: `("numba", fn)` or `("python", None)`, chosen once;
    `refresh=True` chooses again (after changing `COMPILER_OPT_NO_JIT`, in tests and benchmarks)."""
    global _engine
    if _engine is not None and not refresh:
        return _engine

    def compiled() -> Callable[..., bool]:
        from passes.fusion.cycle_numba import creates_cycle_compiled

        return creates_cycle_compiled

    _engine = choose_engine("fusion cycle check", compiled, None)
    return _engine


def cycle_engine_name() -> str:
    """"numba" or "python": the engine the cycle check uses (chooses it if not chosen yet)."""
    return (_engine or select_cycle_engine())[0]


def csr_arrays(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, idx): per-node index lists as CSR int64 arrays, in the same order."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.fromiter((j for x in lists for j in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, idx


def adjacency_arrays(preds: list[list[int]], succs: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pred_ptr, pred_idx, succ_ptr, succ_idx): the edge lists as CSR int64 arrays, same order."""
    return (*csr_arrays(preds), *csr_arrays(succs))


def data_edges(nodes: list[Node]) -> tuple[dict[Node, int], list[list[int]], list[list[int]]]:
    """(index of each node, predecessors, successors) over `nodes`' data inputs: each producer
    once per consumer, successors in node order. The fusion pass and the GO decoder both build
    on these, so their groups agree."""
    index = {node: i for i, node in enumerate(nodes)}
    preds: list[list[int]] = [[] for _ in nodes]
    succs: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        seen: set[int] = set()
        for value in node.inputs:
            producer = value.producer if value is not None else None
            j = index.get(producer) if producer is not None else None
            if j is not None and j not in seen:
                seen.add(j)
                preds[i].append(j)
                succs[j].append(i)
    return index, preds, succs


class FusionGroups:
    def __init__(self, graph: Graph, *, max_nodes: int = 32, search_limit: int | None = None) -> None:
        self.nodes: list[Node] = node_order(graph)
        self.index, self.preds, self.succs = data_edges(self.nodes)
        self.heroes = [int(is_hero(node)) for node in self.nodes]  # per root
        self.max_nodes = max_nodes
        self.search_limit = search_limit
        self.merges = 0
        self._init_partition()

    def _init_partition(self, adjacency: tuple[np.ndarray, ...] | None = None) -> None:
        """Singleton groups; with the compiled engine also its arrays (`adjacency`: the CSR
        arrays of `adjacency_arrays`, when the caller has them already)."""
        n = len(self.nodes)
        self.parent = list(range(n))
        self.members: dict[int, list[int]] = {i: [i] for i in range(n)}
        self._compiled = select_cycle_engine()[1]
        if self._compiled is None:
            return
        # root[i]: i's group, kept exact at every merge (the compiled search reads it instead of
        # find()); head/tail/nxt: each group's members as a linked list in `members` order.
        self._adjacency = adjacency if adjacency is not None else adjacency_arrays(self.preds, self.succs)
        self._root = np.arange(n, dtype=np.int64)
        self._head = np.arange(n, dtype=np.int64)
        self._tail = np.arange(n, dtype=np.int64)
        self._next = np.full(n, -1, dtype=np.int64)
        self._seen = np.zeros(n, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)
        self._queue = np.empty(n, dtype=np.int64)
        # the exact check's topological order of the groups (search_limit None): built on first
        # use, kept through merges, dropped by a split
        self._position: np.ndarray | None = None
        self._backward: np.ndarray | None = None
        # the last ordered check (ra, rb, answer): the merge right after it reuses its window
        self._checked: tuple[int, int, int] | None = None
        from passes.fusion import cycle_numba  # loaded by the engine choice already

        self._jit = cycle_numba

    @property
    def _ordered(self) -> bool:
        """Exact checks through the kept group order (compiled engine, `search_limit` None)."""
        return self.search_limit is None and self._compiled is not None

    def _limit(self) -> int:
        """The unordered search's node limit; past the node count it never refuses as unsure."""
        return len(self.nodes) + 1 if self.search_limit is None else self.search_limit

    def _positions(self) -> np.ndarray:
        if self._position is None:
            self._position = self._jit.group_positions(self._root, self._head, self._next, self._adjacency[2], self._adjacency[3])
            self._backward = np.empty(len(self.nodes), dtype=np.int64)
        return self._position

    # -- union-find ------------------------------------------------------------------------------
    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def group(self, i: int) -> list[int]:
        return self.members[self.find(i)]

    def same_group(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    # -- legality --------------------------------------------------------------------------------
    def legal(self, a: int, b: int, *, max_heroes: int = 1) -> bool:
        """May the groups of a and b merge? At most `max_heroes` heroes in the result (more only
        for batched library calls: one GEMM over several matmuls sharing an operand)."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.nodes[a].device != self.nodes[b].device:
            return False
        if len(self.members[ra]) + len(self.members[rb]) > self.max_nodes:
            return False
        if self.heroes[ra] + self.heroes[rb] > max_heroes:
            return False
        return not self._creates_cycle(ra, rb)

    def _outside_preds_within(self, target: int, source: int) -> bool:
        """Every predecessor of `target`'s group outside it lies in `source`'s group."""
        for m in self.members[target]:
            for p in self.preds[m]:
                r = self.find(p)
                if r != target and r != source:
                    return False
        return True

    def _creates_cycle(self, ra: int, rb: int) -> bool:
        if self._ordered:
            check = self._jit.ordered_check(ra, rb, self._positions(), self._root, *self._adjacency, self._head, self._next, self._seen, self._stamp, self._queue)
            self._checked = (ra, rb, check)
            return check == self._jit.CYCLE
        if self._compiled is not None:
            pred_ptr, pred_idx, succ_ptr, succ_idx = self._adjacency
            return bool(self._compiled(
                ra, rb, self._limit(), self._root, pred_ptr, pred_idx, succ_ptr, succ_idx,
                self._head, self._next, self._seen, self._stamp, self._queue,
            ))
        limit = self._limit()
        for src, dst in ((ra, rb), (rb, ra)):
            if self._outside_preds_within(dst, src):
                continue  # no path can enter `dst` from a third group
            if self._reaches_through_third(src, dst, limit):
                return True
        return False

    def _reaches_through_third(self, src: int, dst: int, limit: int) -> bool:
        """Is there a path src -> (a third group) -> ... -> dst? (True also when unsure.)"""
        seen = {src}
        queue: deque[int] = deque()
        for m in self.members[src]:
            for s in self.succs[m]:
                r = self.find(s)
                if r != src and r != dst and r not in seen:
                    seen.add(r)
                    queue.append(r)
        visited = 0
        while queue:
            g = queue.popleft()
            for m in self.members[g]:
                visited += 1
                if visited > limit:
                    return True
                for s in self.succs[m]:
                    r = self.find(s)
                    if r == dst:
                        return True
                    if r not in seen:
                        seen.add(r)
                        queue.append(r)
        return False

    # -- merging ---------------------------------------------------------------------------------
    def try_merge(self, a: int, b: int, *, max_heroes: int = 1) -> bool:
        """Merge the groups of nodes a and b if legal; True when merged."""
        # Subclasses may override legal(a, b) without the keyword (compiler_opt.policy.decode).
        if not (self.legal(a, b) if max_heroes == 1 else self.legal(a, b, max_heroes=max_heroes)):
            return False
        self._union(self.find(a), self.find(b))
        return True

    def adopt(self, members: Sequence[int]) -> None:
        """Join `members` into one group without legality checks: for a group taken whole from a
        legal partition of the same nodes (a framework's default fusion kept within one device),
        which no merge order need rebuild. Counts at most one hero, as sibling fusion leaves it."""
        members = list(members)
        for other in members[1:]:
            ra, rb = self.find(members[0]), self.find(other)
            if ra != rb:
                self._union(ra, rb)
        root = self.find(members[0])
        self.heroes[root] = min(self.heroes[root], 1)

    def _union(self, ra: int, rb: int) -> None:
        slot = -1
        if self._ordered and self._position is not None:
            jit, checked, self._checked = self._jit, self._checked, None
            if checked is not None and {checked[0], checked[1]} == {ra, rb}:
                check = checked[2]  # try_merge: the check just made, its window still in `_queue`
            else:  # an unchecked merge (adopt)
                check = jit.ordered_check(ra, rb, self._position, self._root, *self._adjacency, self._head, self._next, self._seen, self._stamp, self._queue)
            if check == jit.CYCLE:
                self._position = None  # an unchecked merge closed a cycle: the next check orders anew, and says so
            else:
                pred_ptr, pred_idx, _, _ = self._adjacency
                slot = jit.ordered_merge_slot(ra, rb, check, self._position, self._root, pred_ptr, pred_idx, self._head, self._next, self._seen, self._stamp, self._queue, self._backward)
        if len(self.members[ra]) < len(self.members[rb]):
            ra, rb = rb, ra
        if slot >= 0:
            self._position[ra] = slot
        self.parent[rb] = ra
        if self._compiled is not None:
            root = self._root
            for m in self.members[rb]:
                root[m] = ra
            self._next[self._tail[ra]] = self._head[rb]
            self._tail[ra] = self._tail[rb]
        self.members[ra].extend(self.members.pop(rb))
        self.heroes[ra] += self.heroes[rb]
        self.merges += 1

    def split(self, i: int) -> None:
        """Undo every merge of node i's group: its members become singletons again."""
        root = self.find(i)
        members = self.members.pop(root)
        for m in members:
            self.parent[m] = m
            self.members[m] = [m]
            self.heroes[m] = int(is_hero(self.nodes[m]))
            if self._compiled is not None:
                self._root[m] = self._head[m] = self._tail[m] = m
                self._next[m] = -1
        self._position = self._checked = None  # the split members need places of their own: ordered anew on the next check

    def write(self) -> bool:
        """Set `node.fusion_group` from the partition; True when any node changed."""
        changed = False
        for node, number in zip(self.nodes, self.group_ids().tolist()):
            group = None if number < 0 else number
            if node.fusion_group != group:
                node.fusion_group = group
                changed = True
        return changed

    def group_ids(self) -> np.ndarray:
        """int32 (N,): groups of two or more nodes numbered in order of their first node, else -1
        (the numbering `write` gives `node.fusion_group`)."""
        out = np.full(len(self.nodes), -1, dtype=np.int32)
        ids: dict[int, int] = {}
        for i in range(len(self.nodes)):
            root = self.find(i)
            if len(self.members[root]) > 1:
                out[i] = ids.setdefault(root, len(ids))
        return out

    @property
    def num_groups(self) -> int:
        return sum(1 for m in self.members.values() if len(m) > 1)
