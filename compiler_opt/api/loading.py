"""What `optimize()` accepts as a model, turned into an IR graph: a path (any format
`graph_ir.load` reads), an ONNX ModelProto, a TF GraphDef, HLO text, or an IR `Graph`."""

from __future__ import annotations

import logging
import os
from typing import Any

from graph_ir.errors import CompilerOptError
from graph_ir.graph import Graph

__all__ = ["ModelFormatError", "apply_input_shapes", "model_to_graph", "parse_input_shape"]

logger = logging.getLogger(__name__)


class ModelFormatError(CompilerOptError):
    """The object given as a model is none of the accepted kinds, or an input shape is bad."""


def model_to_graph(model: Any, module: int | None = None) -> tuple[Graph, str]:
    """(a graph the caller may change, its format: onnx | tf_graphdef | hlo | stablehlo | ir).
    `module` picks one module of an HLO file that holds several (0-based); only for paths."""
    if module is not None and not (isinstance(model, (str, os.PathLike)) and not _is_hlo_text(model)):
        raise ModelFormatError("module= picks a module of an HLO or StableHLO file: give the file's path", field="module")
    if isinstance(model, Graph):
        return model.clone(), _graph_format(model)
    if isinstance(model, (str, os.PathLike)):
        text = os.fspath(model)
        if _is_hlo_text(model):
            from graph_ir.io.hlo_import import import_hlo_text

            return import_hlo_text(text), "hlo"
        import graph_ir
        from graph_ir.io.formats import detect_format

        graph = graph_ir.load(text, module)
        return graph, detect_format(text).name
    type_name = type(model).__name__
    if type_name == "ModelProto":
        from graph_ir.io.onnx_import import import_onnx

        return import_onnx(model), "onnx"
    if type_name == "GraphDef":
        from graph_ir.io.tf_import import import_graphdef

        return import_graphdef(model), "tf_graphdef"
    raise ModelFormatError(
        f"model must be a path, an ONNX ModelProto, a TF GraphDef, HLO text or a graph_ir.Graph, got {type_name}",
        field="model",
    )


def _is_hlo_text(model: Any) -> bool:
    return isinstance(model, str) and "HloModule" in model[:2000] and "\n" in model


def _graph_format(graph: Graph) -> str:
    domains = {node.domain for node in graph.all_nodes()}
    if domains & {"hlo"}:
        return "hlo"
    if domains & {"tf"}:
        return "tf_graphdef"
    return "onnx"


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`NAME:D1,D2,...` (or `NAME:D1xD2`) -> (name, dims)."""
    name, sep, dims = text.rpartition(":")
    parts = dims.replace("x", ",").split(",") if dims else []
    if not sep or not name or not parts or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise ModelFormatError(f"--input-shape must look like NAME:1,3,224,224, got {text!r}", field="--input-shape")
    return name, tuple(int(p.strip()) for p in parts)


def apply_input_shapes(graph: Graph, shapes: dict[str, tuple[int, ...]]) -> None:
    """Give graph inputs static shapes (their element types stay); unknown names are errors."""
    from graph_ir.types import TensorType

    by_name = {v.name: v for v in graph.inputs}
    for name, dims in shapes.items():
        value = by_name.get(name)
        if value is None:
            raise ModelFormatError(f"no graph input named {name!r} (inputs: {', '.join(by_name)})", field="--input-shape")
        if not isinstance(value.type, TensorType):
            raise ModelFormatError(f"input {name!r} is not a tensor", field="--input-shape")
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in dims):
            raise ModelFormatError(f"input {name!r}: every dimension must be an integer >= 0, got {tuple(dims)}", field="--input-shape")
        if value.shape is not None and len(value.shape) != len(dims):
            raise ModelFormatError(f"input {name!r} has rank {len(value.shape)}, the shape given has {len(dims)}", field="--input-shape")
        value.type = TensorType(value.type.dtype, dims)
