"""Format-neutral facts about a graph's weights and feeds, for summaries (`inspect`, `optimize`).

- `parameter_stats(graph)`: weights are initializers (ONNX), and also constant *nodes* whose
  value is a tensor attribute: a frozen TF GraphDef keeps every weight in a `Const` node, an ONNX
  export may use `Constant` nodes, HLO text has `constant` instructions (floating-point
  tensors count: integer constants are shapes and indices, float scalars are literals). Counting only initializers reported
  `parameters 0` for frozen GraphDefs.
- `feed_values(graph)`: what a caller feeds: the graph inputs that are not initializers, plus the
  outputs of source nodes of the `io` kind with no inputs (TF `Placeholder`, which a GraphDef
  keeps as a node rather than a graph input).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from graph_ir.core import Value
from graph_ir.graph import Graph
from graph_ir.op_kinds import OpKind
from graph_ir.tensors import Tensor

__all__ = ["ParameterStats", "feed_values", "parameter_stats"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParameterStats:
    parameters: int  # elements
    parameter_bytes: int
    initializers: int  # graph initializers (ONNX)
    constant_nodes: int  # constant nodes holding a tensor (TF Const, ONNX Constant, HLO constant)


def parameter_stats(graph: Graph) -> ParameterStats:
    """Weights of `graph` and its subgraphs, from initializers and constant nodes."""
    graphs = [graph, *graph.subgraphs()]
    initializers = [value for g in graphs for value in g.initializers.values() if value.const is not None]
    count = sum(value.const.size for value in initializers)
    nbytes = sum(value.const.nbytes for value in initializers)
    constant_nodes = 0
    for node in graph.all_nodes():
        if node.kind != OpKind.CONSTANT or not node.attrs:
            continue
        # Floating-point tensors only: integer constants in ONNX/HLO exports are shapes and
        # indices, and float scalars are literals (an epsilon, a 0.5), not weights.
        tensors = [
            attr.value
            for attr in node.attrs.values()
            if isinstance(attr.value, Tensor) and attr.value.dtype.is_floating and attr.value.size > 1
        ]
        if tensors:
            constant_nodes += 1
            count += sum(t.size for t in tensors)
            nbytes += sum(t.nbytes for t in tensors)
    return ParameterStats(int(count), int(nbytes), len(initializers), constant_nodes)


def feed_values(graph: Graph) -> list[Value]:
    """Values a caller feeds (module docstring), graph inputs first."""
    found = [value for value in graph.inputs if value.name not in graph.initializers]
    for node in graph:
        if node.kind == OpKind.IO and not node.inputs and len(node.outputs) == 1 and node.op_type in ("Placeholder", "PlaceholderWithDefault"):
            found.append(node.outputs[0])
    return found
