"""Analytical FLOP and byte counts per node, from static shapes.

One rule per canonical op kind (`graph_ir.op_kinds.OpKind`), so every frontend shares it. A
multiply-add counts as 2 FLOPs. Any shape the rule needs that is unknown or symbolic makes the
node count 0 (never an exception): run shape inference first for better totals.

Constants (per element, chosen to match common profilers' conventions, not a specific ISA):
- elementwise kinds (unary, binary, select, cast): 1 per output element, transcendental ops
  (Exp, Erf, Gelu, Tanh...) included; variadic Sum/Max/Min/Mean count n-1 per output element;
- reduce, arg-reduce, cumulative: 1 per input element;
- softmax (Softmax, LogSoftmax, Hardmax): 5 per input element (max, sub, exp, sum, div);
- norm: BatchNormalization 2 per input element (inference: one scale and one shift), the other
  normalisations 5 (mean, sub, square-sum, rsqrt-scale, affine);
- pool: output elements x window (global pools: the whole spatial extent; RoI pools: 1 per output);
- rnn: the gate matmuls from the W/R weight shapes, plus per step one op per gate element and a
  few per hidden unit for the cell update (LSTM 5, GRU 4, RNN 0);
- attention (ONNX Attention): QK^T and PV matmuls plus softmax (5 per score);
- everything else (data movement, control flow, constants...) 0.

Convolutions of every frontend and layout (ONNX, aten, TF HWIO filters and backprops, HLO and
StableHLO dimension numbers) are counted in `cost_model.conv_flops`, each in its framework's own
convention (dense window for ONNX/TF, XLA's valid positions for HLO/StableHLO).
XLA HLO nodes (domain "hlo") use their own operand conventions: `dot` counts 2 x output
elements x the product of the lhs contracting dims; `reduce-window` output elements x window size; other
HLO matmul-kind ops (cholesky, triangular-solve) count 0. Fusion bodies are subgraphs, so
their nodes are counted like any others.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from cost_model.conv_flops import conv_flops
from graph_ir.op_kinds import OpKind
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = [
    "node_flops",
    "node_bytes",
    "graph_flops",
    "graph_bytes",
    "SOFTMAX_FLOPS_PER_ELEMENT",
    "NORM_FLOPS_PER_ELEMENT",
    "BATCHNORM_FLOPS_PER_ELEMENT",
    "ATTENTION_SOFTMAX_FLOPS_PER_SCORE",
]

SOFTMAX_FLOPS_PER_ELEMENT = 5
NORM_FLOPS_PER_ELEMENT = 5
BATCHNORM_FLOPS_PER_ELEMENT = 2
ATTENTION_SOFTMAX_FLOPS_PER_SCORE = 5
# Cell-update ops per hidden unit and step, after the per-gate activation.
_RNN_CELL_FLOPS = {"LSTM": 5, "GRU": 4, "RNN": 0}
_VARIADIC = frozenset({"Sum", "Max", "Min", "Mean"})
_HLO = "hlo"


# -- shape helpers ------------------------------------------------------------------------------
def _shape(value: Value | None) -> tuple[int, ...] | None:
    """The static shape of a value, or None when it is absent, not a tensor, or not static."""
    if value is None:
        return None
    vtype = value.type
    if not isinstance(vtype, TensorType) or vtype.shape is None:
        return None
    shape = vtype.shape
    for dim in shape:
        if dim.__class__ is not int:
            return None
    return tuple(shape)  # type: ignore[arg-type]


def _input(node: Node, index: int) -> Value | None:
    inputs = node.inputs
    return inputs[index] if index < len(inputs) else None


def _numel(value: Value | None) -> int | None:
    shape = _shape(value)
    return None if shape is None else math.prod(shape)


def _out_numel(node: Node) -> int | None:
    return _numel(node.outputs[0]) if node.outputs else None


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """Numpy broadcasting of two static shapes; None when they are incompatible."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


