"""Helpers shared by the basic passes: walking every graph of a model, and protected values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from graph_ir.op_kinds import SIDE_EFFECT_KINDS

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["all_graphs", "listed_outputs", "has_side_effects", "replace_value"]


def all_graphs(graph: Graph, *, functions: bool = True) -> Iterator[Graph]:
    """`graph`, its nested subgraphs, and (for a root graph) its function bodies and theirs."""
    yield graph
    yield from graph.subgraphs()
    if functions and graph.parent is None:
        for function in graph.functions.values():
            yield function.graph
            yield from function.graph.subgraphs()


def listed_outputs(graph: Graph) -> dict[Value, list[Graph]]:
    """Every value listed as an output of some graph in the tree, with the graphs listing it.

    A subgraph may return a value of an enclosing graph: that is a use the value's own `uses`
    does not record, so passes must consult this map before removing or replacing a value.
    """
    listed: dict[Value, list[Graph]] = {}
    for sub in all_graphs(graph):
        for value in sub.outputs:
            listed.setdefault(value, []).append(sub)
    return listed


def replace_value(old: Value, new: Value, listed: dict[Value, list[Graph]]) -> None:
    """Point every use of `old`, and every graph output listing it, at `new`."""
    old.replace_all_uses_with(new, replace_graph_outputs=False)
    for graph in listed.pop(old, ()):
        graph.replace_output(old, new)
        listed.setdefault(new, []).append(graph)


def has_side_effects(node: Node) -> bool:
    """True for side-effecting kinds, and for nodes whose subgraphs hold one."""
    if node.kind in SIDE_EFFECT_KINDS:
        return True
    return any(inner.kind in SIDE_EFFECT_KINDS for sub in node.subgraphs() for inner in sub.all_nodes())
