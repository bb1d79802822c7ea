"""The placement pass base class: options every method shares, and the apply step.

A method subclasses `PlacementPass`, sets `name` and implements `assign(ctx) -> device array`
(device indices, aligned with the context's nodes). `run(ctx)` runs it on any
`PlacementContextBase` (a graph's `PlacementContext` or a `ProfiledPlacementContext`), repairs
what the method left invalid (`ctx.repair`: colour classes, forbidden devices, memory) and
returns a `PlacementOutcome`. `decide(graph, target)` builds the graph's context on the target
(devices, kernel cost source, objective: `cost_model.costs.Target`) and runs it without touching
the graph; `call(graph, context)` (the pass) does the same on the pipeline's target and writes
the device names onto `node.device`. The `devices` and `objective` options are per-pass
overrides of the target (empty: use the target); one that contradicts it is an error. Fusion
groups and priorities already on the graph are kept and used when the method evaluates
placements in the simulator.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cost_model.costs import Target
from cost_model.decisions import Decisions
from graph_ir._gc import gc_frozen
from passes.infra.base import Pass, PassResult, option
from passes.infra.context import PassContext, resolve_pipeline_target
from passes.placement.context import OBJECTIVES, PlacementContext, PlacementError
from passes.placement.context_base import PlacementContextBase

if TYPE_CHECKING:
    from cost_model.costs import SimulationProblem
    from cost_model.devices.topology import Topology
    from graph_ir.graph import Graph

__all__ = ["PlacementOutcome", "PlacementPass"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlacementOutcome:
    """A method's result: decisions aligned with `node_order(graph)`, and what it cost to find."""

    decisions: Decisions
    context: PlacementContextBase
    evaluations: int
    seconds: float

    @property
    def device(self) -> np.ndarray:
        return self.decisions.device


@dataclass(frozen=True)
class PlacementPass(Pass):
    """Common options of the placement methods (each method adds its own)."""

    devices: str = option("", "override the target's topology (a preset, NxGPU, Nxhost or a YAML/JSON file); empty: the target's")
    objective: str = option("", "override the target's objective: latency | throughput | memory; empty: the target's")
    seed: int = option(0, "random seed (methods without randomness ignore it)")
    include_cpu: bool = option(False, "also place on the host CPU when the topology has accelerators")
    fused: bool = option(
        False, "score placements with the graph's fusion groups kept within each device (a group split across devices runs unfused)"
    )
    cpu_seconds: float = option(
        0.0, "search methods (sa, random, dp-ls) stop after this many CPU seconds of their run, keeping the best placement found; 0: their evaluation budget only"
    )

    def __post_init__(self) -> None:
        if not self.cpu_seconds >= 0:
            raise PlacementError(f"pass '{self.name}': cpu_seconds must be >= 0, got {self.cpu_seconds!r}", field="cpu_seconds")
        if self.objective and self.objective not in OBJECTIVES:
            raise PlacementError(
                f"pass '{self.name}': objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}",
                field="objective",
            )

    @property
    def search_budget(self) -> int | None:
        """Evaluations the method may spend (None: it does not search)."""
        return None

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not implement assign()")

    def target(self, target: Target | Topology | str | None = None) -> Target:
        """`target` (a Target, a Topology or a device spec; default: the default target) with
        this pass's own options applied, checked against it (`TargetConflictError`)."""
        if target is not None and not isinstance(target, Target):
            target = Target(devices=target, given=frozenset({"devices"}))
        return resolve_pipeline_target([self], target)

    def context(self, graph: Graph, target: Target | Topology | str | None = None) -> PlacementContext:
        resolved = self.target(target)
        return PlacementContext.from_graph(graph, resolved, **self._context_options(resolved.objective))

    def context_on(self, problem: SimulationProblem, *, base: Decisions | None = None, objective: str = "latency") -> PlacementContext:
        """The context of an already built simulation problem (its devices and kernel cost source),
        with this pass's options: no second problem built from the graph (~1 CPU s at 29k nodes)."""
        return PlacementContext(problem, base=base, **self._context_options(objective))

    def _context_options(self, objective: str) -> dict[str, Any]:
        return {"objective": objective, "budget": self.search_budget, "include_cpu": self.include_cpu, "fuse_within_device": self.fused}

    def decide(self, graph: Graph, target: Target | Topology | str | None = None) -> PlacementOutcome:
        """Run the method on `graph` without changing it."""
        began = time.perf_counter()
        return self.run(self.context(graph, target), began=began)

    @gc_frozen()  # a search over a built graph: its objects out of the collector's scans (graph_ir._gc)
    def run(self, ctx: PlacementContextBase, *, began: float | None = None) -> PlacementOutcome:
        """Run the method on a prepared context (seconds count from `began`, default now)."""
        began = time.perf_counter() if began is None else began
        timed = self.cpu_seconds > 0 and self.search_budget is not None
        if timed:
            ctx.deadline = time.process_time() + self.cpu_seconds
        try:
            device = np.zeros(0, dtype=np.int64) if ctx.num_nodes == 0 else np.asarray(self.assign(ctx), dtype=np.int64)
        finally:
            if timed:  # the deadline bounds the method's search, not later uses of its context
                ctx.deadline = math.inf
        if device.shape != (ctx.num_nodes,):
            raise PlacementError(f"pass '{self.name}' placed {device.shape} nodes, expected {ctx.num_nodes}")
        if device.size:
            if device.min() < 0 or device.max() >= ctx.num_devices:
                raise PlacementError(f"pass '{self.name}' placed a node on a device index outside 0..{ctx.num_devices - 1}")
            device = np.asarray(ctx.repair(device), dtype=np.int64)
            bad_mask = ~ctx.allowed[np.arange(device.size), device]
            if bad_mask.any():
                bad = int(np.flatnonzero(bad_mask)[0])
                raise PlacementError(
                    f"pass '{self.name}' placed a node on device index {int(device[bad])}, not a candidate",
                    node=ctx.node_names[bad],
                    field="device",
                )
        seconds = time.perf_counter() - began
        logger.info("%s: placed %d nodes in %.3fs (%d evaluations)", self.name, device.size, seconds, ctx.evaluations)
        decisions = ctx.decisions(device)
        if ctx.priority is not None:
            decisions.priority = np.asarray(ctx.priority, dtype=np.float64)
        return PlacementOutcome(decisions, ctx, ctx.evaluations, seconds)

    def write(self, graph: Graph, outcome: PlacementOutcome) -> bool:
        """Write device names (and priorities, when the method decided them) onto the nodes."""
        names = outcome.context.topology.device_names
        changed = False
        for node, d in zip(outcome.context.problem.nodes, outcome.device.tolist()):
            if node.device != names[d]:
                node.device = names[d]
                changed = True
        if outcome.context.priority is not None:
            for node, p in zip(outcome.context.problem.nodes, outcome.decisions.priority.tolist()):
                if node.priority != p:
                    node.priority = p
                    changed = True
        return changed

    def call(self, graph: Graph, context: PassContext) -> PassResult:
        outcome = self.decide(graph, context.target)
        return PassResult(graph, self.write(graph, outcome))
