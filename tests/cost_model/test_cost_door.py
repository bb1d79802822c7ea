"""The cost door: Target, the registry of kernel cost sources, and every caller going through it."""

from __future__ import annotations

import numpy as np
import pytest

import graph_ir
from cost_model.costs import (
    COST_SOURCES,
    CostSourceError,
    KernelCostSource,
    SimulationProblem,
    SimulatorCostModel,
    Target,
    kernel_durations,
    register_cost_source,
)
from cost_model.decisions import Decisions
from graph_ir.errors import CompilerOptError
from passes import run_pipeline
from passes.placement import PlacementContext


class ScaledRoofline:
    """A real (if simple) second source: the roofline scaled by a factor, fused kernels by another."""

    def __init__(self, node_scale: float, fused_scale: float = 1.0) -> None:
        self.node_scale = node_scale
        self.fused_scale = fused_scale

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        return problem.node_time * self.node_scale

    def kernel_times(self, problem, kernel_of_node, kernel_size, kernel_type, default):  # type: ignore[no-untyped-def]
        out = np.array(default, dtype=np.float64, copy=True)
        out[kernel_size > 1] *= self.fused_scale
        return out


@pytest.fixture
def scaled_sources():  # type: ignore[no-untyped-def]
    """Two extra sources in the one registry, removed again afterwards."""
    saved = dict(COST_SOURCES)
    register_cost_source("x3", lambda graph, topology: ScaledRoofline(3.0), "roofline x3")
    register_cost_source("slow-fusion", lambda graph, topology: ScaledRoofline(1.0, fused_scale=50.0), "fused kernels 50x")
    yield
    COST_SOURCES.clear()
    COST_SOURCES.update(saved)


def small_cnn() -> graph_ir.Graph:
    return graph_ir.load("examples/small_cnn.onnx")


def test_target_resolve_rejects_bad_fields_with_the_field_named() -> None:
    with pytest.raises(CostSourceError, match="unknown cost source 'nope'") as caught:
        Target.resolve(costs="nope")
    assert caught.value.field == "costs"
    with pytest.raises(CostSourceError, match="objective must be one of"):
        Target.resolve(objective="fast")
    with pytest.raises(CompilerOptError):
        Target.resolve(devices="3xNoSuchGPU")
    target = Target.resolve(devices="2xV100")
    assert target.given == {"devices"} and target.costs == "roofline" and target.objective == "latency"


def test_the_scaled_source_is_a_kernel_cost_source(scaled_sources: None) -> None:
    assert isinstance(ScaledRoofline(2.0), KernelCostSource)
    assert {"roofline", "profiled", "x3"} <= set(COST_SOURCES)


def test_placement_contexts_and_the_simulator_take_times_from_the_target_source(scaled_sources: None) -> None:
    graph = small_cnn()
    plain = PlacementContext.from_graph(graph, Target.resolve(devices="2xV100"))
    scaled = PlacementContext.from_graph(graph, Target.resolve(devices="2xV100", costs="x3"))
    np.testing.assert_allclose(scaled.times, 3.0 * plain.times)
    device = np.zeros(len(graph), dtype=np.int64)
    one = plain.simulate(device).step_time_s
    three = scaled.simulate(device).step_time_s
    assert three == pytest.approx(3.0 * one, rel=1e-9)  # one device, no transfers: pure kernel time
    cost = SimulatorCostModel(Target.resolve(devices="2xV100", costs="x3")).estimate(graph, scaled.decisions(device))
    assert cost.step_time_s == pytest.approx(three, rel=1e-9)


def test_bench_and_pipelines_pick_the_source_by_name(scaled_sources: None) -> None:
    from compiler_opt.cli.bench_lib import BenchSpec, run_bench

    # Unfused, so every kernel is one node and the x3 source decides every time.
    spec = BenchSpec(workloads=["examples/small_cnn.onnx"], devices=["2xV100"], methods=["single-device"], costs="x3", default_fusion=False)
    scaled = run_bench(spec, progress=False)[0]
    spec.costs = "roofline"
    plain = run_bench(spec, progress=False)[0]
    assert scaled["costs"] == "x3"
    assert scaled["objective_value"] == pytest.approx(3.0 * plain["objective_value"], rel=1e-9)
    with pytest.raises(CompilerOptError, match="unknown cost source"):
        run_bench(BenchSpec(workloads=["examples/small_cnn.onnx"], costs="nope"), progress=False)


