"""`compiler-opt convert`: import, run a pass pipeline, verify, export atomically."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from compiler_opt.cli.inspect_lib import load_model

if TYPE_CHECKING:
    from graph_ir import Graph
    from passes import Pass

__all__ = ["ConvertResult", "convert_model", "run_passes", "save_atomically"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConvertResult:
    input_path: str
    output_path: str
    input_format: str
    output_format: str
    nodes_before: int
    nodes_after: int
    pipeline: str
    modified: bool
    seconds: float

    def summary_line(self) -> str:
        passes = f" with passes {self.pipeline}" if self.pipeline else ""
        changed = "modified" if self.modified else "unchanged"
        return (
            f"converted {self.input_path} ({self.input_format}, {self.nodes_before} nodes) -> "
            f"{self.output_path} ({self.output_format}, {self.nodes_after} nodes){passes}: "
            f"{changed}, {self.seconds:.2f} s"
        )


def run_passes(graph: Graph, pipeline: str | Sequence[Pass]) -> tuple[Graph, bool]:
    """Run a pipeline (a string or parsed passes) through the pass registry; returns (graph, modified)."""
    import passes

    result = passes.run_pipeline(graph, pipeline)
    return result.graph, bool(result.modified)


@contextlib.contextmanager
def _staging_dir(target: Path) -> Iterator[Path]:
    """A fresh folder beside `target` (same filesystem, so renames out of it are atomic)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def save_atomically(graph: Graph, path: str) -> None:
    """Export through graph_ir.io into a staging folder, then rename the result into place.

    The exporter writes under the real file name (so the extension still selects the format),
    side files such as ONNX external data are moved in first and the model file last, so a
    reader never sees a half-written model and a failed export leaves the target untouched.
    """
    from graph_ir.errors import CompilerOptError
    from graph_ir.io.formats import detect_format

    handler = detect_format(path)  # fail on an unknown extension before doing any work
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, "output is a folder, not a file", path)
    if not target.parent.is_dir():
        raise FileNotFoundError(2, "output folder does not exist", str(target.parent))
    with _staging_dir(target) as staging:
        staged = staging / target.name
        try:
            handler.save(graph, str(staged))
        except CompilerOptError as err:
            # The staging path means nothing to the user; name the requested output instead.
            if err.file is not None and os.fspath(err.file) == str(staged):
                err.file = None
            raise err.with_context(file=path)
        if not staged.is_file():
            from graph_ir.errors import ExportError

            raise ExportError(f"the {handler.name} exporter wrote no file", file=path)
        side_files = sorted(p for p in staging.rglob("*") if p.is_file() and p != staged)
        for side in side_files:
            destination = target.parent / side.relative_to(staging)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(side, destination)
        os.replace(staged, target)


def convert_model(input_path: str, output_path: str, pipeline: str = "", *, module: int | None = None) -> ConvertResult:
    """The whole `convert` command; raises CompilerOptError/OSError for anything the user can fix."""
    from graph_ir.errors import CompilerOptError
    from graph_ir.io.formats import detect_format

    start = time.perf_counter()
    # Reject a bad target or pipeline before the (possibly slow) import.
    output_format = detect_format(output_path).name
    parsed: list[Pass] = []
    if pipeline.strip():
        import passes

        try:
            parsed = passes.parse_pipeline(pipeline)
        except CompilerOptError as err:
            raise err.with_context(file="--passes")  # the pipeline is at fault, not the input file
    graph, input_format = load_model(input_path, module, target_format=output_format)
    nodes_before = sum(1 for _ in graph.all_nodes())
    modified = False
    try:
        if parsed:
            graph, modified = run_passes(graph, parsed)
            logger.info("pipeline %r: %s", pipeline, "modified" if modified else "no change")
        graph.verify()
    except CompilerOptError as err:
        raise err.with_context(file=input_path)
    save_atomically(graph, output_path)
    return ConvertResult(
        input_path=input_path,
        output_path=output_path,
        input_format=input_format,
        output_format=output_format,
        nodes_before=nodes_before,
        nodes_after=sum(1 for _ in graph.all_nodes()),
        pipeline=pipeline.strip(),
        modified=modified,
        seconds=time.perf_counter() - start,
    )
