"""Features of a graph under a fusion configuration, in the TpuGraphs layout form.

The graph part (per node: `features.node_features` of its output, its opcode; producer edges)
is the same for every configuration; per configuration and node there are
`NODE_CONFIG_FEATURES` numbers: fused (in a group of more than one node), log2 group size,
position in the group (0..1, node order), and whether the node's output leaves its group (read by
a node of another group or a graph output). The fusion dataset (`compiler-opt costmodel collect
--task fusion`), the fusion predictor and the fusion autotuner all build them here, so a model
trained on the dataset ranks the autotuner's candidates with the same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from cost_model.learned.features import node_features, opcode_id

__all__ = ["NODE_CONFIG_FEATURES", "fusion_config_features", "fusion_graph_arrays"]

NODE_CONFIG_FEATURES = 4


def fusion_graph_arrays(nodes: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node_feat (N, F), node_opcode (N,), edge_index (E, 2) as [consumer, producer]) of `nodes`."""
    from cost_model.flops import node_flops

    index = {node: i for i, node in enumerate(nodes)}
    feats, opcodes, edges = [], [], []
    for i, node in enumerate(nodes):
        out = node.outputs[0].type if node.outputs else None
        shape = tuple(int(d) for d in getattr(out, "shape", ()) if isinstance(d, int)) if out is not None else ()
        dtype = str(getattr(out, "dtype", "float32")).lower().replace("f32", "float32")
        feats.append(node_features(shape, dtype=dtype, flops=float(node_flops(node) or 0)))
        opcodes.append(opcode_id(node.kind.value))
        for value in node.inputs:
            producer = getattr(value, "producer", None) if value is not None else None
            if producer in index:
                edges.append([i, index[producer]])
    return np.stack(feats), np.array(opcodes, dtype=np.int64), np.array(edges, dtype=np.int64).reshape(-1, 2)


def fusion_config_features(nodes: Sequence[Any], groups: np.ndarray) -> np.ndarray:
    """(N, NODE_CONFIG_FEATURES) for one configuration: `groups[i]` is node i's group, -1 alone."""
    index = {node: i for i, node in enumerate(nodes)}
    groups = np.asarray(groups)
    out = np.zeros((len(nodes), NODE_CONFIG_FEATURES), dtype=np.float32)
    for g in set(groups.tolist()) - {-1}:
        members = np.flatnonzero(groups == g)
        for position, i in enumerate(members.tolist()):
            leaves = any(index.get(u.node) is None or groups[index[u.node]] != g for v in nodes[i].outputs for u in v.uses) if nodes[i].outputs else True
            out[i] = [1.0 if members.size > 1 else 0.0, math.log2(members.size), position / max(members.size - 1, 1), float(leaves)]
    out[groups < 0, 3] = 1.0
    return out
