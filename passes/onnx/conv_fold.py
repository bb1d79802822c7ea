"""`fold-conv-bn`, `fold-conv-bias`, `fold-pad-into-conv`: what a Conv can absorb.

- Conv followed by an inference BatchNormalization (one output, constant scale, bias, mean and
  variance) whose only reader is that BatchNormalization: the scale goes into the weights, the
  shift into the bias (W' = W * s[:, None...], b' = (b - mean) * s + beta with
  s = gamma / sqrt(var + eps)). The folded weights are computed in float64 and stored in the
  weights' type.
- Conv followed by Add of a constant that broadcasts per output channel ([C], [C,1,...],
  [1,C,1,...]) as the Conv's only reader: the constant joins the Conv's bias.
- Pad (constant mode, zero pad value, constant pads that touch only spatial axes, no negative
  pads) whose only reader is a Conv with explicit pads (auto_pad NOTSET): the pads add up.
Weights must be constants (initializers that are not graph inputs, or Constant nodes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.attrs import Attr
from graph_ir.core import Node
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import (
    RewriteState,
    adds_after,
    constant_array,
    drop_dead_constants,
    is_onnx,
    new_constant,
    onnx_graphs,
    replace_with_nodes,
)

if TYPE_CHECKING:
    from graph_ir.core import Value
    from graph_ir.graph import Graph

__all__ = ["FoldConvBatchNorm", "FoldConvBias", "FoldPadIntoConv"]

logger = logging.getLogger(__name__)


def _sole_reader(value: Value, state: RewriteState) -> Node | None:
    if value in state.listed:
        return None
    users = value.users()
    return users[0] if len(users) == 1 and len(value.uses) == 1 else None


def _conv_weights(conv: Node, state: RewriteState) -> tuple[np.ndarray, np.ndarray] | None:
    weight = constant_array(conv.inputs[1], state) if len(conv.inputs) > 1 else None
    if weight is None or weight.ndim < 3 or not np.issubdtype(weight.dtype, np.floating):
        return None
    bias_value = conv.inputs[2] if len(conv.inputs) > 2 else None
    bias = np.zeros(weight.shape[0], dtype=weight.dtype) if bias_value is None else constant_array(bias_value, state)
    if bias is None or bias.shape != (weight.shape[0],):
        return None
    return weight, bias


def _rebuilt_conv(conv: Node, weight: np.ndarray, bias: np.ndarray, attrs: list[Attr] | None = None, data: Value | None = None) -> Node:
    graph = conv.graph
    assert graph is not None
    w = new_constant(graph, weight, f"{conv.inputs[1].name}.folded")
    b = new_constant(graph, bias, f"{conv.name or 'conv'}.bias")
    return Node(
        "Conv",
        [data if data is not None else conv.inputs[0], w, b],
        attrs=attrs if attrs is not None else list(conv.attrs.values()),
        name=graph.unique_name(conv.name or "conv"),
        domain=conv.domain,
    )


@register_pass
@dataclass(frozen=True)
class FoldConvBatchNorm(Pass):
    """Fold an inference BatchNormalization into the Conv before it (module docstring)."""

    name = "fold-conv-bn"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for bn in list(level.nodes):
                if bn.graph is None or not is_onnx(bn, "BatchNormalization") or len(bn.inputs) != 5:
                    continue
                if bn.attr("training_mode", 0) or any(v.has_uses() or v in state.listed for v in bn.outputs[1:]):
                    continue
                x = bn.inputs[0]
                conv = x.producer if x is not None else None
                if conv is None or conv.graph is not level or not is_onnx(conv, "Conv") or _sole_reader(x, state) is not bn:
                    continue
                found = _conv_weights(conv, state)
                params = [constant_array(v, state) for v in bn.inputs[1:]]
                if found is None or any(p is None for p in params):
                    continue
                weight, bias = found
                gamma, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
                if any(p.shape != (weight.shape[0],) for p in (gamma, beta, mean, var)):
                    continue
                scale = gamma / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
                new_weight = (weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (weight.ndim - 1))).astype(weight.dtype)
                new_bias = ((bias.astype(np.float64) - mean) * scale + beta).astype(weight.dtype)
                old_inputs = [*conv.inputs[1:], *bn.inputs[1:]]
                new = _rebuilt_conv(conv, new_weight, new_bias)
                replace_with_nodes([conv, bn], bn.outputs[0], [new], new.outputs[0], state)
                drop_dead_constants(level, old_inputs, state)
        return PassResult(graph, state.changes > 0)


@register_pass
@dataclass(frozen=True)
class FoldConvBias(Pass):
    """Fold an Add of a per-channel constant after a Conv into its bias (module docstring)."""

    name = "fold-conv-bias"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level, add, conv, x, c in adds_after(graph, "Conv", state):
            if _sole_reader(x, state) is not add:
                continue
            found = _conv_weights(conv, state)
            addend = constant_array(c, state)
            if found is None or addend is None or x.shape is None or add.outputs[0].shape != x.shape:
                continue
            channels = _per_channel(addend, found[0].shape[0], len(x.shape))
            if channels is None or addend.dtype != found[0].dtype:
                continue
            weight, bias = found
            old_inputs = [*conv.inputs[1:], c]
            new = _rebuilt_conv(conv, weight, (bias + channels).astype(weight.dtype))
            replace_with_nodes([conv, add], add.outputs[0], [new], new.outputs[0], state)
            drop_dead_constants(level, old_inputs, state)
        return PassResult(graph, state.changes > 0)


def _per_channel(addend: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """The addend as a [C] vector when it broadcasts along the channel axis (1) of a rank-`rank`
    output only, else None."""
    if addend.ndim > rank:
        return None
    shape = (1,) * (rank - addend.ndim) + addend.shape
    if shape[1] not in (1, channels) or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return np.broadcast_to(addend.reshape(-1) if addend.size > 1 else addend.reshape(1), (channels,)).copy()


@register_pass
@dataclass(frozen=True)
class FoldPadIntoConv(Pass):
    """Merge a zero constant Pad of spatial axes into the Conv that reads it (module docstring)."""

    name = "fold-pad-into-conv"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for pad in list(level.nodes):
                if pad.graph is None or not is_onnx(pad, "Pad") or pad.attr("mode", b"constant") not in (b"constant", "constant"):
                    continue
                y = pad.outputs[0]
                conv = _sole_reader(y, state)
                if conv is None or not is_onnx(conv, "Conv") or conv.inputs[0] is not y:
                    continue
                auto_pad = conv.attr("auto_pad", "NOTSET")
                if auto_pad not in ("NOTSET", b"NOTSET"):
                    continue
                pads = _pad_amounts(pad, state)
                x = pad.inputs[0]
                if pads is None or x is None or x.shape is None:
                    continue
                rank = len(x.shape)
                begin, end = pads[:rank], pads[rank:]
                if begin[0] or begin[1] or end[0] or end[1] or any(p < 0 for p in pads):
                    continue
                spatial = rank - 2
                conv_pads = list(conv.attr("pads", (0,) * (2 * spatial)))
                merged = [conv_pads[i] + begin[2 + i] for i in range(spatial)] + [conv_pads[spatial + i] + end[2 + i] for i in range(spatial)]
                attrs = [a for a in conv.attrs.values() if a.name != "pads"] + [Attr.infer("pads", tuple(int(p) for p in merged))]
                old_inputs = list(pad.inputs[1:])
                new = Node("Conv", [x, *conv.inputs[1:]], attrs=attrs, name=level.unique_name(conv.name or "conv"), domain=conv.domain)
                replace_with_nodes([pad, conv], conv.outputs[0], [new], new.outputs[0], state)
                drop_dead_constants(level, old_inputs, state)
        return PassResult(graph, state.changes > 0)


def _pad_amounts(pad: Node, state: RewriteState) -> list[int] | None:
    if len(pad.inputs) > 1 and pad.inputs[1] is not None:
        pads = constant_array(pad.inputs[1], state)
        if pads is None:
            return None
        if len(pad.inputs) > 2 and pad.inputs[2] is not None:
            value = constant_array(pad.inputs[2], state)
            if value is None or np.any(value != 0):
                return None
        if len(pad.inputs) > 3 and pad.inputs[3] is not None:
            return None  # axes given: keep it simple
        return [int(p) for p in pads.reshape(-1)]
    pads = pad.attr("pads")  # opset < 11
    if pads is None or pad.attr("value", 0.0) != 0.0:
        return None
    return [int(p) for p in pads]
