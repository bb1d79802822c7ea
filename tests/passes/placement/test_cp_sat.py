"""CP-SAT placement against brute force on tiny graphs, through the same cost model.

Latency: every placement x every topological order, scheduled semi-actively from the problem's
float times and the topology's transfer times (`exact_makespan`), must give CP-SAT's optimum,
which must also bound every simulated placement from below. Throughput and memory: every
placement through `throughput_objective` (the simulator's own function) and `MemoryTracker`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cost_model.decisions import Decisions
from cost_model.simulator import SimulationProblem, simulate, throughput_objective
from passes.placement import MemoryTracker, PlacementContext, place_outcome
from passes.placement.cp_sat import solve_placement
from placement_testlib import Builder, chain, diamond, exact_makespan, topology


def fork() -> "Graph":  # noqa: F821 - the IR's Graph
    """5 nodes: x -> a -> (b, c) with c big, d = b + c, e reads x too (a graph input used twice)."""
    b = Builder(1000)
    x = b.input("x")
    a = b.op("Exp", [x], "a", size=2000)
    left = b.op("Tanh", [a], "b", size=8000)
    right = b.op("Sigmoid", [a], "c", size=8000)
    d = b.op("Add", [left, right], "d", size=1000)
    e = b.op("Add", [x, d], "e", size=1000)
    return b.output(e)


CASES = [
    pytest.param(diamond, 2, 1e9, id="diamond-2dev"),
    pytest.param(fork, 3, 1e9, id="fork-3dev"),
    pytest.param(fork, 2, 1e11, id="fork-2dev-fast-links"),
    pytest.param(lambda: chain([1000, 30000, 500, 20000, 800]), 3, 4e9, id="chain-3dev"),
]


def all_placements(num_nodes: int, num_devices: int):  # type: ignore[no-untyped-def]
    return itertools.product(range(num_devices), repeat=num_nodes)


def decisions(device: tuple[int, ...]) -> Decisions:
    n = len(device)
    return Decisions(np.asarray(device), np.full(n, -1), np.zeros(n))


@pytest.mark.parametrize(("make", "devices", "bandwidth"), CASES)
def test_latency_optimum_matches_brute_force_and_bounds_the_simulator(make, devices, bandwidth) -> None:  # type: ignore[no-untyped-def]
    graph = make()
    topo = topology(devices, bandwidth=bandwidth)
    problem = SimulationProblem.from_graph(graph, topo)
    ctx = PlacementContext(problem, objective="latency")
    solution = solve_placement(ctx, memory_constraint=False)
    assert solution.optimal
    brute = min(exact_makespan(problem, p) for p in all_placements(problem.num_nodes, devices))
    tolerance = 4 * problem.num_nodes * solution.unit_s
    assert solution.objective == pytest.approx(brute, abs=tolerance)
    assert solution.objective == pytest.approx(exact_makespan(problem, tuple(solution.device.tolist())), abs=tolerance)
    # No placement simulates faster than the CP-SAT optimum (the simulator adds link queueing).
    best_simulated = min(simulate(problem, decisions(p)).step_time_s for p in all_placements(problem.num_nodes, devices))
    assert solution.objective <= best_simulated + tolerance


def test_the_pass_writes_a_priority_order_the_simulator_replays() -> None:
    graph = fork()
    topo = topology(3)
    outcome = place_outcome(graph, "cp-sat", topo)
    solution = outcome.context.extras["cp_sat"]
    result = simulate(outcome.context.problem, outcome.decisions)
    assert result.step_time_s == pytest.approx(solution.objective, abs=4 * len(graph) * solution.unit_s)
    starts = solution.start
    order = np.argsort(-outcome.decisions.priority, kind="stable")
    assert np.all(np.diff(starts[order]) >= 0)  # higher priority = earlier start


@pytest.mark.parametrize(("make", "devices", "bandwidth"), CASES)
def test_throughput_optimum_matches_brute_force_over_the_simulator_objective(make, devices, bandwidth) -> None:  # type: ignore[no-untyped-def]
    graph = make()
    topo = topology(devices, bandwidth=bandwidth)
    problem = SimulationProblem.from_graph(graph, topo)
    ctx = PlacementContext(problem, objective="throughput")
    solution = solve_placement(ctx, memory_constraint=False)
    assert solution.optimal
    brute = min(throughput_objective(problem, decisions(p)) for p in all_placements(problem.num_nodes, devices))
    assert solution.objective == pytest.approx(brute, abs=8 * problem.num_nodes * solution.unit_s)
    assert throughput_objective(problem, decisions(tuple(solution.device.tolist()))) == pytest.approx(
        brute, abs=8 * problem.num_nodes * solution.unit_s
    )


def tracker_fraction(ctx: PlacementContext, device: tuple[int, ...]) -> float:
    memory = MemoryTracker(ctx)
    for node, d in enumerate(device):
        memory.place(node, d)
    return float((memory.used / ctx.capacity).max())


@pytest.mark.parametrize(("make", "devices"), [(diamond, 2), (fork, 3)])
def test_memory_optimum_matches_brute_force_over_the_memory_model(make, devices) -> None:  # type: ignore[no-untyped-def]
    graph = make()
    problem = SimulationProblem.from_graph(graph, topology(devices, memory=1e5))
    ctx = PlacementContext(problem, objective="memory")
    solution = solve_placement(ctx, memory_constraint=False)
    assert solution.optimal
    brute = min(tracker_fraction(ctx, p) for p in all_placements(problem.num_nodes, devices))
    achieved = tracker_fraction(ctx, tuple(solution.device.tolist()))
    assert achieved == pytest.approx(brute, abs=1e-5)


def test_memory_constraint_keeps_every_device_within_capacity() -> None:
    graph = fork()
    roomy = PlacementContext(SimulationProblem.from_graph(graph, topology(3, memory=1e9)))
    need = {p: tracker_fraction(roomy, p) * 1e9 for p in all_placements(len(graph), 3)}
    capacity = min(need.values()) * 1.01  # only the most memory-balanced placements fit
    assert need[(0,) * len(graph)] > capacity
    outcome = place_outcome(graph, "cp-sat", topology(3, memory=capacity))
    ctx = outcome.context
    assert tracker_fraction(ctx, tuple(outcome.device.tolist())) <= 1.0
    assert not simulate(ctx.problem, outcome.decisions).any_oom
