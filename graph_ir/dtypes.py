"""Element types: the union of what ONNX, XLA and TensorFlow can store in a tensor.

Each `DType` knows its width in bits, its ONNX `TensorProto.DataType` code (where ONNX has one),
its XLA `PrimitiveType` name (where XLA has one) and its numpy dtype (through ml_dtypes for the
narrow floats and sub-byte integers).
"""

from __future__ import annotations

import enum
from functools import cache

import numpy as np

__all__ = ["DType"]


class DType(enum.Enum):
    # value: (short name, bits, onnx code or None, xla name or None)
    BOOL = ("bool", 8, 9, "PRED")
    INT2 = ("i2", 2, 26, "S2")
    INT4 = ("i4", 4, 22, "S4")
    INT8 = ("i8", 8, 3, "S8")
    INT16 = ("i16", 16, 5, "S16")
    INT32 = ("i32", 32, 6, "S32")
    INT64 = ("i64", 64, 7, "S64")
    UINT2 = ("u2", 2, 25, "U2")
    UINT4 = ("u4", 4, 21, "U4")
    UINT8 = ("u8", 8, 2, "U8")
    UINT16 = ("u16", 16, 4, "U16")
    UINT32 = ("u32", 32, 12, "U32")
    UINT64 = ("u64", 64, 13, "U64")
    FLOAT16 = ("f16", 16, 10, "F16")
    BFLOAT16 = ("bf16", 16, 16, "BF16")
    FLOAT32 = ("f32", 32, 1, "F32")
    FLOAT64 = ("f64", 64, 11, "F64")
    FLOAT8E4M3FN = ("f8e4m3fn", 8, 17, "F8E4M3FN")
    FLOAT8E4M3FNUZ = ("f8e4m3fnuz", 8, 18, "F8E4M3FNUZ")
    FLOAT8E5M2 = ("f8e5m2", 8, 19, "F8E5M2")
    FLOAT8E5M2FNUZ = ("f8e5m2fnuz", 8, 20, "F8E5M2FNUZ")
    FLOAT8E4M3 = ("f8e4m3", 8, None, "F8E4M3")
    FLOAT8E3M4 = ("f8e3m4", 8, None, "F8E3M4")
    FLOAT8E4M3B11FNUZ = ("f8e4m3b11fnuz", 8, None, "F8E4M3B11FNUZ")
    FLOAT8E8M0 = ("f8e8m0", 8, 24, "F8E8M0FNU")
    FLOAT6E2M3 = ("f6e2m3", 6, 27, None)
    FLOAT6E3M2 = ("f6e3m2", 6, 28, None)
    FLOAT4E2M1 = ("f4e2m1", 4, 23, "F4E2M1FN")
    COMPLEX64 = ("c64", 64, 14, "C64")
    COMPLEX128 = ("c128", 128, 15, "C128")
    STRING = ("string", 0, 8, None)
    # TensorFlow-only element types, kept so GraphDefs import without loss.
    RESOURCE = ("resource", 0, None, None)
    VARIANT = ("variant", 0, None, None)
    QINT8 = ("qi8", 8, None, None)
    QUINT8 = ("qu8", 8, None, None)
    QINT16 = ("qi16", 16, None, None)
    QUINT16 = ("qu16", 16, None, None)
    QINT32 = ("qi32", 32, None, None)

    @property
    def short_name(self) -> str:
        return self.value[0]

    @property
    def bitwidth(self) -> int:
        """Bits per element; 0 for types without a fixed width (string, resource, variant)."""
        return self.value[1]

    @property
    def onnx_code(self) -> int | None:
        return self.value[2]

    @property
    def xla_name(self) -> str | None:
        return self.value[3]

    @property
    def is_floating(self) -> bool:
        return self.short_name.startswith(("f", "bf"))

    @property
    def is_integer(self) -> bool:
        return self.short_name.startswith(("i", "u", "qi", "qu"))

    @property
    def is_complex(self) -> bool:
        return self.short_name.startswith("c")

    def nbytes(self, num_elements: int) -> int:
        """Storage bytes of `num_elements` packed elements (sub-byte types round up)."""
        return (num_elements * self.bitwidth + 7) // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds one element (object for strings)."""
        dtype = _numpy_dtypes().get(self)
        if dtype is None:
            raise TypeError(f"dtype {self.short_name} has no numpy equivalent")
        return dtype

    @classmethod
    def from_onnx(cls, code: int) -> DType:
        try:
            return _by_onnx()[code]
        except KeyError:
            raise ValueError(f"unknown ONNX element type code {code}") from None

    @classmethod
    def from_xla(cls, name: str) -> DType:
        try:
            return _by_xla()[name.upper()]
        except KeyError:
            raise ValueError(f"unknown XLA element type {name!r}") from None

    @classmethod
    def from_short_name(cls, name: str) -> DType:
        try:
            return _by_short()[name]
        except KeyError:
            raise ValueError(f"unknown element type {name!r}") from None

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        dtype = np.dtype(dtype)
        for member, candidate in _numpy_dtypes().items():
            if candidate == dtype and member not in _NUMPY_ALIASES:
                return member
        if dtype.kind in ("U", "S", "O"):
            return cls.STRING
        raise ValueError(f"numpy dtype {dtype} has no IR element type")

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    def __str__(self) -> str:
        return self.short_name


