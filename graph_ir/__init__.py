"""The common IR: graphs from ONNX, TensorFlow, XLA HLO, StableHLO and PyTorch in one form.

Importers and exporters live in `graph_ir.io`; `graph_ir.load(path)` and `graph_ir.save(graph,
path)` pick the format from the file extension.
"""

from __future__ import annotations

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Use, Value
from graph_ir.dtypes import DType
from graph_ir.errors import *  # noqa: F403 - the error classes are part of the public API
from graph_ir.errors import __all__ as _error_names
from graph_ir.graph import Function, FunctionId, Graph, ModelInfo
from graph_ir.op_kinds import OpKind
from graph_ir.order import node_order
from graph_ir.printer import assert_structurally_equal, format_graph, structural_equal
from graph_ir.tensors import LazyTensor, NumpyTensor, Tensor
from graph_ir.types import (
    MapType,
    OpaqueType,
    OptionalType,
    SequenceType,
    Shape,
    SparseTensorType,
    TensorType,
    TokenType,
    TupleType,
    Type,
)


def load(path: str, module: int | None = None, *, target_format: str | None = None, **options: object) -> Graph:
    """Import a model file; the format comes from its extension. `module` picks one module of a
    multi-module HLO file; `target_format` lowers StableHLO bound for HLO (see graph_ir.io.formats)."""
    from graph_ir.io import load as _load

    return _load(path, module, target_format=target_format, **options)


def save(graph: Graph, path: str, **options: object) -> None:
    """Export a graph to a file, atomically; the format comes from the extension."""
    from graph_ir.io import save as _save

    _save(graph, path, **options)


__all__ = [
    "Attr",
    "AttrKind",
    "DType",
    "Function",
    "FunctionId",
    "Graph",
    "LazyTensor",
    "MapType",
    "ModelInfo",
    "Node",
    "NumpyTensor",
    "OpKind",
    "OpaqueType",
    "OptionalType",
    "SequenceType",
    "Shape",
    "SparseTensorType",
    "Tensor",
    "TensorType",
    "TokenType",
    "TupleType",
    "Type",
    "Use",
    "Value",
    "assert_structurally_equal",
    "format_graph",
    "load",
    "node_order",
    "save",
    "structural_equal",
    *_error_names,
]
