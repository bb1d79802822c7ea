"""Calibration machinery: random configurations are valid, run for real, match JAX, and simulate."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.devices import DeviceSpec
from cost_model.profiling import ProfileCache, Profiler, XlaBackend
from cost_model.profiling.calibration import GroupExecutor, hlo_workload, kernel_groups, random_configuration
from cost_model.profiling.study import COST_SOURCES, calibrate_workload
from cost_model.profiling.xla_backend import host_devices
from cost_model.simulator import SimulationProblem, simulate

jax = pytest.importorskip("jax")
jnp = jax.numpy

HOST = DeviceSpec("cpu0", "cpu", {"fp32": 1e11}, mem_bandwidth=2e10, memory_bytes=1e10, launch_overhead_s=1e-5)


def _workload():
    def block(x, w1, w2):
        h = jnp.maximum(x @ w1 + 0.5, 0.0)
        return jnp.tanh(h @ w2) * 2.0 + x[:, : w2.shape[1]]

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in [(16, 32), (32, 32), (32, 16)]]
    return hlo_workload("block", block, *args)


def _weakly_connected(members: list[int], problem: SimulationProblem) -> bool:
    inside = set(members)
    src, dst = problem.node_edges()
    adjacent: dict[int, set[int]] = {m: set() for m in members}
    for a, b in zip(src.tolist(), dst.tolist()):
        if a in inside and b in inside:
            adjacent[a].add(b)
            adjacent[b].add(a)
    seen, stack = {members[0]}, [members[0]]
    while stack:
        for nxt in adjacent[stack.pop()] - seen:
            seen.add(nxt)
            stack.append(nxt)
    return seen == inside


def test_random_configurations_are_acyclic_connected_groups_in_a_topological_schedule():
    workload = _workload()
    problem = SimulationProblem.from_graph(workload.graph, _two_device_topology())
    rng = np.random.default_rng(0)
    fused_any = False
    for _ in range(60):
        decisions = random_configuration(problem, rng, num_devices=2)
        simulate(problem, decisions)  # raises DecisionError on a cycle between groups
        kernels, devices = kernel_groups(decisions)
        position = {node: k for k, members in enumerate(kernels) for node in members}
        src, dst = problem.node_edges()
        assert all(position[a] <= position[b] for a, b in zip(src.tolist(), dst.tolist()))  # schedule respects deps
        for members, device in zip(kernels, devices):
            assert len(set(decisions.device[members].tolist())) == 1 and decisions.device[members[0]] == device
            assert _weakly_connected(members, problem)
            fused_any |= len(members) > 1
    assert fused_any


def _two_device_topology():
    from cost_model.devices import Link, Topology

    return Topology("2xhost", [HOST.renamed("cpu0"), HOST.renamed("cpu1")], [Link("cpu0", "cpu1", 1e9, 1e-5), Link("cpu1", "cpu0", 1e9, 1e-5)])


def test_every_configuration_computes_what_the_jax_function_computes():
    workload = _workload()
    problem = SimulationProblem.from_graph(workload.graph, _two_device_topology())
    executor = GroupExecutor(workload.graph, problem.nodes)
    inputs = [executor.input_arrays[v] for v in workload.graph.inputs]
    expected = np.asarray(jax.jit(workload.reference)(*inputs))
    rng = np.random.default_rng(1)
    devices = min(2, len(host_devices()))
    for fuse_prob in (0.0, 0.5, 1.0):
        decisions = random_configuration(problem, rng, num_devices=devices, fuse_prob=fuse_prob)
        (got,) = executor.plan(decisions).run()
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)


def test_calibration_runs_end_to_end_on_three_configurations():
    workload = _workload()
    profiler = Profiler(XlaBackend(), cache=ProfileCache(":memory:"), repeats=3, warmup=1)
    result = calibrate_workload(workload, profiler, num_configs=3, num_devices=1, repeats=3, warmup=1, host=HOST)
    assert len(result.configs) == 3
    for row in result.configs:
        assert row["measured_min_s"] > 0 and row["measured_median_s"] >= row["measured_min_s"]
        assert set(row["simulated_s"]) == set(COST_SOURCES) and all(t > 0 for t in row["simulated_s"].values())
    assert set(result.correlation) == set(COST_SOURCES)
    assert profiler.measured >= result.num_nodes - 3  # every node alone (equal constants share one), plus groups


def test_correlations_by_hand():
    from cost_model.profiling.calibration import correlations

    # ranks 1,2,3,4 vs 1,2,4,3: d^2 sum 2 -> spearman 1 - 6*2/(4*15) = 0.8; ties average their ranks.
    assert correlations([1, 2, 3, 4], [1, 2, 4, 3])["spearman"] == pytest.approx(0.8)
    assert correlations([1, 1, 2, 3], [5, 5, 6, 9])["spearman"] == pytest.approx(1.0)
    assert correlations([1, 2, 3], [2, 4, 6])["pearson"] == pytest.approx(1.0)


_LOOP_HLO = """HloModule loop