# Several IR types share a numpy container; the reverse lookup must not pick these.
_NUMPY_ALIASES = {DType.QINT8, DType.QUINT8, DType.QINT16, DType.QUINT16, DType.QINT32}


@cache
def _by_onnx() -> dict[int, DType]:
    return {d.onnx_code: d for d in DType if d.onnx_code is not None}


@cache
def _by_xla() -> dict[str, DType]:
    return {d.xla_name: d for d in DType if d.xla_name is not None}


@cache
def _by_short() -> dict[str, DType]:
    return {d.short_name: d for d in DType}


@cache
def _numpy_dtypes() -> dict[DType, np.dtype]:
    import ml_dtypes

    table: dict[DType, np.dtype] = {
        DType.BOOL: np.dtype(np.bool_),
        DType.INT8: np.dtype(np.int8),
        DType.INT16: np.dtype(np.int16),
        DType.INT32: np.dtype(np.int32),
        DType.INT64: np.dtype(np.int64),
        DType.UINT8: np.dtype(np.uint8),
        DType.UINT16: np.dtype(np.uint16),
        DType.UINT32: np.dtype(np.uint32),
        DType.UINT64: np.dtype(np.uint64),
        DType.FLOAT16: np.dtype(np.float16),
        DType.FLOAT32: np.dtype(np.float32),
        DType.FLOAT64: np.dtype(np.float64),
        DType.COMPLEX64: np.dtype(np.complex64),
        DType.COMPLEX128: np.dtype(np.complex128),
        DType.STRING: np.dtype(object),
        DType.QINT8: np.dtype(np.int8),
        DType.QUINT8: np.dtype(np.uint8),
        DType.QINT16: np.dtype(np.int16),
        DType.QUINT16: np.dtype(np.uint16),
        DType.QINT32: np.dtype(np.int32),
    }
    optional = {
        DType.BFLOAT16: "bfloat16",
        DType.INT2: "int2",
        DType.INT4: "int4",
        DType.UINT2: "uint2",
        DType.UINT4: "uint4",
        DType.FLOAT8E4M3FN: "float8_e4m3fn",
        DType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
        DType.FLOAT8E5M2: "float8_e5m2",
        DType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
        DType.FLOAT8E4M3: "float8_e4m3",
        DType.FLOAT8E3M4: "float8_e3m4",
        DType.FLOAT8E4M3B11FNUZ: "float8_e4m3b11fnuz",
        DType.FLOAT8E8M0: "float8_e8m0fnu",
        DType.FLOAT6E2M3: "float6_e2m3fn",
        DType.FLOAT6E3M2: "float6_e3m2fn",
        DType.FLOAT4E2M1: "float4_e2m1fn",
    }
    for member, attr in optional.items():
        if hasattr(ml_dtypes, attr):
            table[member] = np.dtype(getattr(ml_dtypes, attr))
    return table