def test_fusion_cost_check_asks_the_target_source(scaled_sources: None) -> None:
    rules_only = small_cnn()
    run_pipeline(rules_only, "fuse")
    groups = {n.fusion_group for n in rules_only if n.fusion_group is not None}
    assert groups  # the rules fuse something on this model
    checked_roofline = small_cnn()
    run_pipeline(checked_roofline, "fuse{cost-check=true}")
    # The roofline never times a fused group above its parts here: nothing is split.
    assert [n.fusion_group for n in checked_roofline] == [n.fusion_group for n in rules_only]
    checked_slow = small_cnn()
    run_pipeline(checked_slow, "fuse{cost-check=true}", target=Target.resolve(costs="slow-fusion"))
    assert all(n.fusion_group is None for n in checked_slow)


def test_kernel_durations_match_the_simulator_for_fused_groups() -> None:
    graph = small_cnn()
    run_pipeline(graph, "fuse")
    target = Target.resolve(devices="1xV100")
    problem = target.problem(graph)
    decisions = Decisions.from_graph(graph, problem.topology, nodes=problem.nodes)
    kernel_of_node, first, size, duration = kernel_durations(problem, decisions.device, decisions.fusion_group)
    assert size.sum() == len(graph) and (size > 1).any()
    from cost_model.costs import simulate

    result = simulate(problem, decisions)
    # One device, kernels back to back from t=0: the step is at least the summed kernel time.
    assert result.step_time_s >= duration.sum() * (1 - 1e-9)


@pytest.mark.slow
def test_profiled_source_times_kernels_on_this_machine(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    jnp = pytest.importorskip("jax").numpy
    from cost_model.profiling import ProfiledCosts
    from cost_model.profiling.calibration import hlo_workload

    monkeypatch.setenv("COMPILER_OPT_CACHE", str(tmp_path))

    def mlp(x, w1, w2):  # type: ignore[no-untyped-def]
        return jnp.tanh(jnp.tanh(x @ w1) @ w2)

    args = [np.ones((64, 128), np.float32), np.ones((128, 128), np.float32), np.ones((128, 16), np.float32)]
    graph = hlo_workload("mlp", mlp, *args).graph
    target = Target.resolve(devices="1xhost", costs="profiled")
    problem = target.problem(graph)
    assert isinstance(problem.kernel_costs, ProfiledCosts)
    roofline = Target.resolve(devices="1xhost").problem(graph)
    assert np.isfinite(problem.node_time).all()
    assert not np.allclose(problem.node_time, roofline.node_time)


def test_recorded_source_simulates_a_profiled_workload_with_its_own_latencies(shared_testdata) -> None:  # type: ignore[no-untyped-def]
    from cost_model.profiled import load_profiled_workload

    path = shared_testdata / "placement" / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    workload = load_profiled_workload(path)
    graph = workload.to_graph()
    problem = Target.resolve(devices="2xV100", costs="recorded").problem(graph)
    gpu = list(problem.topology.device_names).index("gpu0")
    column = problem.device_type_of[gpu]
    rows = [workload.row_of[int(n.name[len("node"):])] for n in problem.nodes]
    np.testing.assert_allclose(problem.node_time[:, column], np.where(workload.supported[rows], workload.accel_latency[rows], np.inf))
    decisions = Decisions(np.full(problem.num_nodes, gpu, dtype=np.int32), np.full(problem.num_nodes, -1, dtype=np.int32), np.zeros(problem.num_nodes))
    from cost_model.costs import simulate

    assert workload.supported.all()  # this file: every node may run on an accelerator
    # One accelerator, values without sizes (no transfers): the sum of the accelerator latencies.
    assert simulate(problem, decisions).step_time_s == pytest.approx(float(workload.accel_latency.sum()), rel=1e-9)


def test_learned_source_answers_matmuls_on_cpu_devices_through_the_door() -> None:
    pytest.importorskip("tvm")
    jnp = pytest.importorskip("jax").numpy
    from cost_model.learned.costs import LearnedCosts
    from cost_model.profiling.calibration import hlo_workload

    def mlp(x, w):  # type: ignore[no-untyped-def]
        return jnp.tanh(x @ w)

    graph = hlo_workload("mlp", mlp, np.ones((64, 256), np.float32), np.ones((256, 128), np.float32)).graph
    learned = Target.resolve(devices="cpu", costs="learned").problem(graph)
    roofline = Target.resolve(devices="cpu").problem(graph)
    assert isinstance(learned.kernel_costs, LearnedCosts)
    dots = [i for i, n in enumerate(learned.nodes) if n.op_type == "dot"]
    others = [i for i, n in enumerate(learned.nodes) if n.op_type != "dot"]
    assert dots and np.isfinite(learned.node_time[dots]).all()
    assert not np.allclose(learned.node_time[dots], roofline.node_time[dots])  # the model answered
    np.testing.assert_array_equal(learned.node_time[others], roofline.node_time[others])  # the roofline stays
