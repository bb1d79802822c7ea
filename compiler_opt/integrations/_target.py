"""The target an integration optimizes for, and the pipeline it runs by default.

Integrations accept a `target` string (or a `cost_model.costs.Target`): "host", "cpu" and
"1xCPU" mean the process's CPU (the `cpu` device preset: one device); anything else is a device
spec (`4xV100`, `2xhost`, a YAML file). It is resolved once into a `Target` and handed to the
`PassManager`, which gives it to every pass (issue 8); a pass option in the pipeline string that
contradicts it is a `TargetConflictError`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cost_model.costs import Target
from passes.infra.base import Pass, PassError
from passes.infra.context import resolve_pipeline_target
from passes.infra.pipeline import parse_pipeline

if TYPE_CHECKING:
    from graph_ir.graph import Graph
    from passes.infra.base import PassResult

__all__ = ["DEFAULT_TARGET", "build_pipeline", "default_pipeline", "resolve_target", "run_passes"]

logger = logging.getLogger(__name__)

DEFAULT_TARGET = "host"
_HOST_ALIASES = {"host": "cpu", "1xcpu": "cpu", "cpu": "cpu"}


def resolve_target(target: str | Target | None) -> Target:
    """`target` as a Target ("host"/"cpu"/"1xCPU" -> the `cpu` preset); a bad device spec fails
    here, with the loader's message."""
    if isinstance(target, Target):
        return target
    text = (target or DEFAULT_TARGET).strip()
    return Target.resolve(devices=_HOST_ALIASES.get(text.lower(), text))


def default_pipeline(*, fuse: bool = True, schedule: str = "critical-path") -> str:
    """Placement over the target's devices, then fusion, then scheduling priorities (nodes
    reordered into the schedule)."""
    steps = ["m-etf"]
    if fuse:
        steps.append("fuse")
    if schedule:
        steps.append(f"schedule{{strategy={schedule},reorder=true}}")
    return ",".join(steps)


def build_pipeline(pipeline: str | None, target: Target) -> list[Pass]:
    """Pass instances for `pipeline` (None: `default_pipeline()`), checked against `target`
    (a pass option that contradicts it raises `TargetConflictError` now, not at compile time)."""
    text = pipeline if pipeline is not None else default_pipeline()
    passes = parse_pipeline(text)
    if not passes:
        raise PassError(f"the pipeline {text!r} names no pass")
    resolve_pipeline_target(passes, target)
    return passes


def run_passes(graph: Graph, passes: list[Any], target: Target) -> PassResult:
    """Run `passes` over `graph` on `target` through the PassManager."""
    from passes.infra.manager import PassManager

    return PassManager(passes, target=target).run(graph)
