"""Placement passes: decide `node.device` for every node, by one of the classical methods.

    from passes.placement import place, METHODS
    decisions = place(graph, "m-sct", devices="4xV100", objective="latency")
    run_pipeline(graph, "sa{devices=4xV100,budget=500,seed=1}")

Every method is a registered pass (`METHODS` maps its name to the class) with the shared options
`devices`, `objective` (latency | throughput | memory), `seed` and `include_cpu`; searching methods
add `budget` (objective evaluations). Methods program against `PlacementContextBase`
(context_base.py: the problem as arrays, the budgeted objective, constraints and repair), with two
implementations: `PlacementContext` (context.py: a graph on a topology, the simulator, the
conservative memory model) and `ProfiledPlacementContext` (profiled_context.py: Tarnawski et
al.'s profiled workloads and the paper's cost models; `place_profiled` in profiled.py runs a
method on one). Each method's module docstring states its algorithm and its simplifications.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cost_model.costs import Target, resolve_topology
from passes.placement.annealing import SimulatedAnnealingPlacement
from passes.placement.baechi import MEtfPlacement, MSctPlacement, MTopoPlacement
from passes.placement.base import PlacementOutcome, PlacementPass
from passes.placement.context import (
    OBJECTIVES,
    BudgetExhausted,
    MemoryTracker,
    PlacementContext,
    PlacementError,
)
from passes.placement.context_base import PlacementContextBase
from passes.placement.cp_sat import CpSatPlacement
from passes.placement.critical_path import CriticalPathPlacement
from passes.placement.dp import ContiguousDpPlacement
from passes.placement.expert import HumanExpertPlacement
from passes.placement.local_search import LocalSearchPlacement
from passes.placement.partition import MetisPlacement, ScotchPlacement
from passes.placement.profiled import ProfiledOutcome, place_profiled
from passes.placement.profiled_context import ProfiledPlacementContext
from passes.placement.simple import HashPlacement, RandomPlacement, RoundRobinPlacement, SingleDevicePlacement

if TYPE_CHECKING:
    from cost_model.decisions import Decisions
    from cost_model.devices.topology import Topology
    from graph_ir.graph import Graph

__all__ = [
    "METHODS",
    "OBJECTIVES",
    "BudgetExhausted",
    "MemoryTracker",
    "PlacementContext",
    "PlacementContextBase",
    "PlacementError",
    "PlacementOutcome",
    "PlacementPass",
    "ProfiledOutcome",
    "ProfiledPlacementContext",
    "method_pass",
    "place",
    "place_outcome",
    "place_profiled",
    "resolve_topology",
]

METHODS: dict[str, type[PlacementPass]] = {
    cls.name: cls
    for cls in (
        SingleDevicePlacement,
        HumanExpertPlacement,
        RoundRobinPlacement,
        HashPlacement,
        CriticalPathPlacement,
        MetisPlacement,
        ScotchPlacement,
        MTopoPlacement,
        MEtfPlacement,
        MSctPlacement,
        SimulatedAnnealingPlacement,
        RandomPlacement,
        CpSatPlacement,
        ContiguousDpPlacement,
        LocalSearchPlacement,
    )
}


def place_outcome(
    graph: Graph,
    method: str,
    devices: str | Topology | Target = "4xV100",
    objective: str = "latency",
    **options: Any,
) -> PlacementOutcome:
    """Run placement `method` on `graph` without changing it; `devices` is a device spec, a
    Topology or a whole `Target` (then `objective` must agree with it or be left at its default);
    options are the pass's fields (snake_case: `budget=200`, `seed=1`, `time_limit_s=10`)."""
    chosen = method_pass(method, **options)
    if isinstance(devices, Target):
        target = devices if objective == devices.objective else devices.replace(objective=objective)
    else:
        target = Target(devices=devices, objective=objective, given=frozenset({"devices", "objective"}))
    return chosen.decide(graph, target)


def method_pass(method: str, **options: Any) -> PlacementPass:
    """The placement pass named `method` with `options` (its fields)."""
    cls = METHODS.get(method)
    if cls is None:
        raise PlacementError(f"unknown placement method {method!r}; known: {', '.join(METHODS)}")
    return cls(**options)


def place(
    graph: Graph, method: str, devices: str | Topology | Target = "4xV100", objective: str = "latency", **options: Any
) -> Decisions:
    """Decisions (aligned with `node_order(graph)`, device indices into the topology) from
    placement `method`; the graph is left unchanged."""
    return place_outcome(graph, method, devices, objective, **options).decisions
