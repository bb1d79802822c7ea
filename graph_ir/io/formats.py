"""The registry of file formats: extension -> lazy importer/exporter."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graph_ir.errors import UnknownFormatError

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["FormatHandler", "register_format", "detect_format", "load", "save", "FORMATS"]


@dataclass(frozen=True)
class FormatHandler:
    """Where a format's importer/exporter live, as 'module:function' strings (imported lazily,
    so that TensorFlow or JAX load only when a file of their format is touched)."""

    name: str
    extensions: tuple[str, ...]
    importer: str | None
    exporter: str | None

    def _resolve(self, spec: str) -> Any:
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)

    def load(self, path: str, **options: Any) -> Graph:
        if self.importer is None:
            raise UnknownFormatError(f"format {self.name} can be written but not read", file=path)
        return self._resolve(self.importer)(path, **options)

    def save(self, graph: Graph, path: str, **options: Any) -> None:
        if self.exporter is None:
            raise UnknownFormatError(f"format {self.name} can be read but not written", file=path)
        self._resolve(self.exporter)(graph, path, **options)


FORMATS: dict[str, FormatHandler] = {}


def register_format(handler: FormatHandler) -> None:
    FORMATS[handler.name] = handler


register_format(FormatHandler("onnx", (".onnx",), "graph_ir.io.onnx_import:load_onnx", "graph_ir.io.onnx_export:save_onnx"))
register_format(
    FormatHandler(
        "stablehlo", (".mlir", ".mlirbc"), "graph_ir.io.stablehlo_import:load_stablehlo", "graph_ir.io.stablehlo_export:save_stablehlo"
    )
)
register_format(FormatHandler("hlo", (".hlo", ".hlo.txt"), "graph_ir.io.hlo_import:load_hlo", "graph_ir.io.hlo_export:save_hlo"))
register_format(FormatHandler("tf_graphdef", (".pb", ".pbtxt"), "graph_ir.io.tf_import:load_tf", "graph_ir.io.tf_export:save_graphdef"))


def detect_format(path: str | os.PathLike[str]) -> FormatHandler:
    name = os.fspath(path).lower()
    best: tuple[int, FormatHandler] | None = None
    for handler in FORMATS.values():
        for ext in handler.extensions:
            if name.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), handler)
    if best is None:
        known = ", ".join(sorted(ext for h in FORMATS.values() for ext in h.extensions))
        raise UnknownFormatError(f"unknown model format (known extensions: {known})", file=os.fspath(path))
    return best[1]


def load(path: str | os.PathLike[str], **options: Any) -> Graph:
    return detect_format(path).load(os.fspath(path), **options)


def save(graph: Graph, path: str | os.PathLike[str], **options: Any) -> None:
    detect_format(path).save(graph, os.fspath(path), **options)
