"""Placement methods on profiled workloads: one call per (workload, method, objective).

    from passes.placement.profiled import place_profiled
    outcome = place_profiled("throughput-inputs/LayerGraphs/gnmt_training.json", "dp-ls",
                             objective="throughput", budget=2000)
    outcome.value, outcome.assignment      # max-load, device per file row (0 CPU, 1..k)

Every method of `METHODS` runs on a `ProfiledPlacementContext` (see profiled_context.py); the
extra method `expert` scores a human-expert split file (`expert=PATH`). The outcome's value is the
context's objective recomputed outside the search budget, and its `violations` are empty for a
valid placement (the methods' placements pass through `ctx.repair`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_model.profiled import ProfiledWorkload, device_loads, load_expert_split, load_profiled_workload
from passes.infra.base import option
from passes.placement.base import PlacementPass
from passes.placement.context_base import PlacementContextBase, PlacementError
from passes.placement.profiled_context import ProfiledPlacementContext

__all__ = ["ExpertSplitPlacement", "ProfiledOutcome", "place_profiled", "profiled_methods"]


@dataclass(frozen=True)
class ExpertSplitPlacement(PlacementPass):
    """A human-expert split read from a file (profiled workloads only)."""

    name = "expert"
    split: str = option("", "the expert split's JSON file (fpgas[i].nodes, cpus[0].nodes)")

    def assign(self, ctx: PlacementContextBase) -> np.ndarray:
        if not isinstance(ctx, ProfiledPlacementContext) or not self.split:
            raise PlacementError("method 'expert' needs a profiled workload and an expert split file", field="expert")
        return ctx.from_rows(load_expert_split(self.split).assignment(ctx.workload))


def profiled_methods(expert: bool = False) -> list[str]:
    """Method names that run on profiled workloads (`expert` only when a split is given)."""
    from passes.placement import METHODS

    return list(METHODS) + (["expert"] if expert else [])


@dataclass
class ProfiledOutcome:
    method: str
    objective: str
    assignment: np.ndarray  # device per workload row (0 the CPU, 1..k accelerators)
    value: float
    lower_bound: float
    evaluations: int
    seconds: float
    peak_memory_fraction: float  # the fullest accelerator's size sum over its capacity
    violations: list[str] = field(default_factory=list)
    context: ProfiledPlacementContext | None = None

    @property
    def oom(self) -> bool:
        return self.peak_memory_fraction > 1.0 + 1e-12

    def loads(self) -> np.ndarray:
        assert self.context is not None
        return device_loads(self.context.workload, self.assignment)


def place_profiled(
    workload: ProfiledWorkload | str | os.PathLike[str],
    method: str,
    objective: str = "throughput",
    *,
    expert: str | None = None,
    include_cpu: bool = False,
    **options: Any,
) -> ProfiledOutcome:
    """Run `method` on a profiled workload (a loaded one or a file path); options are the pass's
    fields (`budget=2000`, `seed=1`, `time_limit_s=10`)."""
    from passes.placement import METHODS

    if not isinstance(workload, ProfiledWorkload):
        workload = load_profiled_workload(workload)
    if method == "expert":
        if expert is None:
            raise PlacementError("method 'expert' needs an expert split file (expert=...)", field="expert")
        instance: PlacementPass = ExpertSplitPlacement(objective=objective, split=os.fspath(expert), **options)
    else:
        cls = METHODS.get(method)
        if cls is None:
            raise PlacementError(f"unknown placement method {method!r}; known: {', '.join(profiled_methods(True))}")
        instance = cls(objective=objective, include_cpu=include_cpu, **options)
    began = time.perf_counter()
    ctx = ProfiledPlacementContext(workload, objective=objective, budget=instance.search_budget, include_cpu=include_cpu)
    outcome = instance.run(ctx, began=began)
    device = outcome.device
    value = ctx._objective(device)[0]  # outside the budget: the result, not a search step
    used = ctx.memory_used(device)[1:] / ctx.capacity[1:]
    return ProfiledOutcome(
        method=method,
        objective=objective,
        assignment=ctx.to_rows(device),
        value=float(value),
        lower_bound=ctx.lower_bound(),
        evaluations=outcome.evaluations,
        seconds=outcome.seconds,
        peak_memory_fraction=float(used.max(initial=0.0)),
        violations=ctx.violations(device),
        context=ctx,
    )
