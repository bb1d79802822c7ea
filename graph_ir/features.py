"""Array views of a graph for learned models: edge index and per-node numeric features.

One pass over nodes and uses with no per-edge Python objects beyond two int lists, so a
100k-node graph converts in well under a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.op_kinds import OpKind
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["GraphArrays", "graph_arrays", "OP_KIND_INDEX", "NODE_FEATURE_NAMES"]

OP_KIND_INDEX: dict[OpKind, int] = {kind: index for index, kind in enumerate(OpKind)}
NODE_FEATURE_NAMES = (
    "log_out_elements",
    "log_out_bytes",
    "log_in_bytes",
    "out_rank",
    "num_inputs",
    "num_outputs",
    "in_degree",
    "out_degree",
    "topo_position",
    "has_subgraph",
)


@dataclass
class GraphArrays:
    nodes: list[Node]
    op_kind: np.ndarray  # int64 (N,): index into OP_KIND_INDEX
    edge_index: np.ndarray  # int64 (2, E): producer row -> consumer row, one per (value, consumer)
    edge_bytes: np.ndarray  # float64 (E,): bytes flowing along the edge (0 when unknown)
    node_features: np.ndarray  # float32 (N, len(NODE_FEATURE_NAMES))


def _tensor_stats(value: Value | None) -> tuple[float, float, int]:
    if value is None:
        return 0.0, 0.0, 0
    vtype = value.type
    if vtype.__class__ is not TensorType or vtype.shape is None:
        return 0.0, 0.0, 0
    numel = vtype._numel
    nbytes = vtype._nbytes
    return float(numel or 0), float(nbytes or 0), len(vtype.shape)


def graph_arrays(graph: Graph) -> GraphArrays:
    """Arrays for the nodes of one graph level (subgraphs count as a feature of their parent)."""
    nodes = list(graph)
    row = {node: index for index, node in enumerate(nodes)}
    count = len(nodes)
    op_kind = np.fromiter((OP_KIND_INDEX[n.kind] for n in nodes), dtype=np.int64, count=count)
    features = np.zeros((count, len(NODE_FEATURE_NAMES)), dtype=np.float32)
    sources: list[int] = []
    targets: list[int] = []
    sizes: list[float] = []
    in_degree = np.zeros(count, dtype=np.float32)
    denom = max(count - 1, 1)
    log = math.log1p
    for index, node in enumerate(nodes):
        out_elems = out_bytes = 0.0
        rank = 0
        for value in node.outputs:
            elems, nbytes, value_rank = _tensor_stats(value)
            out_elems += elems
            out_bytes += nbytes
            rank = max(rank, value_rank)
            consumers: dict[int, None] = {}
            for use in value._uses:
                target = row.get(use.node)
                if target is not None:
                    consumers[target] = None
            for target in consumers:
                sources.append(index)
                targets.append(target)
                sizes.append(nbytes)
                in_degree[target] += 1
        in_bytes = sum(_tensor_stats(v)[1] for v in node.inputs)
        has_subgraph = 1.0 if any(True for _ in node.subgraphs()) else 0.0
        features[index, 0:4] = (log(out_elems), log(out_bytes), log(in_bytes), rank)
        features[index, 4:6] = (len(node.inputs), len(node.outputs))
        features[index, 8:10] = (index / denom, has_subgraph)
    edge_index = np.array([sources, targets], dtype=np.int64).reshape(2, len(sources))
    if count:
        features[:, 6] = in_degree
        features[:, 7] = np.bincount(edge_index[0], minlength=count).astype(np.float32)
    return GraphArrays(nodes, op_kind, edge_index, np.asarray(sizes, dtype=np.float64), features)
