"""ONNX-backed constant tensors: validated on import, decoded only when asked.

`OnnxTensor` keeps a reference to the model's own TensorProto (no copy of the bytes);
`OnnxExternalTensor` keeps the proto and the model folder, and reads the external file through
onnx's own checked opener (which refuses absolute paths, `..` escapes and symbolic links).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import numpy_helper

from graph_ir.dtypes import DType
from graph_ir.errors import ExternalDataError, InvalidShapeError, TensorDataError
from graph_ir.tensors import Tensor
from graph_ir.types import Shape

if TYPE_CHECKING:
    from onnx import TensorProto

__all__ = ["OnnxTensor", "OnnxExternalTensor", "tensor_from_proto", "tensor_to_proto"]

# Which repeated field holds each ONNX type's values, and how many entries one element takes.
_TYPED_FIELDS: dict[DType, tuple[str, int]] = {
    DType.FLOAT32: ("float_data", 1),
    DType.COMPLEX64: ("float_data", 2),
    DType.FLOAT64: ("double_data", 1),
    DType.COMPLEX128: ("double_data", 2),
    DType.INT64: ("int64_data", 1),
    DType.UINT32: ("uint64_data", 1),
    DType.UINT64: ("uint64_data", 1),
    DType.STRING: ("string_data", 1),
    DType.INT32: ("int32_data", 1),
    DType.INT16: ("int32_data", 1),
    DType.INT8: ("int32_data", 1),
    DType.UINT16: ("int32_data", 1),
    DType.UINT8: ("int32_data", 1),
    DType.BOOL: ("int32_data", 1),
    DType.FLOAT16: ("int32_data", 1),
    DType.BFLOAT16: ("int32_data", 1),
}


class OnnxTensor(Tensor):
    """A tensor whose data stays in the model's TensorProto."""

    __slots__ = ("proto",)

    def __init__(self, proto: TensorProto, dtype: DType, shape: Shape) -> None:
        super().__init__(dtype, shape)
        self.proto = proto

    def numpy(self) -> np.ndarray:
        if self.dtype is DType.STRING:
            return _string_array(self.proto)
        return numpy_helper.to_array(self.proto)


def _string_array(proto: TensorProto) -> np.ndarray:
    """ONNX strings are bytes; onnx decodes them as UTF-8, which fails for other bytes (valid in
    a model): those tensors keep their elements as `bytes`."""
    try:
        return numpy_helper.to_array(proto)
    except UnicodeDecodeError:
        return np.array(list(proto.string_data), dtype=object).reshape(tuple(proto.dims))


class OnnxExternalTensor(Tensor):
    """A tensor stored in an external file next to the model, read on demand."""

    __slots__ = ("proto", "base_dir")

    def __init__(self, proto: TensorProto, dtype: DType, shape: Shape, base_dir: str) -> None:
        super().__init__(dtype, shape)
        self.proto = proto
        self.base_dir = base_dir

    def loaded_proto(self) -> TensorProto:
        """A copy of the proto with the external bytes inlined (onnx checks the path again)."""
        inline = onnx.TensorProto()
        inline.CopyFrom(self.proto)
        try:
            onnx.external_data_helper.load_external_data_for_tensor(inline, self.base_dir)
        except (onnx.checker.ValidationError, ValueError, OSError) as err:
            raise ExternalDataError(str(err), field=self.proto.name) from err
        return inline

    def numpy(self) -> np.ndarray:
        return numpy_helper.to_array(self.loaded_proto())


def _external_info(proto: TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in proto.external_data}


