"""Array views of a graph for learned models: edge index and per-node numeric features.

One pass over nodes and uses with no per-edge Python objects beyond two int lists, so a
100k-node graph converts in well under a second.

`graph_arrays(graph, nodes=order, flops=...)` follows a given node order (the simulator's
`node_order`, so rows line up with decision arrays) and fills the FLOP column from a caller's
array: FLOP counting lives in `cost_model`, which sits above `graph_ir`. `topo_depth` is each
node's longest-path depth from a source over data edges, divided by the graph's depth.

Three more path lengths place a node in the graph's shape, each divided by its largest value:
`topo_height` (longest path to a sink: how much work still depends on the node, the structural
part of a critical-path priority), `min_depth` (shortest path from a source) and `min_height`
(shortest path to a sink). In an unrolled RNN the longest depth of a cell grows with layer and
step alike, while the shortest path from an input (each step's embedding enters layer 0) is the
layer: together they tell a node's layer from its step, which a pipeline split across devices
follows. They were appended last so that older policy checkpoints load with zero weights on them
(`compiler_opt/policy/checkpoint.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from graph_ir.op_kinds import OpKind
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["GraphArrays", "graph_arrays", "OP_KIND_INDEX", "NODE_FEATURE_NAMES", "longest_depth", "path_features"]

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
    "log_flops",
    "topo_depth",
    "log_fan_in",
    "log_fan_out",
    "topo_height",
    "min_depth",
    "min_height",
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


def graph_arrays(graph: Graph, *, nodes: Sequence[Node] | None = None, flops: np.ndarray | None = None) -> GraphArrays:
    """Arrays for the nodes of one graph level (subgraphs count as a feature of their parent).

    `nodes`: the row order (default: the graph's own order; pass a topological order for a
    meaningful `topo_depth`). `flops`: float (N,) FLOPs per row for the `log_flops` column (0 if
    not given).
    """
    nodes = list(graph) if nodes is None else list(nodes)
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
        depth = longest_depth(edge_index, count)
        features[:, 11] = depth / max(int(depth.max()), 1)
        features[:, 14:17] = path_features(edge_index, count)
        features[:, 12] = np.log1p(features[:, 6])
        features[:, 13] = np.log1p(features[:, 7])
        if flops is not None:
            flops = np.asarray(flops, dtype=np.float64).reshape(-1)
            if flops.shape != (count,):
                raise ValueError(f"graph_arrays: flops has {flops.shape[0]} entries for {count} nodes")
            features[:, 10] = np.log1p(np.maximum(flops, 0.0))
    return GraphArrays(nodes, op_kind, edge_index, np.asarray(sizes, dtype=np.float64), features)


def _path_lengths(edge_index: np.ndarray, count: int, *, longest: bool, to_sink: bool) -> np.ndarray:
    """Per row, the longest or shortest path length (in edges) from any source (no in-edge) or,
    with `to_sink`, to any sink (no out-edge). Rows in topological order: one sweep over the edges
    sorted by destination (to a sink: the same sweep with rows and edges reversed); otherwise all
    edges are relaxed per round until nothing changes (at most `count` rounds)."""
    src, dst = (edge_index[1], edge_index[0]) if to_sink else (edge_index[0], edge_index[1])
    if src.size == 0:
        return np.zeros(count, dtype=np.int64)
    has_in = np.zeros(count, dtype=bool)
    has_in[dst] = True
    unset = 0 if longest else count  # a source's length is 0; the shortest starts at "infinity"
    if to_sink and bool(np.all(src > dst)) or not to_sink and bool(np.all(src < dst)):
        order = np.argsort(dst if not to_sink else -dst, kind="stable")
        values = np.where(has_in, unset, 0).tolist()
        better = max if longest else min
        for s_row, d_row in zip(src[order].tolist(), dst[order].tolist()):
            values[d_row] = better(values[d_row], values[s_row] + 1)
        return np.asarray(values, dtype=np.int64)
    lengths = np.where(has_in, unset, 0).astype(np.int64)
    for _ in range(count):
        relaxed = lengths.copy()
        if longest:
            np.maximum.at(relaxed, dst, lengths[src] + 1)
        else:
            np.minimum.at(relaxed, dst, lengths[src] + 1)
        if np.array_equal(relaxed, lengths):
            break
        lengths = relaxed
    return lengths


def longest_depth(edge_index: np.ndarray, count: int) -> np.ndarray:
    """int64 (N,): each row's longest path (in edges) from a source over `edge_index` (2, E)."""
    return _path_lengths(edge_index, count, longest=True, to_sink=False)


def path_features(edge_index: np.ndarray, count: int) -> np.ndarray:
    """(N, 3) float32: `topo_height`, `min_depth`, `min_height`, each over its largest value
    (module docstring)."""
    columns = [
        _path_lengths(edge_index, count, longest=True, to_sink=True),
        _path_lengths(edge_index, count, longest=False, to_sink=False),
        _path_lengths(edge_index, count, longest=False, to_sink=True),
    ]
    return np.stack([c / max(int(c.max()) if count else 0, 1) for c in columns], axis=1).astype(np.float32)

