"""Profiled costs: real timings through XLA and onnxruntime, the SQLite cache, the simulator seam."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from cost_model.devices import DeviceSpec, Topology
from cost_model.profiling import (
    Measurement,
    OrtBackend,
    ProfileCache,
    ProfiledCosts,
    Profiler,
    XlaBackend,
    backend_for,
    cut_group,
    time_interleaved,
)
from cost_model.profiling.calibration import hlo_workload
from cost_model.simulator import SimulationProblem, build_task_graph, simulate
from cost_model.decisions import Decisions

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _mlp_graph():
    def mlp(x, w):
        return jnp.sum(jnp.tanh(x @ w) * 2.0 + 1.0, axis=1)

    return hlo_workload("mlp", mlp, np.ones((32, 64), np.float32), np.ones((64, 48), np.float32)).graph


def _cpu(name: str = "cpu0", kind: str = "cpu") -> DeviceSpec:
    return DeviceSpec(name, kind, {"fp32": 1e11}, mem_bandwidth=1e10, memory_bytes=1e10, launch_overhead_s=1e-5)


def test_profiler_times_are_positive_and_cached_in_sqlite_under_the_env_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILER_OPT_CACHE", str(tmp_path))
    graph = _mlp_graph()
    first = Profiler(XlaBackend(), repeats=3, warmup=1)
    times = first.profile_nodes(graph)
    assert len(times) == len(graph)
    assert all(m.min_s > 0 and m.median_s >= m.min_s and len(m.samples) == 3 and not m.cached for m in times.values())
    database = tmp_path / "profiles.sqlite"
    assert database.is_file()
    rows = sqlite3.connect(database).execute("SELECT COUNT(*), MIN(repeats) FROM measurements").fetchone()
    assert rows == (first.measured, 3)  # one row per distinct signature, raw samples kept
    assert first.measured <= len(graph)  # equal ops (e.g. the scalar constants) were timed once

    second = Profiler(XlaBackend(), repeats=3, warmup=1)  # a new connection: hits come from the file
    again = second.profile_nodes(graph)
    assert second.measured == 0 and second.cache.misses == 0 and second.cache.hits == first.measured
    assert all(again[n].cached and again[n].samples == times[n].samples for n in graph)


def test_fused_elementwise_chain_is_faster_than_its_members_run_apart():
    def chain(x):
        return jnp.exp(jnp.tanh(x * 2.0 + 1.0) - 0.5) * 3.0

    graph = hlo_workload("chain", chain, np.ones((1024, 1024), np.float32)).graph  # 4 MB per value
    nodes = list(graph)
    profiler = Profiler(XlaBackend(), cache=False, repeats=7, warmup=1)
    fused, *members = profiler.profile_groups(graph, [nodes] + [[n] for n in nodes])
    # Apart, each of the ~10 ops reads and writes 4 MB and pays a dispatch; fused, one pass.
    assert fused.min_s < sum(m.min_s for m in members), (fused, [m.min_s for m in members])


def test_onnxruntime_backend_times_a_conv():
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from graph_ir.io.onnx_import import import_onnx

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8, 3, 3)).astype(np.float32), "w")
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
            "conv",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])],
            [weight],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    onnx.checker.check_model(model)
    graph = import_onnx(model)
    from passes.basic.shape_inference import ShapeInference

    ShapeInference().call(graph)  # the Relu's input needs a type to be fed on its own
    backend = backend_for(graph)
    assert isinstance(backend, OrtBackend)
    conv = next(n for n in graph if n.op_type == "Conv")
    cut = cut_group(graph, [conv])
    assert [v.name for v in cut.graph.inputs] == ["x"] and "w" in cut.graph.initializers  # weights stay weights
    times = Profiler(backend, cache=False, repeats=3, warmup=1).profile_nodes(graph)
    assert all(m.min_s > 0 for m in times.values())
    assert times[conv].min_s > 0


def test_cut_group_keeps_the_boundary_and_exports_one_root():
    graph = _mlp_graph()
    nodes = list(graph)
    dot = next(n for n in nodes if n.op_type == "dot")
    tanh = next(n for n in nodes if n.op_type == "tanh")
    cut = cut_group(graph, [tanh, dot], tuple_op="tuple")  # any order in, graph order out
    assert cut.members == (dot, tanh)
    assert [v.name for v in cut.inputs] == [v.name for v in graph.inputs]
    assert cut.outputs == tuple(tanh.outputs)
    cut.graph.verify()


def test_profiled_costs_replace_roofline_for_cpu_types_only():
    graph = _mlp_graph()
    topology = Topology("mixed", [_cpu("cpu0"), _cpu("gpu0", kind="gpu")])
    plain = SimulationProblem.from_graph(graph, topology)
    profiler = Profiler(XlaBackend(), cache=ProfileCache(":memory:"), repeats=3, warmup=1)
    costs = ProfiledCosts(profiler)
    profiled = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)
    measured = profiler.profile_groups(graph, [[n] for n in profiled.nodes])
    cpu_col = [t.kind for t in profiled.device_types].index("cpu")
    gpu_col = 1 - cpu_col
    np.testing.assert_array_equal(profiled.node_time[:, cpu_col], [m.min_s for m in measured])
    np.testing.assert_array_equal(profiled.node_time[:, gpu_col], plain.node_time[:, gpu_col])

    # A fused group on the cpu takes its own measured time; the same group on the gpu, the roofline.
    n = profiled.num_nodes
    for device, expect_profiled in ((0, True), (1, False)):
        decisions = Decisions(np.full(n, device), np.zeros(n), np.zeros(n))
        tasks = build_task_graph(profiled, decisions)
        assert tasks.num_kernels == 1
        group = profiler.profile_groups(graph, [profiled.nodes])[0].min_s
        roofline = build_task_graph(plain, decisions).kernel_duration[0]
        assert tasks.kernel_duration[0] == (group if expect_profiled else roofline)
        assert simulate(profiled, decisions).step_time_s >= tasks.kernel_duration[0]


def test_estimate_mode_needs_no_group_measurement():
    graph = _mlp_graph()
    profiler = Profiler(XlaBackend(), cache=ProfileCache(":memory:"), repeats=2, warmup=1)
    problem = SimulationProblem.from_graph(graph, Topology("one", [_cpu()]), kernel_costs=ProfiledCosts(profiler, on_miss="estimate", dispatch_overhead_s=1e-6))
    before = profiler.measured
    n = problem.num_nodes
    single = problem.node_time[:, 0]
    duration = build_task_graph(problem, Decisions(np.zeros(n), np.zeros(n), np.zeros(n))).kernel_duration[0]
    assert profiler.measured == before
    assert duration == pytest.approx(single.sum() - 1e-6 * (n - 1))


def test_time_interleaved_reports_min_and_median_of_each_runner():
    ticks = iter(np.arange(0.0, 1000.0, 1.0))
    calls: list[int] = []
    result = time_interleaved([lambda: calls.append(0), lambda: calls.append(1)], repeats=4, warmup=2, clock=lambda: next(ticks))
    assert calls.count(0) == calls.count(1) == 6
    assert all(isinstance(m, Measurement) and m.samples == (1.0,) * 4 and m.min_s == m.median_s == 1.0 for m in result)
