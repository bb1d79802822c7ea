"""Constant tensors, referenced rather than copied.

A `Tensor` knows its dtype and shape without touching its data; `numpy()` materialises the data
only when asked. Importers subclass it to keep the source's own storage (an ONNX TensorProto, a
memory-mapped external file, an HLO literal) so a 1 GB model costs about 1 GB in memory.
"""

from __future__ import annotations

import abc
import hashlib
from typing import Callable

import numpy as np

from graph_ir.dtypes import DType
from graph_ir.types import Shape, TensorType

__all__ = ["Tensor", "NumpyTensor", "LazyTensor"]


class Tensor(abc.ABC):
    """An immutable constant. Subclasses implement `numpy()`."""

    __slots__ = ("dtype", "shape", "_digest")

    def __init__(self, dtype: DType, shape: Shape | tuple[int, ...]) -> None:
        self.dtype = dtype
        self.shape = shape if isinstance(shape, Shape) else Shape(shape)
        self._digest: str | None = None

    @abc.abstractmethod
    def numpy(self) -> np.ndarray:
        """The data as a numpy array (may be a read-only view of the source's storage)."""

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, self.shape)

    @property
    def size(self) -> int:
        return self.shape.numel() or 0

    @property
    def nbytes(self) -> int:
        """Storage bytes, computed from dtype and shape without loading the data."""
        return self.dtype.nbytes(self.size)

    def digest(self) -> str:
        """A content hash, for structural equality and common-subexpression elimination."""
        if self._digest is None:
            array = self.numpy()
            hasher = hashlib.blake2b(digest_size=16)
            hasher.update(f"{self.dtype.short_name}{tuple(self.shape)}".encode())
            if array.dtype == object:
                for item in array.ravel():
                    hasher.update(item if isinstance(item, bytes) else str(item).encode())
                    hasher.update(b"\0")
            else:
                hasher.update(np.ascontiguousarray(array).view(np.uint8).data)
            self._digest = hasher.hexdigest()
        return self._digest

    def __repr__(self) -> str:
        return f"{type(self).__name__}({TensorType(self.dtype, self.shape)})"


class NumpyTensor(Tensor):
    """A tensor backed by a numpy array, held by reference."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray, dtype: DType | None = None) -> None:
        array = np.asarray(array)
        super().__init__(dtype or DType.from_numpy(array.dtype), array.shape)
        self._array = array

    def numpy(self) -> np.ndarray:
        return self._array


class LazyTensor(Tensor):
    """A tensor whose data comes from a loader called on each access (e.g. an mmap of a file)."""

    __slots__ = ("_load",)

    def __init__(self, dtype: DType, shape: Shape | tuple[int, ...], load: Callable[[], np.ndarray]) -> None:
        super().__init__(dtype, shape)
        self._load = load

    def numpy(self) -> np.ndarray:
        return self._load()