# -- per-kind rules ------------------------------------------------------------------------------
def _matmul_flops(node: Node) -> int:
    op = node.op_type
    if node.domain == _HLO:
        return _hlo_dot_flops(node) if op == "dot" else 0
    if op == "Gemm":
        return _gemm_flops(node)
    if op == "Einsum":
        return _einsum_flops(node)
    # QLinearMatMul: (a, a_scale, a_zero, b, b_scale, b_zero, ...).
    a, b = (_input(node, 0), _input(node, 3)) if op == "QLinearMatMul" else (_input(node, 0), _input(node, 1))
    sa, sb = _shape(a), _shape(b)
    if sa is None or sb is None or not sa or not sb:
        return 0
    if node.domain == "tf" and len(sa) >= 2 and len(sb) >= 2:
        # TF transposes operands by attribute (MatMul transpose_a/b, BatchMatMul adj_x/y).
        if node.attr("transpose_a", False) or node.attr("adj_x", False):
            sa = sa[:-2] + (sa[-1], sa[-2])
        if node.attr("transpose_b", False) or node.attr("adj_y", False):
            sb = sb[:-2] + (sb[-1], sb[-2])
    k = sa[-1]
    # numpy.matmul: 1-D operands are promoted to matrices and the added dim removed afterwards.
    m = sa[-2] if len(sa) >= 2 else 1
    n = sb[-1] if len(sb) >= 2 else 1
    batch = _broadcast(sa[:-2], sb[:-2])
    if batch is None:
        return 0
    return 2 * math.prod(batch) * m * n * k


def _gemm_flops(node: Node) -> int:
    sa, sb = _shape(_input(node, 0)), _shape(_input(node, 1))
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return 0
    m, k = (sa[1], sa[0]) if node.attr("transA", 0) else sa
    n = sb[0] if node.attr("transB", 0) else sb[1]
    flops = 2 * m * n * k
    if _input(node, 2) is not None:
        flops += m * n  # + beta * C
    return flops


