"""Node attributes: immutable (name, kind, value) records.

Lists become tuples so an attribute can be hashed and compared. A `GRAPH` attribute holds a
subgraph owned by the node; a `REF` attribute (inside a function body) refers to an attribute of
the calling node by name, as ONNX's `ref_attr_name` does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_ir.tensors import NumpyTensor, Tensor
from graph_ir.types import Type

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["Attr", "AttrKind"]


class AttrKind(enum.Enum):
    INT = "int"
    FLOAT = "float"
    STRING = "string"
    TENSOR = "tensor"
    SPARSE_TENSOR = "sparse_tensor"
    GRAPH = "graph"
    TYPE = "type"
    INTS = "ints"
    FLOATS = "floats"
    STRINGS = "strings"
    TENSORS = "tensors"
    SPARSE_TENSORS = "sparse_tensors"
    GRAPHS = "graphs"
    TYPES = "types"
    REF = "ref"
    # Source-specific values that have no ONNX kind (an HLO shape list, a TF func attr...).
    OPAQUE = "opaque"


_LIST_KINDS = {
    AttrKind.INTS,
    AttrKind.FLOATS,
    AttrKind.STRINGS,
    AttrKind.TENSORS,
    AttrKind.SPARSE_TENSORS,
    AttrKind.GRAPHS,
    AttrKind.TYPES,
}


@dataclass(frozen=True, slots=True)
class Attr:
    name: str
    kind: AttrKind
    value: Any
    doc_string: str = ""

    def __post_init__(self) -> None:
        if self.kind in _LIST_KINDS and not isinstance(self.value, tuple):
            object.__setattr__(self, "value", tuple(self.value))

    @property
    def is_ref(self) -> bool:
        return self.kind is AttrKind.REF

    def graphs(self) -> tuple[Graph, ...]:
        """The subgraphs this attribute holds (empty for non-graph kinds)."""
        if self.kind is AttrKind.GRAPH:
            return (self.value,)
        if self.kind is AttrKind.GRAPHS:
            return self.value
        return ()

    def structural_key(self) -> tuple:
        """A hashable key equal for equal attributes; tensors compare by content, graphs by identity."""
        value = self.value
        if self.kind is AttrKind.TENSOR:
            value = value.digest()
        elif self.kind is AttrKind.TENSORS:
            value = tuple(t.digest() for t in value)
        elif self.kind is AttrKind.FLOAT:
            value = float(value)
        elif self.kind in (AttrKind.GRAPH, AttrKind.GRAPHS, AttrKind.SPARSE_TENSOR, AttrKind.SPARSE_TENSORS):
            value = id(value)
        elif self.kind is AttrKind.OPAQUE:
            value = repr(value)
        return (self.name, self.kind, value)

    @staticmethod
    def infer(name: str, value: Any) -> Attr:
        """Build an attribute from a plain Python value, inferring its kind."""
        from graph_ir.graph import Graph

        if isinstance(value, Attr):
            return value
        if isinstance(value, bool):
            return Attr(name, AttrKind.INT, int(value))
        if isinstance(value, (int, np.integer)):
            return Attr(name, AttrKind.INT, int(value))
        if isinstance(value, (float, np.floating)):
            return Attr(name, AttrKind.FLOAT, float(value))
        if isinstance(value, (str, bytes)):
            return Attr(name, AttrKind.STRING, value)
        if isinstance(value, np.ndarray):
            return Attr(name, AttrKind.TENSOR, NumpyTensor(value))
        if isinstance(value, Tensor):
            return Attr(name, AttrKind.TENSOR, value)
        if isinstance(value, Graph):
            return Attr(name, AttrKind.GRAPH, value)
        if isinstance(value, (list, tuple)):
            items = list(value)
            if not items:
                raise ValueError(f"attribute {name!r}: cannot infer the kind of an empty list; build Attr explicitly")
            if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
                return Attr(name, AttrKind.INTS, tuple(int(v) for v in items))
            if all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
                return Attr(name, AttrKind.FLOATS, tuple(float(v) for v in items))
            if all(isinstance(v, (str, bytes)) for v in items):
                return Attr(name, AttrKind.STRINGS, tuple(items))
            if all(isinstance(v, Tensor) for v in items):
                return Attr(name, AttrKind.TENSORS, tuple(items))
            if all(isinstance(v, Graph) for v in items):
                return Attr(name, AttrKind.GRAPHS, tuple(items))
        if isinstance(value, Type.__args__):  # type: ignore[attr-defined]
            return Attr(name, AttrKind.TYPE, value)
        raise TypeError(f"attribute {name!r}: cannot infer a kind for {type(value).__name__}")

    def __str__(self) -> str:
        value = self.value
        if self.kind is AttrKind.TENSOR:
            return f"{self.name}=tensor<{value.type}>"
        if self.kind is AttrKind.GRAPH:
            return f"{self.name}=graph<{value.name}>"
        if self.kind is AttrKind.GRAPHS:
            return f"{self.name}=graphs<{', '.join(g.name for g in value)}>"
        if self.kind is AttrKind.REF:
            return f"{self.name}=@{value}"
        if self.kind in (AttrKind.INTS, AttrKind.FLOATS, AttrKind.STRINGS):
            return f"{self.name}=[{', '.join(repr(v) for v in value)}]"
        return f"{self.name}={value!r}"
