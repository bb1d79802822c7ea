"""Value types: tensors with (possibly symbolic) shapes, tuples, tokens, sequences, maps.

Types are immutable and hashable. A dim is an `int` (static), a `str` (a symbolic name such as
"batch", or an XLA bound such as "<=128") or `None` (unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Union

from graph_ir.dtypes import DType
from graph_ir.errors import InvalidShapeError

__all__ = [
    "Dim",
    "Shape",
    "TensorType",
    "SparseTensorType",
    "TupleType",
    "TokenType",
    "SequenceType",
    "OptionalType",
    "MapType",
    "OpaqueType",
    "Type",
    "MAX_ELEMENTS",
]

Dim = Union[int, str, None]

# Larger element counts cannot be addressed by any runtime we target (int64 byte offsets).
MAX_ELEMENTS = 2**62


class Shape(tuple):
    """An immutable tuple of dims, validated on creation (no negative dims, no overflow)."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[Dim] = ()) -> Shape:
        shape = super().__new__(cls, dims)
        numel = 1
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, (int, str, type(None))):
                raise InvalidShapeError(f"dim {dim!r} of shape {tuple(shape)} is not int, str or None")
            if isinstance(dim, int):
                if dim < 0:
                    raise InvalidShapeError(f"negative dim {dim} in shape {tuple(shape)}")
                numel *= dim
        if numel > MAX_ELEMENTS:
            raise InvalidShapeError(
                f"shape {tuple(shape)} has {numel} elements, more than the {MAX_ELEMENTS} any runtime can address"
            )
        return shape

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self)

    def numel(self) -> int | None:
        """Number of elements, or None when a dim is not static."""
        for dim in self:
            if dim.__class__ is not int:
                return None
        return math.prod(self)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return "[" + ",".join("?" if d is None else str(d) for d in self) + "]"


@dataclass(frozen=True, slots=True)
class TensorType:
    """A dense tensor. `shape is None` means the rank is unknown; `layout` is XLA's minor-to-major."""

    dtype: DType | None
    shape: Shape | None = None
    layout: tuple[int, ...] | None = None
    # Cached at creation: feature extraction and the simulator ask for sizes millions of times.
    _numel: int | None = field(default=None, init=False, repr=False, compare=False)
    _nbytes: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = self.shape
        if shape is not None and not isinstance(shape, Shape):
            shape = Shape(shape)
            object.__setattr__(self, "shape", shape)
        numel = None if shape is None else shape.numel()
        object.__setattr__(self, "_numel", numel)
        if numel is not None and self.dtype is not None:
            object.__setattr__(self, "_nbytes", self.dtype.nbytes(numel))

    def numel(self) -> int | None:
        return self._numel

    def nbytes(self) -> int | None:
        return self._nbytes

    def __str__(self) -> str:
        dtype = "?" if self.dtype is None else str(self.dtype)
        return f"{dtype}{self.shape!r}" if self.shape is not None else f"{dtype}[*]"


@dataclass(frozen=True, slots=True)
class SparseTensorType:
    dtype: DType | None
    shape: Shape | None = None

    def __post_init__(self) -> None:
        if self.shape is not None and not isinstance(self.shape, Shape):
            object.__setattr__(self, "shape", Shape(self.shape))

    def __str__(self) -> str:
        return f"sparse<{TensorType(self.dtype, self.shape)}>"


@dataclass(frozen=True, slots=True)
class TupleType:
    """An XLA tuple (or a TF list of tensors carried as one value)."""

    elements: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


@dataclass(frozen=True, slots=True)
class TokenType:
    """XLA's side-effect ordering token."""

    def __str__(self) -> str:
        return "token"


@dataclass(frozen=True, slots=True)
class SequenceType:
    element: Type | None

    def __str__(self) -> str:
        return f"seq<{self.element}>"


@dataclass(frozen=True, slots=True)
class OptionalType:
    element: Type | None

    def __str__(self) -> str:
        return f"optional<{self.element}>"


@dataclass(frozen=True, slots=True)
class MapType:
    key: DType
    value: Type | None

    def __str__(self) -> str:
        return f"map<{self.key}, {self.value}>"


@dataclass(frozen=True, slots=True)
class OpaqueType:
    """A type the IR carries without understanding it (XLA opaque, a TF handle)."""

    name: str

    def __str__(self) -> str:
        return f"opaque<{self.name}>"


Type = Union[TensorType, SparseTensorType, TupleType, TokenType, SequenceType, OptionalType, MapType, OpaqueType]