def _einsum_flops(node: Node) -> int:
    """Each distinct index is one loop; with two or more operands each iteration is a multiply-add."""
    equation = node.attr("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    if not isinstance(equation, str) or "..." in equation:
        return 0
    terms = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, value in zip(terms, node.inputs):
        shape = _shape(value)
        if shape is None or len(shape) != len(term):
            return 0
        sizes.update(zip(term, shape))
    loops = math.prod(sizes.values())
    return 2 * loops if len(terms) > 1 else loops


def _elementwise_flops(node: Node) -> int:
    out = _out_numel(node)
    if out is None:
        return 0
    if node.op_type in _VARIADIC:
        operands = sum(1 for v in node.inputs if v is not None)
        return out * max(1, operands - 1)
    return out


def _per_input_element(factor: int) -> Callable[[Node], int]:
    def rule(node: Node) -> int:
        return factor * (_numel(_input(node, 0)) or 0)

    return rule


def _norm_flops(node: Node) -> int:
    per = BATCHNORM_FLOPS_PER_ELEMENT if node.op_type == "BatchNormalization" else NORM_FLOPS_PER_ELEMENT
    return per * (_numel(_input(node, 0)) or 0)


def _pool_flops(node: Node) -> int:
    if node.domain == _HLO:
        return _hlo_reduce_window_flops(node)
    if node.op_type.startswith("Global"):
        return _numel(_input(node, 0)) or 0  # the window is the whole spatial extent
    out = _out_numel(node)
    if out is None:
        return 0
    kernel = node.attr("kernel_shape")
    return out * (math.prod(kernel) if kernel else 1)


def _rnn_flops(node: Node) -> int:
    x, w, r = _shape(_input(node, 0)), _shape(_input(node, 1)), _shape(_input(node, 2))
    if x is None or w is None or r is None or len(x) != 3 or len(w) != 3 or len(r) != 3:
        return 0
    seq, batch = (x[1], x[0]) if node.attr("layout", 0) else (x[0], x[1])
    directions, gates, input_size = w
    hidden = r[2]
    per_step = 2 * batch * gates * (input_size + hidden)  # X*W^T and H*R^T
    if _input(node, 3) is not None:
        per_step += 2 * batch * gates  # Wb + Rb
    per_step += batch * gates  # one activation per gate element
    per_step += batch * hidden * _RNN_CELL_FLOPS.get(node.op_type, 0)
    return seq * directions * per_step


def _attention_flops(node: Node) -> int:
    q, k, v = _shape(_input(node, 0)), _shape(_input(node, 1)), _shape(_input(node, 2))
    if q is None or k is None or v is None or len(q) != len(k) or len(q) not in (3, 4):
        return 0
    if len(q) == 4:  # [batch, heads, seq, head_size]
        batch, heads, seq_q, head = q
        seq_kv, head_v = k[2], v[3]
    else:  # [batch, seq, heads * head_size]; the head counts come from attributes
        heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
        if not heads or not kv_heads:
            return 0
        batch, seq_q, head = q[0], q[1], q[2] // heads
        seq_kv, head_v = k[1], v[2] // kv_heads
    scores = batch * heads * seq_q * seq_kv
    return 2 * scores * head + 2 * scores * head_v + ATTENTION_SOFTMAX_FLOPS_PER_SCORE * scores


# -- XLA HLO (dimension numbers are the importer's proto messages, read by field name) --------
def _hlo_dot_flops(node: Node) -> int:
    lhs, out = _shape(_input(node, 0)), _out_numel(node)
    dnums = node.attr("dot_dimension_numbers")
    if lhs is None or out is None or dnums is None:
        return 0
    contracting = getattr(dnums, "lhs_contracting_dimensions", ())
    if any(d >= len(lhs) for d in contracting):
        return 0
    return 2 * out * math.prod(lhs[d] for d in contracting)


def _hlo_reduce_window_flops(node: Node) -> int:
    out = _out_numel(node)
    window = node.attr("window")
    if out is None or window is None:
        return 0
    return out * math.prod(getattr(d, "size", 1) or 1 for d in getattr(window, "dimensions", ()))


_RULES: dict[OpKind, Callable[[Node], int]] = {
    OpKind.MATMUL: _matmul_flops,
    OpKind.CONV: conv_flops,
    OpKind.CONV_TRANSPOSE: conv_flops,
    OpKind.UNARY: _elementwise_flops,
    OpKind.BINARY: _elementwise_flops,
    OpKind.SELECT: _elementwise_flops,
    OpKind.CAST: _elementwise_flops,
    OpKind.REDUCE: _per_input_element(1),
    OpKind.ARG_REDUCE: _per_input_element(1),
    OpKind.CUMULATIVE: _per_input_element(1),
    OpKind.SOFTMAX: _per_input_element(SOFTMAX_FLOPS_PER_ELEMENT),
    OpKind.NORM: _norm_flops,
    OpKind.POOL: _pool_flops,
    OpKind.RNN: _rnn_flops,
    OpKind.ATTENTION: _attention_flops,
}


# -- public API ---------------------------------------------------------------------------------
def node_flops(node: Node) -> int:
    """Floating-point operations of one execution of `node`; 0 when shapes are not static."""
    rule = _RULES.get(node.kind)
    return 0 if rule is None else rule(node)


# Ops that move no data at run time: views and bitcasts (a reshape of a contiguous buffer; XLA
# lowers most reshapes to bitcasts, TF and onnxruntime alias the buffer), tuple plumbing, and
# constants (materialised once, not per step).
_NO_TRAFFIC_KINDS = frozenset({OpKind.RESHAPE, OpKind.TUPLE, OpKind.GET_TUPLE_ELEMENT, OpKind.CONSTANT})


def node_bytes(node: Node) -> int:
    """Bytes read (each distinct input once, constants included) plus bytes written.

    Values without a static shape or a fixed-width dtype contribute 0, and so do the ops that
    move no data at run time (reshape/bitcast views, tuple plumbing, constants).
    """
    if node.kind in _NO_TRAFFIC_KINDS:
        return 0
    total = 0
    seen: set[int] = set()
    for value in node.inputs:
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        total += value.nbytes() or 0
    for value in node.outputs:
        total += value.nbytes() or 0
    return total


def graph_flops(graph: Graph) -> int:
    """Sum of `node_flops` over every node, subgraphs included.

    A Loop/Scan body and both If branches are counted once each: trip counts and branch choices
    are not known statically, so this is the cost of one pass through every body.
    """
    return sum(node_flops(node) for node in graph.all_nodes())


def graph_bytes(graph: Graph) -> int:
    """Sum of `node_bytes` over every node, subgraphs included (counted as in `graph_flops`)."""
    return sum(node_bytes(node) for node in graph.all_nodes())
