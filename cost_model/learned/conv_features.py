"""Per-node convolution attributes for the fusion dataset and its terms (eleventh session).

A fusion graph's `node_feat` (`features.node_features`) says a node is a `conv` and how big its
output is, but not how the conv is laid out: XLA's CPU backend runs a grouped convolution
(`feature_group_count` > 1, a depthwise one when it equals the input channels) on a generic
loop several times slower than a dense conv of many times its FLOPs (RESULTS (i), tenth session:
a 3x3 depthwise conv 7-11x the time of a dense 3x3 conv of 16x its FLOPs). These columns carry
what the importer knows, per node (zeros for every node that is not a convolution):

- `feature_groups`: the feature group count (1: dense);
- `depthwise`: 1 when groups > 1 and groups == the input channels;
- `window`: kernel spatial elements (3x3: 9);
- `stride`, `kernel_dilation`, `input_dilation`: the largest over the spatial dimensions
  (input dilation > 1: a transposed / input-gradient convolution);
- `mmacs`: multiply-adds (millions) the conv does, counting only taps that hit real input
  (`conv_flops.ConvGeometry.macs(valid_only=True)`);
- `in_features`, `out_features`: input and output channels (all groups).

XLA nodes (HLO, StableHLO) are read through `conv_flops.conv_geometry` (one parser for both the
FLOP count and these features); ONNX / aten `Conv` from its `group`, `strides`, `dilations`
attributes and weight shape; TF depthwise ops by op type. Stored in the `.npz` as the optional
`node_conv_feat` array (N, len(CONV_FEATURE_NAMES)); files without it read as all dense.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["CONV_FEATURE_NAMES", "conv_node_features", "fusion_conv_features"]

CONV_FEATURE_NAMES = ("feature_groups", "depthwise", "window", "stride", "kernel_dilation", "input_dilation", "mmacs", "in_features", "out_features")
_TF_DEPTHWISE = ("DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative")


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(getattr(value, "type", None), "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)


def _ints(value: Any) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value) if value is not None else ()
    except TypeError:
        return ()


def conv_node_features(node: Any) -> np.ndarray:
    """The `CONV_FEATURE_NAMES` of one node (zeros when it is not a convolution or its shapes are
    not static)."""
    from cost_model.conv_flops import conv_flops, conv_geometry

    out = np.zeros(len(CONV_FEATURE_NAMES), dtype=np.float32)
    kind = getattr(getattr(node, "kind", None), "value", "")
    if kind not in ("conv", "conv_transpose"):
        return out
    geometry = conv_geometry(node)
    if geometry is not None:
        groups = geometry.feature_groups
        out[:] = [groups, float(groups > 1 and groups == geometry.in_features), math.prod(geometry.kernel), max(geometry.stride, default=1),
                  max(geometry.kernel_dilation, default=1), max(geometry.input_dilation, default=1), 1e-6 * geometry.macs(valid_only=True),
                  geometry.in_features, geometry.out_features]
        return out
    # other frontends: the attributes their importers keep (ONNX / aten channels-first weights)
    weight = _shape(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
    x = _shape(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    if node.op_type in _TF_DEPTHWISE:  # filter HWIM: depthwise by construction
        channels = x[-1] if x else 0
        groups, window = channels, math.prod(weight[:-2]) if weight else 0
        out_features = channels * weight[-1] if weight else 0
    else:
        groups = int(node.attr("group", 1) or 1)
        window = math.prod(weight[2:]) if weight and len(weight) > 2 else 0
        channels = x[1] if x and len(x) > 1 else 0
        out_features = (weight[1] * groups if kind == "conv_transpose" else weight[0]) if weight and len(weight) > 1 else 0
    stride = max(_ints(node.attr("strides")), default=1)
    dilation = max(_ints(node.attr("dilations")), default=1)
    transposed = kind == "conv_transpose"
    out[:] = [groups, float(groups > 1 and groups == channels), window, 1 if transposed else stride, dilation, stride if transposed else 1,
              0.5e-6 * conv_flops(node), channels, out_features]
    return out


def fusion_conv_features(nodes: Sequence[Any]) -> np.ndarray:
    """(N, len(CONV_FEATURE_NAMES)) for `nodes` (the fusion dataset's node order)."""
    if not nodes:
        return np.zeros((0, len(CONV_FEATURE_NAMES)), dtype=np.float32)
    return np.stack([conv_node_features(node) for node in nodes]).astype(np.float32)
