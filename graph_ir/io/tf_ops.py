"""TensorFlow ops -> canonical op kinds (domain "tf"), TF element types, and op output layouts.

Nothing here imports TensorFlow: the helpers read `OpDef`/`FunctionDef.signature` and
`AttrValue` protos that the caller already holds, so the table can be registered cheaply.
"""

from __future__ import annotations

from typing import Any, Mapping

from graph_ir.dtypes import DType
from graph_ir.op_kinds import OpKind, register_op_kinds

__all__ = [
    "TF_DOMAIN",
    "TF_OP_KINDS",
    "V1_CONTROL_FLOW",
    "dtype_from_tf",
    "dtype_to_tf",
    "output_layout",
    "op_kind",
]

TF_DOMAIN = "tf"

# TF's DataType enum numbers (tensorflow/core/framework/types.proto); `_REF` variants add 100.
_TF_DTYPES: dict[int, DType] = {
    1: DType.FLOAT32, 2: DType.FLOAT64, 3: DType.INT32, 4: DType.UINT8, 5: DType.INT16, 6: DType.INT8,
    7: DType.STRING, 8: DType.COMPLEX64, 9: DType.INT64, 10: DType.BOOL, 11: DType.QINT8, 12: DType.QUINT8,
    13: DType.QINT32, 14: DType.BFLOAT16, 15: DType.QINT16, 16: DType.QUINT16, 17: DType.UINT16,
    18: DType.COMPLEX128, 19: DType.FLOAT16, 20: DType.RESOURCE, 21: DType.VARIANT, 22: DType.UINT32,
    23: DType.UINT64, 24: DType.FLOAT8E5M2, 25: DType.FLOAT8E4M3FN, 26: DType.FLOAT8E4M3FNUZ,
    27: DType.FLOAT8E4M3B11FNUZ, 28: DType.FLOAT8E5M2FNUZ, 29: DType.INT4, 30: DType.UINT4,
    31: DType.INT2, 32: DType.UINT2, 33: DType.FLOAT4E2M1,
}
_TO_TF = {dtype: code for code, dtype in _TF_DTYPES.items()}
_REF_OFFSET = 100

V1_CONTROL_FLOW = frozenset({"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
                             "NextIteration", "RefNextIteration", "LoopCond", "_SwitchN"})


def dtype_from_tf(code: int) -> tuple[DType | None, bool]:
    """(element type, is a reference type) of a TF DataType number; None for DT_INVALID/unknown."""
    is_ref = code > _REF_OFFSET
    return _TF_DTYPES.get(code - _REF_OFFSET if is_ref else code), is_ref


def dtype_to_tf(dtype: DType, *, ref: bool = False) -> int:
    code = _TO_TF.get(dtype)
    if code is None:
        raise ValueError(f"element type {dtype} has no TensorFlow DataType")
    return code + _REF_OFFSET if ref else code


def _attr_value(name: str, attrs: Mapping[str, Any], op_def: Any) -> Any | None:
    """A node's AttrValue for `name`, falling back to the OpDef's default."""
    if name in attrs:
        return attrs[name]
    for attr in op_def.attr:
        if attr.name == name and attr.HasField("default_value"):
            return attr.default_value
    return None


def output_layout(op_def: Any, attrs: Mapping[str, Any]) -> list[tuple[str, list[int]]] | None:
    """Per output arg: (name, TF dtype numbers of its tensors, 0 where unknown).

    `op_def` is an OpDef or a FunctionDef signature; `attrs` the node's attr map. The count of
    an arg is 1, `attrs[number_attr].i` or `len(attrs[type_list_attr].list.type)`; None when an
    attr the count depends on is absent or a function-body placeholder.
    """
    layout: list[tuple[str, list[int]]] = []
    for arg in op_def.output_arg:
        if arg.number_attr:
            value = _attr_value(arg.number_attr, attrs, op_def)
            if value is None or value.WhichOneof("value") != "i":
                return None
            count = value.i
            dtype = arg.type or _type_of(arg.type_attr, attrs, op_def)
            layout.append((arg.name, [dtype] * count))
        elif arg.type_list_attr:
            value = _attr_value(arg.type_list_attr, attrs, op_def)
            if value is None or value.WhichOneof("value") not in ("list", None):
                return None
            layout.append((arg.name, list(value.list.type)))
        else:
            dtype = arg.type or _type_of(arg.type_attr, attrs, op_def)
            if arg.is_ref and dtype:
                dtype += _REF_OFFSET
            layout.append((arg.name, [dtype]))
    return layout


def _type_of(attr_name: str, attrs: Mapping[str, Any], op_def: Any) -> int:
    value = _attr_value(attr_name, attrs, op_def) if attr_name else None
    return value.type if value is not None and value.WhichOneof("value") == "type" else 0


