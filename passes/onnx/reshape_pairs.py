"""`cancel-reshape-pairs`: a Reshape whose elementwise consumers all end in Reshapes back to the
original shape is dropped together with those Reshapes.

Exporters wrap a Gemm (rank 2) in Reshapes to and from the model's rank-3 activations, and the
activation between two Linear layers (GPT-2's tanh-GELU: Mul, Pow, Add, Tanh) then runs on the
rank-3 view only to be flattened again:

    x[128,3072] -> Reshape[1,128,3072] -> Mul/Pow/Add/Tanh ... -> Reshape[128,3072] -> Gemm

An elementwise op computes each element from the elements at the same position, so it gives the
same numbers on either view; the pair of Reshapes does nothing. Matched when, starting from
`y = Reshape(x)` with static shapes `A = shape(x)` and `B = shape(y)`, every node reached forward
from `y` is one of `ELEMENTWISE` with one output of static shape `B` whose other inputs are
region values or constants with one element and rank at most min(rank A, rank B) (so broadcasting
adds no axis on either view), and every path leaves the region through a Reshape whose static
output shape is `A`. No region value may be a graph output. The region's values get shape `A`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_ir.types import Shape, TensorType
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import RewriteState, constant_array, drop_dead_constants, is_onnx, onnx_graphs, replace_with_value

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["CancelReshapePairs", "ELEMENTWISE"]

logger = logging.getLogger(__name__)

# Ops whose every output element depends only on the input elements at the same position (after
# broadcasting), with attributes that name no axis.
ELEMENTWISE = frozenset(
    {
        "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitwiseAnd", "BitwiseNot",
        "BitwiseOr", "BitwiseXor", "Cast", "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div", "Elu", "Equal", "Erf",
        "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf",
        "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mul", "Neg", "Not",
        "Or", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
        "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor",
    }
)  # fmt: skip


def _static(value: Value | None) -> tuple[int, ...] | None:
    shape = value.shape if value is not None else None
    return tuple(shape) if shape is not None and shape.is_static else None


@register_pass
@dataclass(frozen=True)
class CancelReshapePairs(Pass):
    """Drop a Reshape and the Reshapes that undo it around elementwise ops (module docstring)."""

    name = "cancel-reshape-pairs"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for node in list(level.nodes):
                if node.graph is None or not is_onnx(node, "Reshape") or not node.inputs or node.inputs[0] is None:
                    continue
                match = _match(node, state)
                if match is not None:
                    _rewrite(node, *match, state)
        if state.changes:
            logger.debug("cancel-reshape-pairs: %d rewrites", state.changes)
        return PassResult(graph, state.changes > 0)


def _match(reshape: Node, state: RewriteState) -> tuple[list[Node], list[Node]] | None:
    """(region nodes, exit Reshapes) when `reshape` starts a cancellable region, else None."""
    x, y = reshape.inputs[0], reshape.outputs[0]
    a, b = _static(x), _static(y)
    if a is None or b is None or a == b or y in state.listed or not y.has_uses():
        return None
    scalar_rank = min(len(a), len(b))
    level = reshape.graph
    region: dict[Node, None] = {}  # ordered set: discovery order
    values = {y}
    exits: dict[Node, None] = {}
    work = [y]
    while work:
        value = work.pop()
        for user in value.users():
            if user in region or user in exits:
                continue
            if user.graph is not level or not is_onnx(user):
                return None
            if user.op_type == "Reshape" and user.inputs[0] is value and value is not y:
                if _static(user.outputs[0]) != a:
                    return None
                exits[user] = None
                continue
            out = user.outputs[0] if len(user.outputs) == 1 else None
            if user.op_type not in ELEMENTWISE or out is None or _static(out) != b or out in state.listed:
                return None
            region[user] = None
            values.add(out)
            work.append(out)
    if not region or not exits:
        return None
    for node in region:
        for operand in node.inputs:
            if operand is None or operand in values:
                continue
            data = constant_array(operand, state)
            if data is None or data.size != 1 or data.ndim > scalar_rank:
                return None
    return list(region), list(exits)


def _rewrite(reshape: Node, region: list[Node], exits: list[Node], state: RewriteState) -> None:
    x, y = reshape.inputs[0], reshape.outputs[0]
    shape = Shape(_static(x))
    for node in region:
        for index, operand in enumerate(node.inputs):
            if operand is y:
                node.set_input(index, x)
        out = node.outputs[0]
        out.type = TensorType(out.dtype, shape)
    for node in exits:
        target = node.inputs[1] if len(node.inputs) > 1 else None
        replace_with_value(node, node.outputs[0], node.inputs[0], state)
        drop_dead_constants(node.graph or reshape.graph, [target], state)
    level = reshape.graph
    if level is not None and not y.has_uses():
        target = reshape.inputs[1] if len(reshape.inputs) > 1 else None
        level.remove_nodes([reshape])
        drop_dead_constants(level, [target], state)
    state.changes += 1
