"""The canonical op-kind vocabulary shared by every frontend.

Costs, features and fusion rules are written once against these kinds; each importer maps its
source op names onto them (keeping the source name on the node). The vocabulary is small on
purpose: the policy embeds it, and the cost model needs one FLOP/byte rule per kind.
"""

from __future__ import annotations

import enum

__all__ = ["OpKind", "onnx_op_kind", "register_op_kinds", "ELEMENTWISE_KINDS", "SIDE_EFFECT_KINDS"]


class OpKind(str, enum.Enum):
    # compute-heavy
    MATMUL = "matmul"
    CONV = "conv"
    CONV_TRANSPOSE = "conv_transpose"
    RNN = "rnn"
    ATTENTION = "attention"
    # elementwise
    UNARY = "unary"
    BINARY = "binary"
    SELECT = "select"
    CAST = "cast"
    # reductions and normalisation
    REDUCE = "reduce"
    ARG_REDUCE = "arg_reduce"
    SOFTMAX = "softmax"
    NORM = "norm"
    POOL = "pool"
    CUMULATIVE = "cumulative"
    # data movement and layout
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    BROADCAST = "broadcast"
    CONCAT = "concat"
    SPLIT = "split"
    SLICE = "slice"
    DYNAMIC_SLICE = "dynamic_slice"
    DYNAMIC_UPDATE_SLICE = "dynamic_update_slice"
    PAD = "pad"
    GATHER = "gather"
    SCATTER = "scatter"
    RESIZE = "resize"
    TILE = "tile"
    COPY = "copy"
    SORT = "sort"
    TOPK = "topk"
    # sources and metadata
    CONSTANT = "constant"
    IOTA = "iota"
    SHAPE = "shape"
    RANDOM = "random"
    # quantisation, signal processing, misc compute
    QUANTIZE = "quantize"
    DEQUANTIZE = "dequantize"
    FFT = "fft"
    # structure and control flow
    TUPLE = "tuple"
    GET_TUPLE_ELEMENT = "get_tuple_element"
    IF = "if"
    LOOP = "loop"
    SCAN = "scan"
    CALL = "call"
    FUSION = "fusion"
    # communication
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    COLLECTIVE_PERMUTE = "collective_permute"
    SEND = "send"
    RECV = "recv"
    # side effects and escape hatches
    CUSTOM_CALL = "custom_call"
    IO = "io"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


ELEMENTWISE_KINDS = frozenset({OpKind.UNARY, OpKind.BINARY, OpKind.SELECT, OpKind.CAST})
# Kinds whose nodes must not be removed or merged even when their outputs look unused.
SIDE_EFFECT_KINDS = frozenset({OpKind.RANDOM, OpKind.SEND, OpKind.RECV, OpKind.IO, OpKind.CUSTOM_CALL})

_UNARY = (
    "Abs Acos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Elu Erf Exp Floor Gelu HardSigmoid HardSwish "
    "IsInf IsNaN LeakyRelu Log Mish Neg Not Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin "
    "Sinh Softplus Softsign Sqrt Tan Tanh ThresholdedRelu Celu BitwiseNot Clip Swish"
).split()
_BINARY = (
    "Add Sub Mul Div Pow Max Min Mean Sum Mod And Or Xor Equal Greater GreaterOrEqual Less LessOrEqual "
    "PRelu BitShift BitwiseAnd BitwiseOr BitwiseXor"
).split()

_ONNX_TABLE: dict[str, OpKind] = {}
for _op in _UNARY:
    _ONNX_TABLE[_op] = OpKind.UNARY
for _op in _BINARY:
    _ONNX_TABLE[_op] = OpKind.BINARY

