"""Whole-graph calibration: configurations, real whole steps, profiling apart from scoring,
executors shared between host devices, and the pooled statistics."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.decisions import Decisions
from cost_model.devices import DeviceSpec, DeviceSpecError, Link, Topology
from cost_model.profiling.calibration import GroupExecutor, correlations, hlo_workload, kernel_groups
from compiler_opt.calibration.whole_graph import (
    configurations,
    kernel_order_priorities,
    naive_baselines,
    prepare_graph,
)
from compiler_opt.calibration.whole_study import WholeGraphStudy, pooled_correlations, run_study
from cost_model.profiling.xla_backend import XlaBackend, host_devices
from cost_model.simulator import SimulationProblem, simulate

jax = pytest.importorskip("jax")
jnp = jax.numpy

HOST = DeviceSpec("cpu0", "cpu", {"fp32": 1e11}, mem_bandwidth=2e10, memory_bytes=1e10, launch_overhead_s=1e-5)


def _topology(num_devices: int, *, shared: bool = False) -> Topology:
    devices = [HOST.renamed(f"cpu{i}") for i in range(num_devices)]
    links = [Link(f"cpu{i}", f"cpu{j}", 1e9, 2e-5) for i in range(num_devices) for j in range(num_devices) if i != j]
    return Topology("host", devices, links, executors=[0] * num_devices if shared else None)


def _model(x, w1, w2, w3):
    # Two branches and two results (a ROOT tuple): fusion, placement and routing all have work.
    h = jnp.maximum(x @ w1 + 0.5, 0.0)
    a = jnp.tanh(h @ w2) * 2.0
    b = jax.nn.sigmoid(h @ w3) - 1.0
    return jnp.sum(a * b, axis=1), a + x[:, : w2.shape[1]]


def _whole():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) * 0.3 for s in [(8, 16), (16, 16), (16, 8), (16, 8)]]
    workload = hlo_workload("two-heads", _model, *args)
    return prepare_graph("two-heads", "test", workload.graph), workload


def test_prepare_unpacks_the_result_tuple_and_keeps_the_default_groups_aside():
    whole, _ = _whole()
    assert len(whole.graph.outputs) == 2 and all(v.producer.op_type != "tuple" for v in whole.graph.outputs)
    assert whole.default_fusion == "xla-gpu" and (whole.default_groups >= 0).sum() >= 4
    assert all(n.fusion_group is None for n in whole.nodes)  # configurations start unfused
    whole.graph.verify()


def test_configurations_schedule_kernels_topologically_and_place_whole_kernels():
    whole, _ = _whole()
    problem = SimulationProblem.from_graph(whole.graph, _topology(2))
    configs = configurations(whole, problem, np.random.default_rng(3), num_random=3, num_devices=2)
    assert [c.label for c in configs[:6]] == ["none/one", "none/split", "none/random", "default/one", "default/split", "default/random"]
    src, dst = problem.node_edges()
    for config in configs:
        simulate(problem, config.decisions)  # a cycle between kernels would raise
        kernels, devices = kernel_groups(config.decisions)
        position = {node: k for k, members in enumerate(kernels) for node in members}
        assert all(position[a] <= position[b] for a, b in zip(src.tolist(), dst.tolist()))
        for members, device in zip(kernels, devices):
            assert set(config.decisions.device[members].tolist()) == {device}
        if config.placement == "split":  # a two-stage pipeline: nothing flows back to device 0
            d = config.decisions.device
            assert not any(d[a] == 1 and d[b] == 0 for a, b in zip(src.tolist(), dst.tolist()))
            assert set(d.tolist()) == {0, 1}


def test_kernel_order_priorities_are_one_value_per_kernel():
    whole, _ = _whole()
    problem = SimulationProblem.from_graph(whole.graph, _topology(1))
    groups = whole.default_groups
    priority = kernel_order_priorities(problem, groups, np.zeros(len(whole.nodes), dtype=np.int64))
    for g in set(groups.tolist()) - {-1}:
        assert len(set(priority[groups == g].tolist())) == 1
    assert len(set(priority.tolist())) == len(kernel_groups(Decisions(np.zeros(len(groups)), groups, priority))[0])


def test_naive_baselines_count_kernels_flops_and_boundary_bytes():
    whole, _ = _whole()
    problem = SimulationProblem.from_graph(whole.graph, _topology(1))
    n = len(whole.nodes)
    none = Decisions(np.zeros(n), np.full(n, -1), -np.arange(n, dtype=np.float64))
    fused = Decisions(np.zeros(n), whole.default_groups, kernel_order_priorities(problem, whole.default_groups, np.zeros(n, dtype=np.int64)))
    a, b = naive_baselines(problem, none), naive_baselines(problem, fused)
    assert a["kernels"] == n and b["kernels"] == len(kernel_groups(fused)[0]) < n
    assert a["flops"] == b["flops"] == pytest.approx(problem.flops.sum())
    assert a["bytes"] == pytest.approx(problem.node_bytes.sum()) and b["bytes"] < a["bytes"]  # fusion keeps intermediates inside


def test_whole_steps_compute_what_the_model_computes():
    whole, workload = _whole()
    devices = min(2, len(host_devices()))
    problem = SimulationProblem.from_graph(whole.graph, _topology(devices))
    backend = XlaBackend()
    executor = GroupExecutor(whole.graph, whole.nodes, backend=backend)
    inputs = [executor.input_arrays[v] for v in whole.graph.inputs]
    expected = [np.asarray(r) for r in jax.jit(workload.reference)(*inputs)]
    for config in configurations(whole, problem, np.random.default_rng(1), num_random=1, num_devices=devices):
        got = [np.asarray(r) for r in executor.plan(config.decisions).run()]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=config.label)
    assert backend.shared > 0  # isomorphic groups (the two heads' tanh/sigmoid-free parts) reuse executables


def test_isomorphic_groups_share_an_executable_unless_their_constants_differ():
    def f(x):
        return (x + 1.0) * 2.0, (x + 1.0) * 3.0, (x + 1.0) * 2.0

    workload = hlo_workload("iso", f, np.ones((4, 4), np.float32))
    whole = prepare_graph("iso", "test", workload.graph)
    backend = XlaBackend()
    by_op = [n for n in whole.nodes if n.op_type == "multiply"]
    assert len(by_op) == 3
    kernels = [backend.kernel(whole.graph, [n]) for n in by_op]
    assert backend.shared >= 1  # the multiplies have the same signature
    executor = GroupExecutor(whole.graph, whole.nodes, backend=backend)
    n = len(whole.nodes)
    outs = executor.plan(Decisions(np.zeros(n), np.full(n, -1), -np.arange(n, dtype=np.float64))).run()
    x = executor.input_arrays[whole.graph.inputs[0]]
    for got, scale in zip(outs, (2.0, 3.0, 2.0)):  # the constants 2 and 3 were not mixed up
        np.testing.assert_allclose(np.asarray(got), (x + 1.0) * scale, rtol=1e-6)
    assert kernels[0].executable is not None


def test_study_profiles_on_other_runs_than_it_scores():
    whole, _ = _whole()
    study = run_study(whole, _topology(1), num_random=1, placements=("one",), repeats=2, warmup=1, profile_repeats=2, seed=5)
    assert [c["label"] for c in study.configs] == ["none/one", "default/one", "prio0/one"]
    assert study.log.disjoint("profile", "score")  # separate time windows, separate input seeds
    assert study.log.profiled_after_scoring == 0  # nothing the simulation read was timed after
    (profile,) = study.log.of("profile")
    (score,) = study.log.of("score")
    assert profile.input_seed != score.input_seed and profile.ended <= score.began
    for row in study.configs:
        for target in ("wall", "wall-min", "cpu"):
            assert row["measured_s"][target] > 0 and row["measured_a_s"][target] > 0 and row["measured_b_s"][target] > 0
        assert row["measured_s"]["wall-min"] <= row["measured_s"]["wall"] and len(row["samples_s"]["wall"]) == 4
        assert all(t > 0 for t in row["simulated_s"].values())
    assert set(study.correlation) == {"wall", "wall-min", "cpu"}
    assert {"roofline", "roofline-shared", "profiled@cpu", "profiled-shared@wall", "kernels", "flops", "bytes"} <= set(study.correlation["wall"])
    assert np.isnan(study.correlation["wall"]["flops"]["spearman"])  # fusion does not change FLOPs
    # one profiled table per clock, from the same profiling runs: wall and CPU tables differ
    assert not np.array_equal(study.predictor("profiled@wall"), study.predictor("profiled@cpu"))
    again = WholeGraphStudy.from_json(study.to_json())  # the benchmark's --report path
    assert again.correlation["cpu"]["profiled@cpu"] == study.correlation["cpu"]["profiled@cpu"]


def test_shared_executor_serializes_devices_and_their_copies():
    def f(x, y):
        return jnp.tanh(x) * 2.0, jnp.exp(y) + 1.0

    workload = hlo_workload("pair", f, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    graph = workload.graph
    free = SimulationProblem.from_graph(graph, _topology(2))
    shared = SimulationProblem.from_graph(graph, _topology(2, shared=True))
    n = free.num_nodes
    device = np.array([0 if any(v is graph.inputs[0] for v in node.inputs) or i % 2 == 0 else 1 for i, node in enumerate(free.nodes)])
    decisions = Decisions(device, np.full(n, -1), -np.arange(n, dtype=np.float64))
    one = Decisions(np.zeros(n), np.full(n, -1), -np.arange(n, dtype=np.float64))
    serial = simulate(shared, one).step_time_s
    spread_free, spread_shared = simulate(free, decisions).step_time_s, simulate(shared, decisions).step_time_s
    assert spread_shared >= serial - 1e-12  # one executor: spreading can only add copies
    assert spread_free < spread_shared  # independent devices overlap
    assert simulate(free, one).step_time_s == pytest.approx(serial)
    with pytest.raises(DeviceSpecError, match="executor"):
        Topology("bad", [HOST.renamed("a"), HOST.renamed("b")], executors=[0, 2])


def _fake_study(name: str, measured: list[float], predicted: list[float], constant: float) -> WholeGraphStudy:
    study = WholeGraphStudy(name, "test", 200, "none")
    for m, p in zip(measured, predicted):
        study.configs.append({"measured_s": {"wall": m}, "simulated_s": {"roofline": p}, "baselines": {"flops": constant}})
    return study


def test_pooled_correlations_rank_within_graphs():
    small = _fake_study("small", [1.0, 2.0, 3.0], [10.0, 20.0, 30.0], 5.0)
    large = _fake_study("large", [100.0, 300.0, 200.0], [1.0, 3.0, 2.0], 50.0)
    pooled = pooled_correlations([small, large], "roofline")
    # normalised per graph both graphs rank perfectly, whatever their scales
    assert pooled["spearman"] == pytest.approx(1.0)
    raw = pooled_correlations([small, large], "roofline", normalise=False)
    assert raw["spearman"] < 0  # unnormalised, the big graph's small predictions invert the pool
    assert np.isnan(pooled_correlations([small, large], "flops")["spearman"])  # constant per graph
    assert pooled_correlations([small, large], "flops", normalise=False)["spearman"] == pytest.approx(
        correlations([5.0] * 3 + [50.0] * 3, [1, 2, 3, 100, 300, 200])["spearman"]
    )
