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
  answer is never wrong, only sometimes conservative.
`write()` numbers groups of two or more nodes 0, 1, ... in order of their first node and sets
`node.fusion_group` (None for the rest).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from graph_ir.order import node_order
from passes.fusion.rules import is_hero

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["FusionGroups"]


class FusionGroups:
    def __init__(self, graph: Graph, *, max_nodes: int = 32, search_limit: int = 4096) -> None:
        self.nodes: list[Node] = node_order(graph)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        n = len(self.nodes)
        self.preds: list[list[int]] = [[] for _ in range(n)]
        self.succs: list[list[int]] = [[] for _ in range(n)]
        for i, node in enumerate(self.nodes):
            seen: set[int] = set()
            for value in node.inputs:
                producer = value.producer if value is not None else None
                j = self.index.get(producer) if producer is not None else None
                if j is not None and j not in seen:
                    seen.add(j)
                    self.preds[i].append(j)
                    self.succs[j].append(i)
        self.parent = list(range(n))
        self.members: dict[int, list[int]] = {i: [i] for i in range(n)}
        self.heroes = [int(is_hero(node)) for node in self.nodes]  # per root
        self.max_nodes = max_nodes
        self.search_limit = search_limit
        self.merges = 0

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
    def legal(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.nodes[a].device != self.nodes[b].device:
            return False
        if len(self.members[ra]) + len(self.members[rb]) > self.max_nodes:
            return False
        if self.heroes[ra] + self.heroes[rb] > 1:
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
        for src, dst in ((ra, rb), (rb, ra)):
            if self._outside_preds_within(dst, src):
                continue  # no path can enter `dst` from a third group
            if self._reaches_through_third(src, dst):
                return True
        return False

    def _reaches_through_third(self, src: int, dst: int) -> bool:
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
                if visited > self.search_limit:
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
    def try_merge(self, a: int, b: int) -> bool:
        """Merge the groups of nodes a and b if legal; True when merged."""
        if not self.legal(a, b):
            return False
        ra, rb = self.find(a), self.find(b)
        if len(self.members[ra]) < len(self.members[rb]):
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.members[ra].extend(self.members.pop(rb))
        self.heroes[ra] += self.heroes[rb]
        self.merges += 1
        return True

    def split(self, i: int) -> None:
        """Undo every merge of node i's group: its members become singletons again."""
        root = self.find(i)
        members = self.members.pop(root)
        for m in members:
            self.parent[m] = m
            self.members[m] = [m]
            self.heroes[m] = int(is_hero(self.nodes[m]))

    def write(self) -> bool:
        """Set `node.fusion_group` from the partition; True when any node changed."""
        ids: dict[int, int] = {}
        changed = False
        for i, node in enumerate(self.nodes):
            root = self.find(i)
            group = None
            if len(self.members[root]) > 1:
                group = ids.setdefault(root, len(ids))
            if node.fusion_group != group:
                node.fusion_group = group
                changed = True
        return changed

    @property
    def num_groups(self) -> int:
        return sum(1 for m in self.members.values() if len(m) > 1)