_ONNX_TABLE.update(
    {
        "MatMul": OpKind.MATMUL,
        "MatMulInteger": OpKind.MATMUL,
        "QLinearMatMul": OpKind.MATMUL,
        "Gemm": OpKind.MATMUL,
        "Einsum": OpKind.MATMUL,
        "Conv": OpKind.CONV,
        "ConvInteger": OpKind.CONV,
        "QLinearConv": OpKind.CONV,
        "DeformConv": OpKind.CONV,
        "ConvTranspose": OpKind.CONV_TRANSPOSE,
        "LSTM": OpKind.RNN,
        "GRU": OpKind.RNN,
        "RNN": OpKind.RNN,
        "Attention": OpKind.ATTENTION,
        "RotaryEmbedding": OpKind.BINARY,
        "Where": OpKind.SELECT,
        "Cast": OpKind.CAST,
        "CastLike": OpKind.CAST,
        "ReduceSum": OpKind.REDUCE,
        "ReduceMean": OpKind.REDUCE,
        "ReduceMax": OpKind.REDUCE,
        "ReduceMin": OpKind.REDUCE,
        "ReduceProd": OpKind.REDUCE,
        "ReduceL1": OpKind.REDUCE,
        "ReduceL2": OpKind.REDUCE,
        "ReduceLogSum": OpKind.REDUCE,
        "ReduceLogSumExp": OpKind.REDUCE,
        "ReduceSumSquare": OpKind.REDUCE,
        "ArgMax": OpKind.ARG_REDUCE,
        "ArgMin": OpKind.ARG_REDUCE,
        "Softmax": OpKind.SOFTMAX,
        "LogSoftmax": OpKind.SOFTMAX,
        "Hardmax": OpKind.SOFTMAX,
        "SoftmaxCrossEntropyLoss": OpKind.SOFTMAX,
        "NegativeLogLikelihoodLoss": OpKind.REDUCE,
        "BatchNormalization": OpKind.NORM,
        "InstanceNormalization": OpKind.NORM,
        "LayerNormalization": OpKind.NORM,
        "GroupNormalization": OpKind.NORM,
        "RMSNormalization": OpKind.NORM,
        "LpNormalization": OpKind.NORM,
        "MeanVarianceNormalization": OpKind.NORM,
        "LRN": OpKind.NORM,
        "Dropout": OpKind.UNARY,
        "MaxPool": OpKind.POOL,
        "AveragePool": OpKind.POOL,
        "LpPool": OpKind.POOL,
        "GlobalMaxPool": OpKind.POOL,
        "GlobalAveragePool": OpKind.POOL,
        "GlobalLpPool": OpKind.POOL,
        "MaxRoiPool": OpKind.POOL,
        "RoiAlign": OpKind.POOL,
        "MaxUnpool": OpKind.SCATTER,
        "CumSum": OpKind.CUMULATIVE,
        "Reshape": OpKind.RESHAPE,
        "Flatten": OpKind.RESHAPE,
        "Squeeze": OpKind.RESHAPE,
        "Unsqueeze": OpKind.RESHAPE,
        "Transpose": OpKind.TRANSPOSE,
        "DepthToSpace": OpKind.TRANSPOSE,
        "SpaceToDepth": OpKind.TRANSPOSE,
        "Expand": OpKind.BROADCAST,
        "Concat": OpKind.CONCAT,
        "ConcatFromSequence": OpKind.CONCAT,
        "Split": OpKind.SPLIT,
        "SplitToSequence": OpKind.SPLIT,
        "Slice": OpKind.SLICE,
        "CenterCropPad": OpKind.SLICE,
        "Pad": OpKind.PAD,
        "Gather": OpKind.GATHER,
        "GatherElements": OpKind.GATHER,
        "GatherND": OpKind.GATHER,
        "Compress": OpKind.GATHER,
        "NonZero": OpKind.GATHER,
        "Unique": OpKind.SORT,
        "OneHot": OpKind.SCATTER,
        "Scatter": OpKind.SCATTER,
        "ScatterElements": OpKind.SCATTER,
        "ScatterND": OpKind.SCATTER,
        "TensorScatter": OpKind.DYNAMIC_UPDATE_SLICE,
        "Resize": OpKind.RESIZE,
        "Upsample": OpKind.RESIZE,
        "GridSample": OpKind.RESIZE,
        "AffineGrid": OpKind.RESIZE,
        "Col2Im": OpKind.RESHAPE,
        "Tile": OpKind.TILE,
        "Identity": OpKind.COPY,
        "ReverseSequence": OpKind.COPY,
        "TopK": OpKind.TOPK,
        "NonMaxSuppression": OpKind.SORT,
        "Constant": OpKind.CONSTANT,
        "ConstantOfShape": OpKind.BROADCAST,
        "EyeLike": OpKind.CONSTANT,
        "Range": OpKind.IOTA,
        "Shape": OpKind.SHAPE,
        "Size": OpKind.SHAPE,
        "RandomNormal": OpKind.RANDOM,
        "RandomNormalLike": OpKind.RANDOM,
        "RandomUniform": OpKind.RANDOM,
        "RandomUniformLike": OpKind.RANDOM,
        "Multinomial": OpKind.RANDOM,
        "Bernoulli": OpKind.RANDOM,
        "QuantizeLinear": OpKind.QUANTIZE,
        "DynamicQuantizeLinear": OpKind.QUANTIZE,
        "DequantizeLinear": OpKind.DEQUANTIZE,
        "DFT": OpKind.FFT,
        "STFT": OpKind.FFT,
        "If": OpKind.IF,
        "Loop": OpKind.LOOP,
        "Scan": OpKind.SCAN,
        "SequenceConstruct": OpKind.TUPLE,
        "SequenceEmpty": OpKind.TUPLE,
        "SequenceInsert": OpKind.TUPLE,
        "SequenceErase": OpKind.TUPLE,
        "SequenceAt": OpKind.GET_TUPLE_ELEMENT,
        "SequenceLength": OpKind.SHAPE,
        "SequenceMap": OpKind.LOOP,
        "Optional": OpKind.TUPLE,
        "OptionalGetElement": OpKind.GET_TUPLE_ELEMENT,
        "OptionalHasElement": OpKind.SHAPE,
    }
)

# Extra per-domain tables that other importers (or plugins) register.
_DOMAIN_TABLES: dict[str, dict[str, OpKind]] = {"": _ONNX_TABLE, "ai.onnx": _ONNX_TABLE}


def register_op_kinds(domain: str, table: dict[str, OpKind]) -> None:
    """Add or override source-op -> kind mappings for a domain (e.g. "hlo", "tf")."""
    _DOMAIN_TABLES.setdefault(domain, {}).update(table)


def onnx_op_kind(op_type: str, domain: str = "") -> OpKind:
    """The canonical kind of an ONNX (or registered-domain) op; OTHER when unmapped."""
    table = _DOMAIN_TABLES.get(domain)
    if table is None:
        return OpKind.OTHER
    return table.get(op_type, OpKind.OTHER)