_UNARY = (
    "Abs Acos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Digamma Elu Erf Erfc Exp Expm1 Floor Inv Invert IsFinite "
    "IsInf IsNan LeakyRelu Lgamma Log Log1p LogicalNot Neg OnesLike Reciprocal Relu Relu6 Rint Round Rsqrt Selu "
    "Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Square Tan Tanh ZerosLike Real Imag Angle Conj ClipByValue "
    "Gelu Dropout CheckNumerics StopGradient PreventGradient PopulationCount"
).split()
_BINARY = (
    "Add AddV2 AddN BiasAdd Sub Mul MulNoNan Div DivNoNan RealDiv FloorDiv FloorMod TruncateDiv TruncateMod Mod "
    "Pow Maximum Minimum SquaredDifference Atan2 Equal NotEqual Greater GreaterEqual Less LessEqual LogicalAnd "
    "LogicalOr BitwiseAnd BitwiseOr BitwiseXor LeftShift RightShift Xdivy Xlog1py Xlogy Complex ApproximateEqual "
    "ReluGrad Relu6Grad EluGrad SeluGrad SigmoidGrad TanhGrad SqrtGrad RsqrtGrad ReciprocalGrad SoftplusGrad "
    "LeakyReluGrad BiasAddGrad BroadcastGradientArgs"
).split()
_REDUCE = "Sum Mean Max Min Prod All Any EuclideanNorm L2Loss".split()
_CONV = (
    "Conv2D Conv3D DepthwiseConv2dNative Conv2DBackpropFilter Conv2DBackpropFilterV2 Conv3DBackpropFilterV2 "
    "DepthwiseConv2dNativeBackpropFilter FusedConv2DBiasActivation _FusedConv2D Conv QuantizedConv2D"
).split()
_CONV_T = "Conv2DBackpropInput Conv2DBackpropInputV2 Conv3DBackpropInputV2 DepthwiseConv2dNativeBackpropInput".split()
_POOL = (
    "MaxPool MaxPoolV2 MaxPool3D AvgPool AvgPool3D MaxPoolGrad MaxPoolGradV2 AvgPoolGrad MaxPoolWithArgmax "
    "FractionalMaxPool FractionalAvgPool"
).split()
_NORM = "FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 FusedBatchNormGrad FusedBatchNormGradV3 LRN BatchNormWithGlobalNormalization".split()
_RESHAPE = "Reshape Squeeze ExpandDims Flatten".split()
_IO = (
    "VarHandleOp VariableV2 Variable ReadVariableOp AssignVariableOp AssignAddVariableOp AssignSubVariableOp Assign "
    "AssignAdd AssignSub Placeholder PlaceholderWithDefault PlaceholderV2 SaveV2 RestoreV2 Save Restore MergeV2Checkpoints "
    "ResourceApplyGradientDescent ResourceApplyAdam ResourceApplyMomentum ResourceApplyKerasMomentum "
    "ApplyGradientDescent ApplyAdam ApplyMomentum Print PrintV2 Assert ReadFile WriteFile "
    "ResourceGather ResourceScatterAdd ResourceScatterUpdate VarIsInitializedOp IsVariableInitialized "
    "_Arg _Retval _Recv _Send QueueEnqueueV2 QueueDequeueV2 FIFOQueueV2 QueueEnqueue QueueDequeue FIFOQueue"
).split()
_CALL = "PartitionedCall StatefulPartitionedCall SymbolicGradient RemoteCall".split()