body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[8] multiply(x, x)
  ROOT t = (s32[], f32[8]) tuple(i1, x1)
}

cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  y = f32[8] get-tuple-element(w), index=1
  z = f32[8] tanh(y)
  e = f32[8] exponential(x)
  ROOT out = (f32[8], f32[8]) tuple(z, e)
}
"""


def _op_by_op(tmp_path, text: str):  # type: ignore[no-untyped-def]
    """Load HLO `text`, run it with every op its own kernel: (graph, executor, outputs)."""
    import graph_ir
    from cost_model.decisions import Decisions, node_order

    path = tmp_path / "m.hlo"
    path.write_text(text)
    graph = graph_ir.load(str(path))
    nodes = node_order(graph)
    executor = GroupExecutor(graph, nodes, seed=0)
    n = len(nodes)
    unfused = Decisions(np.zeros(n, dtype=np.int64), np.full(n, -1), np.arange(n, 0, -1, dtype=np.float64))
    return graph, executor, [np.asarray(a) for a in executor.plan(unfused).run()]


def test_tuples_never_cross_kernels(tmp_path) -> None:
    """A while loop's tuple, its get-tuple-elements, its packed init and a ROOT tuple, each op its
    own kernel: the plan keeps tuples inside executables (before: "group output %w is a (s32[],
    f32[8]); only tensor results are routed") and computes what the program does."""
    graph, executor, (z, e) = _op_by_op(tmp_path, _LOOP_HLO)
    x = executor.input_arrays[graph.inputs[0]]
    np.testing.assert_allclose(z, np.tanh(x ** 8), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e, np.exp(x), rtol=1e-5)


_ARGMAX_F64_HLO = """HloModule multi
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  m = f32[] select(gt, a, b)
  mi = s32[] select(gt, ai, bi)
  ROOT t = (f32[], s32[]) tuple(m, mi)
}
ENTRY main {
  x = f64[4,8] parameter(0)
  xf = f32[4,8] convert(x)
  iota = s32[4,8] iota(), iota_dimension=1
  init = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[4], s32[4]) reduce(xf, iota, init, zero), dimensions={1}, to_apply=argmax
}
"""

_PREMADE_FUSION_HLO = """HloModule premade
fused {
  p0 = f32[8] parameter(0)
  ROOT e = f32[8] exponential(p0)
}
ENTRY main {
  x = f32[8] parameter(0)
  f = f32[8] fusion(x), kind=kLoop, calls=fused
  ROOT n = f32[8] negate(f)
}
"""


@pytest.mark.parametrize("text", [_ARGMAX_F64_HLO, _PREMADE_FUSION_HLO], ids=["variadic-root-f64-input", "premade-fusion"])
def test_real_hlo_shapes_run_as_kernels(tmp_path, text: str) -> None:
    """A variadic reduce as ROOT (a tuple of its leaves) fed by an f64 parameter (kept 64-bit),
    and a module that came fused (XLA:CPU refuses a pre-made fusion without its backend config:
    it compiles as a call). Each computes what the program does, op by op as kernels."""
    graph, executor, outs = _op_by_op(tmp_path, text)
    x = executor.input_arrays[graph.inputs[0]]
    if "argmax" in text:
        assert x.dtype == np.float64
        np.testing.assert_allclose(outs[0], x.max(axis=1).astype(np.float32))
        np.testing.assert_array_equal(outs[1], x.argmax(axis=1))
    else:
        np.testing.assert_allclose(outs[0], -np.exp(x), rtol=1e-5)
