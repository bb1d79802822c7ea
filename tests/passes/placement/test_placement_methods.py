"""Every placement method: valid decisions, determinism, pipeline use, and provable wins."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from cost_model.decisions import Decisions
from cost_model.simulator import SimulationProblem, simulate
from passes import run_pipeline
from passes.placement import METHODS, PlacementError, place, place_outcome, resolve_topology
from placement_testlib import diamond, topology, two_branches

# Options that keep every method fast on the test graphs.
FAST = {"sa": {"budget": 60}, "random": {"budget": 30}, "cp-sat": {"time_limit_s": 10.0}, "dp-ls": {"budget": 40}}
EXPECTED_METHODS = {
    "single-device", "human-expert", "round-robin", "hash", "critical-path", "metis", "scotch",
    "m-topo", "m-etf", "m-sct", "sa", "random", "cp-sat", "dp", "dp-ls",
}  # fmt: skip


def test_method_names_are_the_documented_ones() -> None:
    assert set(METHODS) == EXPECTED_METHODS


@pytest.mark.parametrize("method", sorted(EXPECTED_METHODS))
def test_every_node_lands_on_an_accelerator_of_the_topology(method: str) -> None:
    graph = graph_ir.load("examples/small_cnn.onnx")
    options = dict(FAST.get(method, {}))
    if method == "cp-sat":
        options["max_nodes"] = len(graph)
    result = METHODS[method](devices="4xV100", **options)(graph)
    graph.verify()
    assert result.modified
    topo = resolve_topology("4xV100")
    gpus = {d.name for d in topo.devices if d.kind == "gpu"}
    assert {node.device for node in graph} <= gpus
    decisions = Decisions.from_graph(graph, topo)
    assert decisions.num_nodes == len(graph)
    # The same method and seed again: the same placement.
    again = place(graph, method, "4xV100", **options)
    np.testing.assert_array_equal(again.device, decisions.device)


def test_place_leaves_the_graph_alone_and_returns_decisions() -> None:
    graph = diamond()
    decisions = place(graph, "m-etf", topology(2))
    assert all(node.device is None for node in graph)
    assert decisions.num_nodes == len(graph)
    assert set(decisions.device.tolist()) <= {0, 1}


def test_pipeline_strings_build_placement_passes() -> None:
    graph = two_branches()
    result = run_pipeline(graph, "m-sct{devices=2xV100,objective=latency},sa{devices=2xV100,budget=5,seed=2}")
    assert {node.device for node in result.graph} <= {"gpu0", "gpu1"}


def test_bad_objective_and_method_are_reported() -> None:
    with pytest.raises(PlacementError, match="objective must be one of"):
        METHODS["sa"](objective="energy")
    with pytest.raises(PlacementError, match="unknown placement method 'magic'"):
        place(diamond(), "magic")


def test_cp_sat_refuses_large_graphs_with_advice() -> None:
    graph = graph_ir.load("examples/small_cnn.onnx")
    with pytest.raises(PlacementError, match="at most 10 nodes"):
        place(graph, "cp-sat", "2xV100", max_nodes=10)


# Two independent branches of equal work on two identical GPUs, transfers ~free: running the
# branches in parallel halves the step, so every method that looks at the structure must do at
# least as well as one device (and the good ones reach about half).
NO_COST_LINKS = {"bandwidth": 1e18, "latency": 1e-15}
STRUCTURAL = ["human-expert", "critical-path", "metis", "scotch", "m-topo", "m-etf", "m-sct", "sa", "cp-sat", "dp"]
HALVES = ["critical-path", "metis", "scotch", "m-topo", "m-etf", "m-sct", "cp-sat", "sa"]


@pytest.mark.parametrize("method", STRUCTURAL)
def test_structural_methods_beat_one_device_on_parallel_branches(method: str) -> None:
    graph = two_branches()
    topo = topology(2, **NO_COST_LINKS)
    problem = SimulationProblem.from_graph(graph, topo)
    single = simulate(problem, place(graph, "single-device", topo)).step_time_s
    options = {"budget": 400} if method == "sa" else {}
    step = simulate(problem, place(graph, method, topo, **options)).step_time_s
    assert step <= single * (1 + 1e-12)
    if method in HALVES:
        assert step <= 0.5 * single * 1.05


def test_critical_path_puts_the_critical_path_on_the_fastest_device() -> None:
    from cost_model.devices import DeviceSpec

    from placement_testlib import device

    graph = two_branches()
    fast = DeviceSpec("fast", "gpu", {"fp32": 4e9}, mem_bandwidth=4e9, memory_bytes=1e9, launch_overhead_s=1e-6)
    topo = topology(devices=[device("slow"), fast], **NO_COST_LINKS)
    outcome = place_outcome(graph, "critical-path", topo)
    names = [n.name for n in outcome.context.problem.nodes]
    first_branch = [outcome.device[names.index(f"a{i}")] for i in range(4)]
    assert first_branch == [1, 1, 1, 1]
