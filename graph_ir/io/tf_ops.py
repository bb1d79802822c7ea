"""TensorFlow op vocabulary: op -> canonical kind (domain "tf"), TF element types, op output
layouts, and the AttrValue <-> Attr codec shared by tf_import and tf_export.

Importing this module does not import TensorFlow: the helpers read `OpDef`, `FunctionDef.signature`
and `AttrValue` protos the caller already holds (TensorFlow loads only to decode or build tensors).
"""

from __future__ import annotations

from typing import Any, Mapping

from graph_ir.attrs import Attr, AttrKind
from graph_ir.dtypes import DType
from graph_ir.op_kinds import OpKind, register_op_kinds
from graph_ir.tensors import Tensor
from graph_ir.types import Shape, TensorType

__all__ = [
    "TF_DOMAIN",
    "TF_OP_KINDS",
    "V1_CONTROL_FLOW",
    "dtype_from_tf",
    "dtype_to_tf",
    "output_layout",
    "op_kind",
    "shape_from_tf",
    "write_shape",
    "attr_from_tf",
    "attr_to_tf",
    "TFTensor",
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
            count = _checked_count(value.i, arg.number_attr)
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


def _checked_count(count: int, attr_name: str) -> int:
    """A count attr (N, num...) that sizes a list: negative is corrupt, huge over a limit (fuzzing
    found N = 2**31 - 1: building that many outputs hangs)."""
    from graph_ir.errors import CorruptModelError
    from graph_ir.io import limits

    if count < 0:
        raise CorruptModelError(f"attr {attr_name} = {count} sizes a list and cannot be negative", field=attr_name)
    limits.check("max_node_arity", count, f"attr {attr_name} (a list size)")
    return count


def expected_input_count(op_def: Any, attrs: Mapping[str, Any]) -> int | None:
    """How many data inputs the OpDef says the node has (None where a count is unknown)."""
    total = 0
    for arg in op_def.input_arg:
        if arg.number_attr:
            value = _attr_value(arg.number_attr, attrs, op_def)
            if value is None or value.WhichOneof("value") != "i":
                return None
            total += value.i
        elif arg.type_list_attr:
            value = _attr_value(arg.type_list_attr, attrs, op_def)
            if value is None:
                return None
            total += len(value.list.type)
        else:
            total += 1
    return total


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


# -- attribute and tensor codecs (AttrValue <-> Attr) ------------------------------------------
def shape_from_tf(proto: Any) -> Shape | None:
    if proto.unknown_rank:
        return None
    return Shape(d.size if d.size >= 0 else None for d in proto.dim)


def attr_from_tf(name: str, value: Any) -> Attr:
    which = value.WhichOneof("value")
    if which == "i":
        return Attr(name, AttrKind.INT, value.i)
    if which == "f":
        return Attr(name, AttrKind.FLOAT, value.f)
    if which == "b":
        return Attr(name, AttrKind.INT, int(value.b))
    if which == "s":
        return Attr(name, AttrKind.STRING, _text(value.s))
    if which == "type":
        dtype, is_ref = dtype_from_tf(value.type)
        if dtype is not None and not is_ref:
            return Attr(name, AttrKind.TYPE, TensorType(dtype))
    elif which == "shape":
        return Attr(name, AttrKind.TYPE, TensorType(None, shape_from_tf(value.shape)))
    elif which == "tensor":
        tensor = TFTensor.from_proto(value.tensor)
        if tensor is not None:
            return Attr(name, AttrKind.TENSOR, tensor)
    elif which == "func":
        return Attr(name, AttrKind.STRING, value.func.name)
    elif which == "placeholder":
        return Attr(name, AttrKind.REF, value.placeholder)
    elif which == "list":
        converted = _list_attr(name, value.list)
        if converted is not None:
            return converted
    return Attr(name, AttrKind.OPAQUE, value)


def _list_attr(name: str, items: Any) -> Attr | None:
    filled = [field for field, _ in items.ListFields()]
    if len(filled) != 1:
        return None  # empty lists have no element kind; they stay OPAQUE
    field = filled[0].name
    if field == "i":
        return Attr(name, AttrKind.INTS, tuple(items.i))
    if field == "f":
        return Attr(name, AttrKind.FLOATS, tuple(items.f))
    if field == "b":
        return Attr(name, AttrKind.INTS, tuple(int(b) for b in items.b))
    if field == "s":
        return Attr(name, AttrKind.STRINGS, tuple(_text(s) for s in items.s))
    if field == "type":
        types = [dtype_from_tf(t) for t in items.type]
        if all(d is not None and not ref for d, ref in types):
            return Attr(name, AttrKind.TYPES, tuple(TensorType(d) for d, _ in types))
    elif field == "shape":
        return Attr(name, AttrKind.TYPES, tuple(TensorType(None, shape_from_tf(s)) for s in items.shape))
    elif field == "func":
        return Attr(name, AttrKind.STRINGS, tuple(f.name for f in items.func))
    return None


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


class TFTensor(Tensor):
    """A Const's TensorProto, decoded to numpy on first use (and then cached)."""

    __slots__ = ("proto", "_array")

    def __init__(self, proto: Any, dtype: Any, shape: Shape) -> None:
        super().__init__(dtype, shape)
        self.proto = proto
        self._array = None

    @classmethod
    def from_proto(cls, proto: Any) -> TFTensor | None:
        dtype, is_ref = dtype_from_tf(proto.dtype)
        shape = shape_from_tf(proto.tensor_shape)
        if dtype is None or is_ref or shape is None or None in shape:
            return None
        from graph_ir.io import limits

        limits.check("max_tensor_elements", shape.numel() or 0, "a constant tensor's element count")
        return cls(proto, dtype, shape)

    def numpy(self) -> Any:
        if self._array is None:
            from tensorflow.python.framework import tensor_util

            if self.dtype is DType.STRING and self.proto.tensor_content:
                # TF's MakeNdarray cannot read strings packed in tensor_content (valid in
                # GraphDefs TF itself writes): decode TF's string-list encoding ourselves.
                self._array = _decode_string_content(self.proto.tensor_content, self.size).reshape(tuple(self.shape))
            else:
                self._array = tensor_util.MakeNdarray(self.proto)
        return self._array


def _decode_string_content(content: bytes, count: int) -> Any:
    """TF's EncodeStringList: `count` varint32 lengths, then the strings back to back."""
    import numpy as np

    lengths, pos = [], 0
    for _ in range(count):
        value = shift = 0
        while True:
            if pos >= len(content):
                raise ValueError("truncated string tensor_content")
            byte = content[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        lengths.append(value)
    items = []
    for length in lengths:
        items.append(bytes(content[pos : pos + length]))
        pos += length
    if pos != len(content):
        raise ValueError("string tensor_content length does not match its dims")
    array = np.empty(count, dtype=object)
    array[:] = items
    return array


def attr_to_tf(out: Any, attr: Attr, attr_type: str | None) -> None:
    """An IR Attr -> AttrValue; the OpDef's attr type decides between look-alikes (int/bool...)."""
    out.Clear()
    kind, value = attr.kind, attr.value
    if kind is AttrKind.OPAQUE:
        out.CopyFrom(value)
    elif kind is AttrKind.REF:
        out.placeholder = value
    elif kind is AttrKind.INT:
        if attr_type == "bool":
            out.b = bool(value)
        else:
            out.i = value
    elif kind is AttrKind.FLOAT:
        out.f = value
    elif kind is AttrKind.STRING:
        if attr_type == "func":
            out.func.name = value
        else:
            out.s = value.encode("utf-8") if isinstance(value, str) else value
    elif kind is AttrKind.TYPE:
        _encode_type(out, value, attr_type == "shape")
    elif kind is AttrKind.TENSOR:
        out.tensor.CopyFrom(_tensor_proto(value))
    elif kind is AttrKind.INTS:
        (out.list.b if attr_type == "list(bool)" else out.list.i).extend(bool(v) if attr_type == "list(bool)" else v for v in value)
        out.list.SetInParent()
    elif kind is AttrKind.FLOATS:
        out.list.f.extend(value)
        out.list.SetInParent()
    elif kind is AttrKind.STRINGS:
        if attr_type == "list(func)":
            for name in value:
                out.list.func.add(name=name)
        else:
            out.list.s.extend(v.encode("utf-8") if isinstance(v, str) else v for v in value)
        out.list.SetInParent()
    elif kind is AttrKind.TYPES:
        for item in value:
            if attr_type == "list(shape)" or (attr_type is None and item.dtype is None):
                write_shape(out.list.shape.add(), item.shape)
            else:
                out.list.type.append(dtype_to_tf(item.dtype))
        out.list.SetInParent()
    else:
        raise TypeError(f"{kind.value} attributes have no TensorFlow form")


def _encode_type(out: Any, value: Any, is_shape: bool) -> None:
    if not isinstance(value, TensorType):
        raise TypeError(f"{value} is not a tensor type")
    if is_shape or value.dtype is None:
        write_shape(out.shape, value.shape)
    else:
        out.type = dtype_to_tf(value.dtype)


def write_shape(out: Any, shape: Any) -> None:
    out.Clear()
    if shape is None:
        out.unknown_rank = True
        return
    for dim in shape:
        out.dim.add(size=dim if isinstance(dim, int) else -1)


def _tensor_proto(tensor: Any) -> Any:
    if isinstance(tensor, TFTensor):
        return tensor.proto
    from tensorflow.python.framework import tensor_util

    return tensor_util.make_tensor_proto(tensor.numpy(), dtype=dtype_to_tf(tensor.dtype), shape=tuple(tensor.shape))
