"""Dead code elimination: remove nodes whose results nobody uses, and unused constants."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from passes.basic._walk import all_graphs, has_side_effects, listed_outputs
from passes.infra.base import Pass, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["DeadCodeElimination"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Remove nodes whose outputs are all unused and not graph outputs, in every (sub)graph.

    Kept: side-effecting kinds (and nodes whose subgraphs contain one), nodes without outputs
    (they exist only for an effect the IR does not model), and outer values returned by a
    subgraph. Unused constants go too, but never one that is also a graph input (a caller can
    override it). Work is linear: nodes are visited in reverse order and a removal re-queues
    only the producers it may have made dead.
    """

    name = "dce"
    remove_unused_constants: bool = option(True, "also remove initializers that nothing uses")

    def call(self, graph: Graph) -> PassResult:
        listed = listed_outputs(graph)
        bodies = [graph]
        if graph.parent is None:
            bodies += [function.graph for function in graph.functions.values()]
        removed_nodes = sum(_sweep(body, listed) for body in bodies)
        removed_constants = 0
        if self.remove_unused_constants:
            for sub in all_graphs(graph):
                removed_constants += _remove_unused_constants(sub, listed)
        if removed_nodes or removed_constants:
            logger.debug("dce removed %d nodes and %d constants", removed_nodes, removed_constants)
        return PassResult(graph, bool(removed_nodes or removed_constants))


def _is_dead(node: Node, listed: dict[Value, list[Graph]]) -> bool:
    if not node.outputs:
        return False
    for value in node.outputs:
        if value.has_uses() or value in listed:
            return False
    return not has_side_effects(node)


def _sweep(graph: Graph, listed: dict[Value, list[Graph]]) -> int:
    """Remove the dead nodes of `graph` and (through live nodes) of its subgraphs."""
    removed = 0
    swept_subgraphs: set[int] = set()
    worklist: list[Node] = list(graph)  # popped from the end: reverse order, users first
    while worklist:
        node = worklist.pop()
        if node.graph is not graph:
            continue  # already removed
        if _is_dead(node, listed):
            producers = [v.producer for v in node.inputs if v is not None and v.producer is not None]
            producers += [v.producer for v in node.implicit_inputs() if v.producer is not None]
            producers += [v.producer for v in _forget_subgraph_outputs(node, listed) if v.producer is not None]
            graph.remove_nodes([node])
            removed += 1
            # In an out-of-order graph a producer may already be behind us: look at it again.
            worklist.extend(p for p in producers if p.graph is graph)
        elif id(node) not in swept_subgraphs:
            swept_subgraphs.add(id(node))
            # Sweeping the body before the outer producers frees values it alone captured.
            for sub in node.subgraphs():
                removed += _sweep(sub, listed)
    return removed


def _forget_subgraph_outputs(node: Node, listed: dict[Value, list[Graph]]) -> list[Value]:
    """Drop the outputs of the dying node's subgraphs from `listed`; return values no longer listed."""
    freed = []
    for sub in node.subgraphs():
        for inner in [sub, *sub.subgraphs()]:
            for value in inner.outputs:
                graphs = listed.get(value)
                if graphs is None:
                    continue
                graphs[:] = [g for g in graphs if g is not inner]
                if not graphs:
                    del listed[value]
                    freed.append(value)
    return freed


def _remove_unused_constants(graph: Graph, listed: dict[Value, list[Graph]]) -> int:
    removed = 0
    inputs = set(graph.inputs)
    for value in graph.initializers.values():
        if value.has_uses() or value in listed or value in inputs:
            continue
        graph.remove_initializer(value)
        removed += 1
    return removed
