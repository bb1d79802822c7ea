"""Memory promises (m-* methods, single-device) and search budgets (sa, random)."""

from __future__ import annotations

import numpy as np
import pytest

import passes.placement.context as context_module
from cost_model.simulator import SimulationProblem, simulate
from passes.placement import BudgetExhausted, MemoryTracker, PlacementContext, place, place_outcome
from placement_testlib import Builder, device, topology, two_branches


def wide_graph(branches: int = 6, length: int = 5, size: int = 2500) -> "Graph":  # noqa: F821
    """Independent chains: 6 x 5 nodes x 10 kB = 300 kB of outputs in all."""
    b = Builder(size)
    x = b.input("x")
    ends = []
    for k in range(branches):
        v = x
        for i in range(length):
            v = b.op("Tanh", [v], f"b{k}_{i}")
        ends.append(v)
    return b.output(*ends)


def tracker_bytes(ctx: PlacementContext, placement: np.ndarray) -> np.ndarray:
    memory = MemoryTracker(ctx)
    for node, d in enumerate(placement.tolist()):
        memory.place(node, d)
    return memory.used


def test_memory_tracker_bounds_the_simulated_peak() -> None:
    graph = wide_graph()
    problem = SimulationProblem.from_graph(graph, topology(3))
    ctx = PlacementContext(problem)
    rng = np.random.default_rng(0)
    for _ in range(20):
        placement = rng.integers(0, 3, problem.num_nodes)
        peak = simulate(problem, ctx.decisions(placement)).peak_memory_bytes
        assert np.all(peak <= tracker_bytes(ctx, placement))


@pytest.mark.parametrize("method", ["m-topo", "m-etf", "m-sct"])
def test_baechi_methods_keep_every_device_within_capacity(method: str) -> None:
    graph = wide_graph()
    # 4 devices of 100 kB: one device cannot hold the 300 kB graph, the four together can.
    topo = topology(4, memory=100_000)
    outcome = place_outcome(graph, method, topo)
    ctx = outcome.context
    assert np.all(tracker_bytes(ctx, outcome.device) <= ctx.capacity)
    result = simulate(ctx.problem, outcome.decisions)
    assert not result.any_oom
    assert len(set(outcome.device.tolist())) >= 3


def test_single_device_takes_the_fastest_device_that_fits() -> None:
    graph = wide_graph()
    fast_small = device("fast", memory=50_000, flops=8e9, bandwidth=8e9)
    slow_big = device("slow", memory=1e9)
    faster_but_tiny = device("tiny", memory=1_000, flops=16e9, bandwidth=16e9)
    topo = topology(devices=[fast_small, slow_big, faster_but_tiny])
    decisions = place(graph, "single-device", topo)
    assert set(decisions.device.tolist()) == {1}
    assert not simulate(SimulationProblem.from_graph(graph, topo), decisions).any_oom
    # With room everywhere the fastest device wins.
    roomy = topology(devices=[device("fast", memory=1e9, flops=8e9, bandwidth=8e9), slow_big])
    assert set(place(graph, "single-device", roomy).device.tolist()) == {0}


class CountingSimulate:
    def __init__(self) -> None:
        self.calls = 0
        self.real = context_module.simulate

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.mark.parametrize(("method", "budget"), [("sa", 37), ("random", 23), ("sa", 1), ("random", 1)])
def test_searches_spend_exactly_their_budget(monkeypatch: pytest.MonkeyPatch, method: str, budget: int) -> None:
    counter = CountingSimulate()
    monkeypatch.setattr(context_module, "simulate", counter)
    outcome = place_outcome(two_branches(), method, topology(2), budget=budget)
    assert counter.calls == budget
    assert outcome.evaluations == budget


def test_the_context_refuses_an_evaluation_past_the_budget() -> None:
    ctx = PlacementContext(SimulationProblem.from_graph(two_branches(), topology(2)), budget=2)
    placement = np.zeros(ctx.num_nodes, dtype=np.int64)
    ctx.evaluate(placement)
    ctx.evaluate(placement)
    with pytest.raises(BudgetExhausted, match="budget of 2"):
        ctx.evaluate(placement)


def test_the_context_refuses_an_evaluation_past_its_cpu_deadline() -> None:
    """The deadline never stops the first evaluation (as a budget of 1 does not)."""
    ctx = PlacementContext(SimulationProblem.from_graph(two_branches(), topology(2)))
    ctx.deadline = 0.0  # long past
    placement = np.zeros(ctx.num_nodes, dtype=np.int64)
    ctx.evaluate(placement)
    with pytest.raises(BudgetExhausted, match="CPU seconds are spent"):
        ctx.evaluate(placement)


@pytest.mark.parametrize("method", ["sa", "random", "dp-ls"])
def test_a_search_with_cpu_seconds_stops_there_and_keeps_its_best(method: str) -> None:
    """`cpu_seconds` bounds a search with no evaluation cap; a deadline that has passed leaves
    one evaluation (dp-ls: its DP start's), a longer one more; non-search methods ignore it; a negative one is refused."""
    graph = wide_graph(branches=3, length=3)
    topo = topology(3)
    now = place_outcome(graph, method, topo, budget=10**9, cpu_seconds=1e-9)
    later = place_outcome(graph, method, topo, budget=10**9, cpu_seconds=0.3)
    assert now.evaluations < later.evaluations
    assert now.evaluations == 1 or method == "dp-ls"  # dp-ls: the DP start always ends (its few evaluations)
    for outcome in (now, later):
        assert outcome.context.deadline == float("inf")  # the deadline bounded the run only
        outcome.context.budget = None  # score the answers
    assert later.context.evaluate(later.device) <= now.context.evaluate(now.device) + 1e-12
    assert place_outcome(graph, "metis", topo, cpu_seconds=1e-9).evaluations == place_outcome(graph, "metis", topo).evaluations
    from passes.placement import PlacementError

    with pytest.raises(PlacementError, match="cpu_seconds must be >= 0"):
        place(graph, method, topo, cpu_seconds=-1.0)


@pytest.mark.parametrize("method", ["sa", "random", "hash"])
def test_searches_are_deterministic_given_a_seed(method: str) -> None:
    graph = wide_graph(branches=3, length=3)
    topo = topology(3)
    options = {} if method == "hash" else {"budget": 40}
    first = place(graph, method, topo, seed=7, **options).device
    second = place(graph, method, topo, seed=7, **options).device
    np.testing.assert_array_equal(first, second)
    others = [place(graph, method, topo, seed=s, **options).device for s in (8, 9, 10)]
    assert any(not np.array_equal(first, o) for o in others)


def test_sa_is_never_worse_than_its_single_device_start() -> None:
    graph = wide_graph(branches=3, length=3)
    topo = topology(3)
    problem = SimulationProblem.from_graph(graph, topo)
    single = simulate(problem, place(graph, "single-device", topo)).step_time_s
    annealed = simulate(problem, place(graph, "sa", topo, budget=150)).step_time_s
    assert annealed <= single
