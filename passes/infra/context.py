"""What the `PassManager` hands every pass besides the graph: the target, resolved once.

As xDSL hands each pass a context, our passes receive a `PassContext` whose `target`
(`cost_model.costs.Target`: devices, kernel cost source, objective) the driver chose. A pass may
still carry a per-pass override (`m-etf{devices=8xA100}`); `resolve_pipeline_target` folds the
overrides of a whole pipeline into the target before any pass runs, and two that disagree (or one
that contradicts what the driver gave) are an error naming both, so
`m-etf{devices=8xA100},schedule` schedules on 8xA100, and
`m-etf{devices=8xA100},schedule{devices=4xV100}` stops before doing anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from cost_model.costs import TARGET_FIELDS, Target, same_devices
from passes.infra.base import PassError

if TYPE_CHECKING:
    from passes.infra.base import Pass

__all__ = ["PassContext", "TargetConflictError", "pass_target_overrides", "resolve_pipeline_target"]


class TargetConflictError(PassError):
    """A pass option contradicts the target, or two passes of one pipeline disagree on it."""


@dataclass(frozen=True)
class PassContext:
    """Shared, read-only state of one pipeline run."""

    target: Target = field(default_factory=Target)


def pass_target_overrides(pass_: Pass) -> dict[str, Any]:
    """The target fields a pass sets through its own options (`devices`, `costs`, `objective`
    fields left at "" mean "use the target")."""
    if not dataclasses.is_dataclass(pass_):
        return {}
    out = {}
    for f in dataclasses.fields(pass_):
        if f.name in TARGET_FIELDS:
            value = getattr(pass_, f.name)
            if value not in ("", None):
                out[f.name] = value
    return out


def _same(name: str, a: Any, b: Any) -> bool:
    if name == "devices":
        return same_devices(a, b)
    return a == b


def _label(value: Any) -> str:
    return value if isinstance(value, str) else getattr(value, "name", repr(value))


def resolve_pipeline_target(passes: Iterable[Pass], target: Target | None = None) -> Target:
    """The target every pass of the pipeline runs with (module docstring).

    Fields the target was given win; a pass option for a field nobody gave sets it for the whole
    pipeline; any disagreement raises `TargetConflictError` naming both sides."""
    target = target if target is not None else Target()
    chosen: dict[str, tuple[Any, str]] = {name: (getattr(target, name), "the target") for name in target.given}
    for pass_ in passes:
        for name, value in pass_target_overrides(pass_).items():
            if name in chosen:
                held, source = chosen[name]
                if not _same(name, held, value):
                    raise TargetConflictError(
                        f"pass '{pass_.name}' option {name}={_label(value)} contradicts {source} "
                        f"({name}={_label(held)}); give the {name} once, for the whole pipeline",
                        pass_name=pass_.name,
                        field=name,
                    )
            else:
                chosen[name] = (value, f"pass '{pass_.name}'")
    changes = {name: value for name, (value, _) in chosen.items() if name not in target.given}
    return target.replace(**changes) if changes else target
