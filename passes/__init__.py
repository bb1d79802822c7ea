"""Graph passes: the pass infrastructure and the passes built on it.

    from passes import run_pipeline
    result = run_pipeline(graph, "shape-infer,constant-folding{size-limit=4096},cse,dce", fixpoint=True)

Importing this package registers the basic passes (dce, cse, constant-folding, shape-infer,
topo-sort), the placement methods (`passes.placement.METHODS`), fusion (`fuse`,
`fuse-by-priority`) and scheduling (`schedule`); third-party passes come in through the
`compiler_opt.passes` entry-point group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import passes.basic  # noqa: F401 - registers the basic passes
import passes.fusion  # noqa: F401 - registers fuse, fuse-by-priority
import passes.placement  # noqa: F401 - registers the placement methods
import passes.onnx  # noqa: F401 - registers the ONNX clean-up rewrites (eliminate-noops, fold-conv-bn, ...)
import passes.scheduling  # noqa: F401 - registers schedule
from passes.infra import (
    Pass,
    PassContext,
    PassError,
    PassManager,
    PassResult,
    PipelineSyntaxError,
    available_passes,
    format_pipeline,
    get_pass_class,
    option,
    parse_pipeline,
    register_pass,
    resolve_pipeline_target,
)

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = [
    "Pass",
    "PassContext",
    "PassError",
    "PassManager",
    "PassResult",
    "PipelineSyntaxError",
    "available_passes",
    "format_pipeline",
    "get_pass_class",
    "option",
    "parse_pipeline",
    "register_pass",
    "resolve_pipeline_target",
    "run_pipeline",
]


def run_pipeline(graph: Graph, pipeline: str | Sequence[Pass], **manager_kwargs: Any) -> PassResult:
    """Run a pipeline (a string or pass instances) over `graph`; keyword arguments go to
    PassManager (`target=Target.resolve(devices="8xA100")` among them)."""
    return PassManager(pipeline, **manager_kwargs).run(graph)