TF_OP_KINDS: dict[str, OpKind] = {op: OpKind.UNARY for op in _UNARY}
TF_OP_KINDS.update({op: OpKind.BINARY for op in _BINARY})
TF_OP_KINDS.update({op: OpKind.REDUCE for op in _REDUCE})
TF_OP_KINDS.update({op: OpKind.CONV for op in _CONV})
TF_OP_KINDS.update({op: OpKind.CONV_TRANSPOSE for op in _CONV_T})
TF_OP_KINDS.update({op: OpKind.POOL for op in _POOL})
TF_OP_KINDS.update({op: OpKind.NORM for op in _NORM})
TF_OP_KINDS.update({op: OpKind.RESHAPE for op in _RESHAPE})
TF_OP_KINDS.update({op: OpKind.IO for op in _IO})
TF_OP_KINDS.update({op: OpKind.CALL for op in _CALL})
TF_OP_KINDS.update(
    {
        "MatMul": OpKind.MATMUL, "BatchMatMul": OpKind.MATMUL, "BatchMatMulV2": OpKind.MATMUL,
        "BatchMatMulV3": OpKind.MATMUL, "Einsum": OpKind.MATMUL, "_FusedMatMul": OpKind.MATMUL,
        "SparseMatMul": OpKind.MATMUL, "QuantizedMatMul": OpKind.MATMUL,
        "LSTMBlockCell": OpKind.RNN, "BlockLSTM": OpKind.RNN, "BlockLSTMV2": OpKind.RNN, "GRUBlockCell": OpKind.RNN,
        "CudnnRNN": OpKind.RNN, "CudnnRNNV3": OpKind.RNN,
        "Select": OpKind.SELECT, "SelectV2": OpKind.SELECT,
        "Cast": OpKind.CAST, "Bitcast": OpKind.CAST,
        "ArgMax": OpKind.ARG_REDUCE, "ArgMin": OpKind.ARG_REDUCE,
        "Softmax": OpKind.SOFTMAX, "LogSoftmax": OpKind.SOFTMAX,
        "SoftmaxCrossEntropyWithLogits": OpKind.SOFTMAX, "SparseSoftmaxCrossEntropyWithLogits": OpKind.SOFTMAX,
        "Cumsum": OpKind.CUMULATIVE, "Cumprod": OpKind.CUMULATIVE,
        "Transpose": OpKind.TRANSPOSE, "ConjugateTranspose": OpKind.TRANSPOSE,
        "DepthToSpace": OpKind.TRANSPOSE, "SpaceToDepth": OpKind.TRANSPOSE,
        "BroadcastTo": OpKind.BROADCAST, "Fill": OpKind.BROADCAST,
        "Concat": OpKind.CONCAT, "ConcatV2": OpKind.CONCAT, "Pack": OpKind.CONCAT,
        "Split": OpKind.SPLIT, "SplitV": OpKind.SPLIT, "Unpack": OpKind.SPLIT,
        "Slice": OpKind.SLICE, "StridedSlice": OpKind.SLICE, "StridedSliceGrad": OpKind.PAD,
        "Pad": OpKind.PAD, "PadV2": OpKind.PAD, "MirrorPad": OpKind.PAD,
        "Gather": OpKind.GATHER, "GatherV2": OpKind.GATHER, "GatherNd": OpKind.GATHER,
        "Where": OpKind.GATHER, "Unique": OpKind.SORT,
        "ScatterNd": OpKind.SCATTER, "TensorScatterUpdate": OpKind.SCATTER, "TensorScatterAdd": OpKind.SCATTER,
        "OneHot": OpKind.SCATTER, "UnsortedSegmentSum": OpKind.SCATTER, "DynamicStitch": OpKind.SCATTER,
        "ResizeBilinear": OpKind.RESIZE, "ResizeNearestNeighbor": OpKind.RESIZE, "ResizeBicubic": OpKind.RESIZE,
        "Tile": OpKind.TILE,
        "Identity": OpKind.COPY, "IdentityN": OpKind.COPY, "Snapshot": OpKind.COPY, "ReverseV2": OpKind.COPY,
        "ReverseSequence": OpKind.COPY, "NoOp": OpKind.OTHER,
        "TopKV2": OpKind.TOPK, "TopK": OpKind.TOPK,
        "Const": OpKind.CONSTANT, "HostConst": OpKind.CONSTANT,
        "Range": OpKind.IOTA, "LinSpace": OpKind.IOTA,
        "Shape": OpKind.SHAPE, "ShapeN": OpKind.SHAPE, "Size": OpKind.SHAPE, "Rank": OpKind.SHAPE,
        "RandomUniform": OpKind.RANDOM, "RandomStandardNormal": OpKind.RANDOM, "TruncatedNormal": OpKind.RANDOM,
        "RandomUniformInt": OpKind.RANDOM, "Multinomial": OpKind.RANDOM, "RandomShuffle": OpKind.RANDOM,
        "StatelessRandomUniformV2": OpKind.RANDOM, "StatelessRandomNormalV2": OpKind.RANDOM,
        "FakeQuantWithMinMaxVars": OpKind.QUANTIZE, "FakeQuantWithMinMaxVarsPerChannel": OpKind.QUANTIZE,
        "FakeQuantWithMinMaxArgs": OpKind.QUANTIZE, "QuantizeV2": OpKind.QUANTIZE, "Dequantize": OpKind.DEQUANTIZE,
        "FFT": OpKind.FFT, "IFFT": OpKind.FFT, "RFFT": OpKind.FFT, "IRFFT": OpKind.FFT,
        "If": OpKind.IF, "StatelessIf": OpKind.IF, "Case": OpKind.IF, "StatelessCase": OpKind.IF,
        "While": OpKind.LOOP, "StatelessWhile": OpKind.LOOP, "For": OpKind.LOOP,
        # v1 control flow: routing ops. NextIteration feeds the next iteration's Merge through a back
        # edge the IR does not hold as a use (see tf_import), so it is a side-effect kind (SEND) that
        # DCE keeps, like a send to the loop's next iteration.
        # Switch/Merge route whole tensors by a predicate: not elementwise selects, so not fusible.
        "Switch": OpKind.OTHER, "RefSwitch": OpKind.OTHER, "_SwitchN": OpKind.OTHER,
        "Merge": OpKind.OTHER, "RefMerge": OpKind.OTHER,
        "Enter": OpKind.COPY, "RefEnter": OpKind.COPY, "Exit": OpKind.COPY, "RefExit": OpKind.COPY,
        "LoopCond": OpKind.COPY,
        "NextIteration": OpKind.SEND, "RefNextIteration": OpKind.SEND,
    }
)

register_op_kinds(TF_DOMAIN, TF_OP_KINDS)


def op_kind(op_type: str, *, is_stateful: bool = False, is_function: bool = False) -> OpKind:
    """The kind of a TF op; calls of library functions are CALL, unmapped stateful ops IO."""
    kind = TF_OP_KINDS.get(op_type)
    if kind is not None:
        return kind
    if is_function:
        return OpKind.CALL
    return OpKind.IO if is_stateful else OpKind.OTHER
