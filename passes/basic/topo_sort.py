"""Topological sort: reorder nodes so producers come first, in every (sub)graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_ir.verify import topological_order
from passes.basic._walk import all_graphs
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["TopologicalSort"]


@register_pass
@dataclass(frozen=True)
class TopologicalSort(Pass):
    """Sort the graph, its subgraphs and function bodies, keeping the current order where the
    dependencies allow (so an already sorted graph is left as is and reported unmodified).
    A cycle raises graph_ir's CycleError."""

    name = "topo-sort"

    def call(self, graph: Graph) -> PassResult:
        modified = False
        for sub in list(all_graphs(graph)):
            order = topological_order(sub)
            if any(a is not b for a, b in zip(order, sub)):
                sub.reorder(order)
                modified = True
        return PassResult(graph, modified)
