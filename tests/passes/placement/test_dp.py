"""The contiguous-split DP (Tarnawski et al.) for the max-load objective."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cost_model.decisions import Decisions
from cost_model.simulator import SimulationProblem, throughput_objective
from passes.placement import PlacementContext, place, place_outcome
from cost_model.costs import VALUE_CONSTANT
from graph_ir import DType, Graph, NumpyTensor, TensorType, Value
from passes.placement.dp import _comm_matrix, segment_dp, topological_orders
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


def _random_graph(rng: np.random.Generator, count: int) -> Graph:
    """Random DAG with graph inputs used by several nodes, constants, repeated uses and outputs."""
    graph = Graph()
    values = [graph.add_input(Value(f"x{i}", TensorType(DType.FLOAT32, (int(rng.integers(1, 5000)),)))) for i in range(3)]
    values.append(graph.add_initializer(Value("w", const=NumpyTensor(np.zeros((4,), np.float32)))))
    for i in range(count):
        inputs = [values[int(j)] for j in rng.integers(0, len(values), size=int(rng.integers(1, 3)))]
        node = graph.add_node("Add" if len(inputs) == 2 else "Relu", inputs, name=f"n{i}")
        node.outputs[0].type = TensorType(DType.FLOAT32, (int(rng.integers(1, 100_000)),))
        values.append(node.outputs[0])
    for node in graph:
        if not node.outputs[0].uses:
            graph.add_output(node.outputs[0])
    return graph


def _comm_by_definition(ctx: PlacementContext, order: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The segment's transfer time straight from the definition, one segment at a time."""
    p = ctx.problem
    keep = p.value_kind[p.use_value] != VALUE_CONSTANT
    uses: dict[int, list[int]] = {}
    for v, node in zip(p.use_value[keep].tolist(), p.use_node[keep].tolist()):
        uses.setdefault(v, []).append(node)
    m = cuts.size
    comm = np.zeros((m, m))
    for a in range(m):
        for b in range(a + 1, m):
            inside = set(order[cuts[a] : cuts[b]].tolist())
            for v, users in uses.items():
                producer = int(p.value_producer[v])
                origin = producer if producer >= 0 else int(p.value_first_consumer[v])
                used_in = [u in inside for u in users]
                crosses = (not all(used_in)) if origin in inside else any(used_in)
                if crosses:
                    comm[a, b] += float(np.asarray(ctx.worst_comm_time(np.array([float(p.value_bytes[v])]))).reshape(-1)[0])
    return comm


@pytest.mark.parametrize("seed", range(6))
def test_segment_transfer_matrix_matches_its_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = _random_graph(rng, int(rng.integers(5, 40)))
    ctx = PlacementContext(SimulationProblem.from_graph(graph, topology(3, bandwidth=2e9)), objective="throughput")
    n = ctx.num_nodes
    orders = [*topological_orders(ctx), rng.permutation(n)]  # any order, topological or not
    for order in orders:
        for cuts in (np.arange(n + 1), np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, size=5)]))):
            expected = _comm_by_definition(ctx, order, cuts)
            np.testing.assert_allclose(_comm_matrix(ctx, order, cuts), expected, rtol=1e-9, atol=1e-15)
