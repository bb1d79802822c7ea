"""XLA HLO opcodes -> canonical op kinds (registered under the domain "hlo")."""

from __future__ import annotations

from graph_ir.op_kinds import OpKind, register_op_kinds

__all__ = ["HLO_DOMAIN", "HLO_OP_KINDS", "CALLED_ROLES"]

HLO_DOMAIN = "hlo"

_UNARY = (
    "abs cbrt ceil clz cos erf exponential exponential-minus-one floor imag is-finite log log-plus-one "
    "logistic negate not popcnt real reduce-precision round-nearest-afz round-nearest-even rsqrt sign sin "
    "sqrt tan tanh bitcast-convert copy-start copy-done stochastic-convert"
).split()
_BINARY = (
    "add and atan2 complex compare divide maximum minimum multiply or power remainder shift-left "
    "shift-right-arithmetic shift-right-logical subtract xor"
).split()

HLO_OP_KINDS: dict[str, OpKind] = {op: OpKind.UNARY for op in _UNARY}
HLO_OP_KINDS.update({op: OpKind.BINARY for op in _BINARY})
HLO_OP_KINDS.update(
    {
        "dot": OpKind.MATMUL,
        "ragged-dot": OpKind.MATMUL,
        "convolution": OpKind.CONV,
        "select": OpKind.SELECT,
        "clamp": OpKind.SELECT,
        "convert": OpKind.CAST,
        "reduce": OpKind.REDUCE,
        "reduce-window": OpKind.POOL,
        "select-and-scatter": OpKind.SCATTER,
        "batch-norm-training": OpKind.NORM,
        "batch-norm-inference": OpKind.NORM,
        "batch-norm-grad": OpKind.NORM,
        "reshape": OpKind.RESHAPE,
        "bitcast": OpKind.RESHAPE,
        "dynamic-reshape": OpKind.RESHAPE,
        "transpose": OpKind.TRANSPOSE,
        "broadcast": OpKind.BROADCAST,
        "concatenate": OpKind.CONCAT,
        "slice": OpKind.SLICE,
        "dynamic-slice": OpKind.DYNAMIC_SLICE,
        "dynamic-update-slice": OpKind.DYNAMIC_UPDATE_SLICE,
        "pad": OpKind.PAD,
        "gather": OpKind.GATHER,
        "scatter": OpKind.SCATTER,
        "reverse": OpKind.COPY,
        "copy": OpKind.COPY,
        "sort": OpKind.SORT,
        "topk": OpKind.TOPK,
        "constant": OpKind.CONSTANT,
        "iota": OpKind.IOTA,
        "get-dimension-size": OpKind.SHAPE,
        "set-dimension-size": OpKind.RESHAPE,
        "rng": OpKind.RANDOM,
        "rng-bit-generator": OpKind.RANDOM,
        "rng-get-and-update-state": OpKind.RANDOM,
        "fft": OpKind.FFT,
        "cholesky": OpKind.MATMUL,
        "triangular-solve": OpKind.MATMUL,
        "tuple": OpKind.TUPLE,
        "get-tuple-element": OpKind.GET_TUPLE_ELEMENT,
        "conditional": OpKind.IF,
        "while": OpKind.LOOP,
        "call": OpKind.CALL,
        "map": OpKind.CALL,
        "async-start": OpKind.CALL,
        "async-update": OpKind.CALL,
        "async-done": OpKind.CALL,
        "fusion": OpKind.FUSION,
        "all-reduce": OpKind.ALL_REDUCE,
        "all-reduce-start": OpKind.ALL_REDUCE,
        "all-reduce-done": OpKind.ALL_REDUCE,
        "all-gather": OpKind.ALL_GATHER,
        "all-gather-start": OpKind.ALL_GATHER,
        "all-gather-done": OpKind.ALL_GATHER,
        "reduce-scatter": OpKind.REDUCE_SCATTER,
        "all-to-all": OpKind.ALL_TO_ALL,
        "ragged-all-to-all": OpKind.ALL_TO_ALL,
        "collective-permute": OpKind.COLLECTIVE_PERMUTE,
        "collective-permute-start": OpKind.COLLECTIVE_PERMUTE,
        "collective-permute-done": OpKind.COLLECTIVE_PERMUTE,
        "collective-broadcast": OpKind.ALL_GATHER,
        "send": OpKind.SEND,
        "send-done": OpKind.SEND,
        "recv": OpKind.RECV,
        "recv-done": OpKind.RECV,
        "infeed": OpKind.IO,
        "outfeed": OpKind.IO,
        "custom-call": OpKind.CUSTOM_CALL,
        "after-all": OpKind.TUPLE,
        "add-dependency": OpKind.COPY,
        "optimization-barrier": OpKind.COPY,
        "partition-id": OpKind.CONSTANT,
        "replica-id": OpKind.CONSTANT,
        "domain": OpKind.COPY,
    }
)

# The names of the computations an instruction calls, by position in called_computation_ids.
CALLED_ROLES: dict[str, tuple[str, ...]] = {
    "while": ("body", "condition"),
    "fusion": ("fused_computation",),
    "select-and-scatter": ("select", "scatter"),
}

register_op_kinds(HLO_DOMAIN, HLO_OP_KINDS)