def _check_external(proto: TensorProto, base_dir: str | None, expected: int) -> None:
    """Validate location and bounds now, so a bad model fails on import, not mid-pass."""
    name = proto.name
    info = _external_info(proto)
    location = info.get("location", "")
    if not location:
        raise ExternalDataError("external data without a 'location'", field=name)
    if base_dir is None:
        raise ExternalDataError(
            f"external data '{location}' needs the model's folder; load the model from a file path", field=name
        )
    try:
        # onnx's own opener: rejects absolute paths, paths leaving base_dir, symlinks, non-files.
        fd = onnx.external_data_helper._open_external_data_fd(base_dir, location, name, True)
    except (onnx.checker.ValidationError, OSError) as err:
        raise ExternalDataError(str(err), field=name) from err
    try:
        file_size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else file_size - offset
    except ValueError as err:
        raise ExternalDataError(f"external data offset/length is not an integer: {err}", field=name) from None
    if offset < 0 or length < 0 or offset + length > file_size:
        raise ExternalDataError(
            f"external data [{offset}, {offset + length}) lies outside '{location}' ({file_size} bytes)", field=name
        )
    from graph_ir.io import limits

    limits.check("max_external_data_bytes", length, f"the external data length of tensor {name!r}", node=name)
    if expected >= 0 and length < expected:
        raise ExternalDataError(f"external data holds {length} bytes, the dims need {expected}", field=name)


def tensor_from_proto(proto: TensorProto, base_dir: str | None = None) -> Tensor:
    """Validate a TensorProto (dtype, dims, data length) and wrap it without copying its data."""
    name = proto.name
    try:
        dtype = DType.from_onnx(proto.data_type)
    except ValueError:
        raise TensorDataError(f"unknown data_type {proto.data_type}", field=name) from None
    try:
        shape = Shape(proto.dims)
    except InvalidShapeError as err:
        raise TensorDataError(f"invalid dims: {err.message}", field=name) from None
    numel = shape.numel() or 0
    from graph_ir.io import limits

    limits.check("max_tensor_elements", numel, f"the element count of tensor {name!r}", node=name)
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        _check_external(proto, base_dir, dtype.nbytes(numel) if dtype.bitwidth else -1)
        return OnnxExternalTensor(proto, dtype, shape, base_dir or "")
    if proto.HasField("raw_data"):
        if dtype is DType.STRING:
            raise TensorDataError("string tensors cannot use raw_data", field=name)
        expected = dtype.nbytes(numel)
        if len(proto.raw_data) != expected:
            what = "shorter" if len(proto.raw_data) < expected else "longer"
            raise TensorDataError(
                f"raw_data holds {len(proto.raw_data)} bytes, {what} than the {expected} that dims {list(shape)} "
                f"of {dtype} need",
                field=name,
            )
    else:
        field_name, per_element = _TYPED_FIELDS.get(dtype, ("", 0))
        if field_name:
            have = len(getattr(proto, field_name))
            if have != numel * per_element:
                raise TensorDataError(
                    f"{field_name} holds {have} entries, dims {list(shape)} need {numel * per_element}", field=name
                )
    return OnnxTensor(proto, dtype, shape)


def tensor_to_proto(tensor: Tensor, name: str, out: TensorProto | None = None) -> TensorProto:
    """Fill `out` (or a new TensorProto) for `tensor`, reusing the source proto where there is one."""
    proto = out if out is not None else onnx.TensorProto()
    if isinstance(tensor, OnnxTensor):
        proto.CopyFrom(tensor.proto)
    elif isinstance(tensor, OnnxExternalTensor):
        proto.CopyFrom(tensor.loaded_proto())
    else:
        if tensor.dtype.onnx_code is None:
            from graph_ir.errors import ExportError

            raise ExportError(f"element type {tensor.dtype} has no ONNX equivalent", field=name)
        array = np.asarray(tensor.numpy())
        if tensor.dtype is DType.STRING:
            made = onnx.helper.make_tensor(
                name, onnx.TensorProto.STRING, array.shape, [s if isinstance(s, bytes) else str(s).encode() for s in array.ravel()]
            )
        else:
            made = numpy_helper.from_array(array)
            made.data_type = tensor.dtype.onnx_code
        proto.CopyFrom(made)
    if proto.name != name:
        proto.name = name  # assigning an equal name would still mark an unset name as present
    return proto
