"""The contiguous-split DP (Tarnawski et al.) for the max-load objective."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cost_model.decisions import Decisions
from cost_model.simulator import SimulationProblem, throughput_objective
from passes.placement import PlacementContext, place, place_outcome
from passes.placement.dp import segment_dp, topological_orders
from placement_testlib import chain, topology, two_branches

SIZES = [4000, 30000, 2000, 20000, 8000, 500, 16000]


def contiguous_placements(n: int, devices: int):  # type: ignore[no-untyped-def]
    """Every split of 0..n-1 into `devices` consecutive (possibly empty) segments, in device order."""
    for cuts in itertools.combinations_with_replacement(range(n + 1), devices - 1):
        bounds = (0, *cuts, n)
        device = np.empty(n, dtype=np.int64)
        for k in range(devices):
            device[bounds[k] : bounds[k + 1]] = k
        yield device


@pytest.mark.parametrize("devices", [2, 3])
def test_on_a_chain_the_dp_is_the_best_contiguous_split(devices: int) -> None:
    graph = chain(SIZES)
    topo = topology(devices, bandwidth=4e9)
    problem = SimulationProblem.from_graph(graph, topo)
    n = problem.num_nodes

    def load(device: np.ndarray) -> float:
        return throughput_objective(problem, Decisions(device, np.full(n, -1), np.zeros(n)))

    brute = min(load(d) for d in contiguous_placements(n, devices))
    ctx = PlacementContext(problem, objective="throughput")
    device, dp_value = segment_dp(ctx, np.arange(n))
    # On a chain each crossing value goes to exactly one device, so the DP's load model is the
    # simulator's max device load exactly.
    assert dp_value == pytest.approx(load(device), rel=1e-12)
    assert dp_value == pytest.approx(brute, rel=1e-12)
    # The pass and the exact CP-SAT optimum over all placements agree on the ordering of things.
    dp_pass = load(place(graph, "dp", topo, objective="throughput").device)
    exact = load(place(graph, "cp-sat", topo, objective="throughput").device)
    assert exact <= dp_pass * (1 + 1e-6) and dp_pass == pytest.approx(brute, rel=1e-12)


def test_the_dp_splits_parallel_branches_between_devices() -> None:
    graph = two_branches(length=4)
    topo = topology(2, bandwidth=1e18, latency=1e-15)
    outcome = place_outcome(graph, "dp", topo, objective="throughput")
    problem = outcome.context.problem
    n = problem.num_nodes
    single = throughput_objective(problem, Decisions(np.zeros(n), np.full(n, -1), np.zeros(n)))
    assert throughput_objective(problem, outcome.decisions) <= 0.5 * single * 1.01


def test_topological_orders_are_valid_and_distinct() -> None:
    graph = two_branches()
    ctx = PlacementContext(SimulationProblem.from_graph(graph, topology(2)))
    orders = topological_orders(ctx)
    assert len(orders) >= 2
    for order in orders:
        position = np.empty(ctx.num_nodes, dtype=np.int64)
        position[order] = np.arange(ctx.num_nodes)
        assert np.all(position[ctx.edge_src] < position[ctx.edge_dst])
        assert sorted(order.tolist()) == list(range(ctx.num_nodes))


def test_cut_points_are_thinned_on_long_orders() -> None:
    graph = chain([1000] * 30)
    ctx = PlacementContext(SimulationProblem.from_graph(graph, topology(3)), objective="throughput")
    device, _ = segment_dp(ctx, np.arange(ctx.num_nodes), max_cut_points=7)
    changes = np.flatnonzero(np.diff(device)) + 1
    allowed = set(np.rint(np.linspace(0, 30, 7)).astype(int).tolist())
    assert set(changes.tolist()) <= allowed
