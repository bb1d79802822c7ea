"""The node order that decision arrays, the simulator and the policy index nodes by.

`node_order(graph)` is the graph's own order when it is topological (the usual case), else a
topological order as close to it as possible. It is pure graph structure, so it lives with the
IR: passes and cost sources share it without depending on each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["node_order"]


def node_order(graph: Graph) -> list[Node]:
    """The graph's order if topological, else a topological order as close to it as possible."""
    nodes = list(graph)
    position = {node: index for index, node in enumerate(nodes)}
    for index, node in enumerate(nodes):
        if not _inputs_come_first(node, index, position):
            from graph_ir.verify import topological_order

            return topological_order(graph)
    return nodes


def _inputs_come_first(node: Node, index: int, position: dict[Node, int]) -> bool:
    for value in node.inputs:
        if value is not None and position.get(value.producer, -1) >= index:  # type: ignore[arg-type]
            return False
    if any(True for _ in node.subgraphs()):
        return all(position.get(v.producer, -1) < index for v in node.implicit_inputs())  # type: ignore[arg-type]
    return True
