"""`eliminate-noops`: nodes that return their input unchanged.

Identity; Dropout at inference (no `training_mode`, or a constant false one; the mask output
unused); Cast to the input's own type; CastLike to a value of the input's own type; Reshape and
Expand whose static output shape equals the static input shape; Transpose with the identity
permutation; Pad whose pads are all zero; Squeeze/Unsqueeze with no axes given as an empty
constant; Concat, Sum, Max, Min and Mean of one input; Slice that keeps everything (starts 0,
ends at or past the dimension, steps 1); Add/Sub of a constant zero and Mul/Div by a constant one
that does not broadcast the input (IEEE: x + 0 is x except that -0 + 0 is +0, which compares
equal). Each is replaced by its input; a graph output keeps
its name (the input takes it when it is a node result, else the node stays).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.types import TensorType
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import RewriteState, constant_array, drop_dead_constants, is_onnx, onnx_graphs, replace_with_value

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["EliminateNoops", "noop_input"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class EliminateNoops(Pass):
    """Replace nodes that return their input unchanged by that input (module docstring)."""

    name = "eliminate-noops"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for node in list(level.nodes):
                if node.graph is None or not is_onnx(node):
                    continue
                source = noop_input(node, state)
                if source is None:
                    continue
                inputs = list(node.inputs[1:])
                if replace_with_value(node, node.outputs[0], source, state):
                    drop_dead_constants(level, inputs, state)
        if state.changes:
            logger.debug("eliminate-noops: %d nodes removed", state.changes)
        return PassResult(graph, state.changes > 0)


def _same_type(a: Value, b: Value) -> bool:
    return isinstance(a.type, TensorType) and isinstance(b.type, TensorType) and a.type.dtype == b.type.dtype


def _static_shape(value: Value) -> tuple[int, ...] | None:
    shape = value.shape
    return tuple(shape) if shape is not None and shape.is_static else None


def noop_input(node: Node, state: RewriteState) -> Value | None:
    """The input `node` returns unchanged, or None when it computes something."""
    op = node.op_type
    x = node.inputs[0] if node.inputs else None
    if x is None:
        return None
    out = node.outputs[0]
    extra_used = any(v.has_uses() or v in state.listed for v in node.outputs[1:])
    if op == "Identity":
        return x
    if op == "Dropout":
        if extra_used:
            return None  # the mask is read
        training = node.inputs[2] if len(node.inputs) > 2 else None
        if training is None:
            return x
        flag = constant_array(training, state)
        return x if flag is not None and not bool(flag) else None
    if op == "Cast":
        to = node.attr("to")
        dtype = x.dtype
        return x if dtype is not None and dtype.onnx_code == to else None
    if op == "CastLike":
        return x if len(node.inputs) > 1 and node.inputs[1] is not None and _same_type(x, node.inputs[1]) else None
    if op in ("Reshape", "Expand"):
        before, after = _static_shape(x), _static_shape(out)
        return x if before is not None and before == after and _same_type(x, out) else None
    if op == "Transpose":
        perm = node.attr("perm")
        return x if perm is not None and list(perm) == list(range(len(perm))) else None
    if op == "Pad":
        pads = constant_array(node.inputs[1], state) if len(node.inputs) > 1 else None
        if pads is None and node.attr("pads") is not None:
            pads = np.asarray(node.attr("pads"))
        return x if pads is not None and pads.size and not np.any(pads) else None
    if op in ("Squeeze", "Unsqueeze"):
        axes = node.inputs[1] if len(node.inputs) > 1 else None
        if axes is None:
            return None  # Squeeze without axes drops every 1-dim
        array = constant_array(axes, state)
        return x if array is not None and array.size == 0 else None
    if op in ("Concat", "Sum", "Max", "Min", "Mean") and len(node.inputs) == 1:
        return x
    if op in ("Add", "Sub", "Mul", "Div") and len(node.inputs) == 2:
        return _neutral_operand(node, state)
    if op == "Slice":
        return x if _full_slice(node, state) else None
    return None


_NEUTRAL = {"Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0}


def _neutral_operand(node: Node, state: RewriteState) -> Value | None:
    """x for x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1, when the constant does not broadcast x to
    a bigger shape or another type (a zero bias Add of a freshly initialised Linear, a scale of 1)."""
    out = node.outputs[0]
    sides = (0, 1) if node.op_type in ("Add", "Mul") else (0,)
    for side in sides:
        x, c = node.inputs[side], node.inputs[1 - side]
        if x is None or c is None:
            continue
        array = constant_array(c, state)
        if array is None or array.size == 0 or not np.all(array == _NEUTRAL[node.op_type]):
            continue
        if _static_shape(x) is not None and _static_shape(x) == _static_shape(out) and _same_type(x, out):
            return x
    return None


def _full_slice(node: Node, state: RewriteState) -> bool:
    shape = _static_shape(node.inputs[0])
    if shape is None or len(node.inputs) < 3:
        return False
    arrays = [constant_array(v, state) if v is not None else None for v in node.inputs[1:5]]
    starts, ends = arrays[0], arrays[1]
    if starts is None or ends is None:
        return False
    axes = arrays[2] if len(arrays) > 2 and arrays[2] is not None else np.arange(len(starts))
    steps = arrays[3] if len(arrays) > 3 and arrays[3] is not None else np.ones(len(starts), dtype=np.int64)
    for start, end, axis, step in zip(starts.tolist(), ends.tolist(), axes.tolist(), steps.tolist()):
        dim = shape[axis]
        if step != 1 or start not in (0, -dim if dim else 0) or end < dim:
            return False
    return True
