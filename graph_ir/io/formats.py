"""The registry of file formats (extension -> lazy importer/exporter), and `load`/`save` over it.

`load(path, module=..., target_format=...)` checks the path, picks the importer by extension,
selects one module of a multi-module HLO file, lowers StableHLO through XLA when the graph is
bound for HLO/StableHLO output, and names the file in every error. `save(graph, path)` exports
into a staging folder beside the target and renames the result (side files such as ONNX external
data first, the model last), so a failed export leaves the target untouched.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graph_ir.errors import UnknownFormatError

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["FormatHandler", "register_format", "detect_format", "check_readable", "check_writable_path", "load", "load_with_format", "save", "split_module_spec", "FORMATS"]


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


def check_readable(path: str | os.PathLike[str]) -> None:
    """Fail early with the OS's own error for a missing path or a folder given as a model."""
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no such file", os.fspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a folder, not a model file", os.fspath(path))


def load_with_format(
    path: str | os.PathLike[str], module: int | None = None, *, target_format: str | None = None, **options: Any
) -> tuple[Graph, str]:
    """Import `path` with the importer its extension selects; returns (graph, format name).

    `module` picks one module of a file that holds several (HLO text separated by `// -----`).
    `target_format` is the format the graph will be written in: a StableHLO file bound for HLO
    is lowered to HLO by XLA on the way in (the one cross-format path that maps ops); StableHLO bound
    for StableHLO is printed directly (dynamic and quantized modules have no HLO form).
    """
    from graph_ir.errors import CompilerOptError

    path = os.fspath(path)
    handler = detect_format(path)
    check_readable(path)
    if module is not None:
        if handler.name != "hlo":
            raise UnknownFormatError(f"--module applies to HLO text files, not {handler.name}", file=path)
        options["module"] = module
    try:
        if handler.name == "stablehlo" and target_format == "hlo":  # .mlir -> .mlir is printed directly
            from graph_ir.io.stablehlo_import import load_stablehlo_as_hlo

            return load_stablehlo_as_hlo(path), handler.name
        return handler.load(path, **options), handler.name
    except CompilerOptError as err:
        raise err.with_context(file=path)


def load(path: str | os.PathLike[str], module: int | None = None, *, target_format: str | None = None, **options: Any) -> Graph:
    """Import a model file (see `load_with_format`)."""
    return load_with_format(path, module, target_format=target_format, **options)[0]


def check_writable_path(path: str | os.PathLike[str]) -> FormatHandler:
    """What `save` checks before writing: a known extension, not a folder, an existing parent
    folder. Commands call it before long work, so a typo in `-o` fails in a second, not after it."""
    from pathlib import Path

    handler = detect_format(path)
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, "output is a folder, not a file", os.fspath(path))
    if not target.parent.is_dir():
        raise FileNotFoundError(2, "output folder does not exist", str(target.parent))
    return handler


def save(graph: Graph, path: str | os.PathLike[str], **options: Any) -> None:
    """Export `graph` to `path` atomically, side files included (module docstring)."""
    from pathlib import Path

    from graph_ir.errors import CompilerOptError, ExportError
    from graph_ir.io.atomic import move_staged, staging_dir

    handler = check_writable_path(path)  # fail before doing any work
    target = Path(path)
    with staging_dir(target) as staging:
        staged = staging / target.name
        try:
            handler.save(graph, str(staged), **options)
        except CompilerOptError as err:
            # The staging path means nothing to the user; name the requested output instead.
            if err.file is not None and os.fspath(err.file) == str(staged):
                err.file = None
            raise err.with_context(file=os.fspath(path))
        if not staged.is_file():
            raise ExportError(f"the {handler.name} exporter wrote no file", file=os.fspath(path))
        move_staged(staging, staged, target)


def split_module_spec(item: str) -> tuple[str, int | None]:
    """`FILE#N` (FILE exists, N a module index) -> (FILE, N); anything else -> (item, None). A file
    whose own name ends in `#N` stays itself."""
    head, sep, tail = item.rpartition("#")
    if sep and tail.isascii() and tail.isdigit() and not os.path.exists(item) and os.path.isfile(head):
        return head, int(tail)
    return item, None
