"""A networkx view of one graph level, for analyses that networkx already does well."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx

    from graph_ir.graph import Graph

__all__ = ["to_networkx"]


def to_networkx(graph: Graph) -> networkx.MultiDiGraph:
    """Nodes keyed by node name (attributes: `node`, `op_type`, `kind`); one edge per use.

    Edge attributes: `value` (the value's name), `index` (the consumer's input index) and `bytes`
    (the tensor size when the shape is static, else 0). Graph inputs and constants are not nodes.
    """
    import networkx

    view = networkx.MultiDiGraph(name=graph.name)
    for node in graph:
        view.add_node(node.name, node=node, op_type=node.op_type, kind=node.kind.value)
    for node in graph:
        for value in node.outputs:
            size = value.nbytes() or 0
            for use in value.uses:
                if use.node.graph is graph:
                    view.add_edge(node.name, use.node.name, value=value.name, index=use.index, bytes=size)
    return view
