"""`compiler-opt convert`: import, run a pass pipeline on a target, verify, export atomically.

File work (format choice, module selection, StableHLO lowering, the atomic save with side files)
is `graph_ir.io`'s; this module handles the command's arguments and its summary line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from cost_model.costs import Target
    from graph_ir import Graph
    from passes import Pass

__all__ = ["ConvertResult", "convert_model", "run_passes"]

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
    target: str = ""

    def summary_line(self) -> str:
        passes = f" with passes {self.pipeline}" if self.pipeline else ""
        if self.pipeline and self.target:
            passes += f" on {self.target}"
        changed = "modified" if self.modified else "unchanged"
        return (
            f"converted {self.input_path} ({self.input_format}, {self.nodes_before} nodes) -> "
            f"{self.output_path} ({self.output_format}, {self.nodes_after} nodes){passes}: "
            f"{changed}, {self.seconds:.2f} s"
        )


def run_passes(graph: Graph, pipeline: str | Sequence[Pass], target: Target | None = None) -> tuple[Graph, bool]:
    """Run a pipeline (a string or parsed passes) on `target`; returns (graph, modified)."""
    import passes

    result = passes.run_pipeline(graph, pipeline, target=target)
    return result.graph, bool(result.modified)


def convert_model(
    input_path: str,
    output_path: str,
    pipeline: str = "",
    *,
    module: int | None = None,
    devices: str | None = None,
    costs: str | None = None,
) -> ConvertResult:
    """The whole `convert` command; raises CompilerOptError/OSError for anything the user can fix.

    `devices` and `costs` form the pipeline's target (`cost_model.costs.Target`); passes whose own
    options contradict it, or each other, stop the command before the model is read."""
    from cost_model.costs import Target
    from graph_ir import io as graph_io
    from graph_ir.errors import CompilerOptError

    start = time.perf_counter()
    # Reject a bad output format, target or pipeline before the (possibly slow) import.
    output_format = graph_io.detect_format(output_path).name
    try:
        target = Target.resolve(devices=devices, costs=costs)
    except CompilerOptError as err:
        raise err.with_context(file=f"--costs {costs}" if err.field == "costs" else f"--devices {devices}") from None
    parsed: list[Pass] = []
    if pipeline.strip():
        import passes

        try:
            parsed = passes.parse_pipeline(pipeline)
            target = passes.resolve_pipeline_target(parsed, target)
        except CompilerOptError as err:
            raise err.with_context(file=f"--passes {pipeline.strip()}") from None
    graph, input_format = graph_io.load_with_format(input_path, module, target_format=output_format)
    nodes_before = sum(1 for _ in graph.all_nodes())
    modified = False
    try:
        if parsed:
            graph, modified = run_passes(graph, parsed, target)
            logger.info("pipeline %r: %s", pipeline, "modified" if modified else "no change")
        graph.verify()
    except CompilerOptError as err:
        raise err.with_context(file=input_path)
    graph_io.save(graph, output_path)
    return ConvertResult(
        input_path=input_path,
        output_path=output_path,
        input_format=input_format,
        output_format=output_format,
        nodes_before=nodes_before,
        nodes_after=sum(1 for _ in graph.all_nodes()),
        pipeline=pipeline.strip(),
        modified=modified,
        target=target.describe() if any(p.takes_context for p in parsed) else "",
        seconds=time.perf_counter() - start,
    )
