"""Lower bounds: hand-computed values, tightness on easy cases, and a property test that the bound
never exceeds the simulated step time over thousands of random DAGs and decisions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cost_model.decisions import DecisionError, Decisions
from cost_model.devices import DeviceSpec, Link, Topology, load_topology
from cost_model.lower_bound import (
    critical_path_bound,
    memory_feasible,
    step_time_lower_bound,
    unavoidable_node_bytes,
    work_bound,
)
from cost_model.simulator import SimulationProblem, simulate
from graph_ir import DType, Graph, NumpyTensor, TensorType, Value
from test_simulator import RELU, US, Builder, decide, topology


def chain(length: int) -> Graph:
    b = Builder()
    v = b.input("x")
    for i in range(length):
        v = b.op("Relu", [v], f"r{i}")
    b.graph.add_output(v)
    return b.graph


def test_chain_bound_is_tight_without_fusion() -> None:
    problem = SimulationProblem.from_graph(chain(3), topology(1))
    step = simulate(problem, Decisions.default(3)).step_time_s
    assert step_time_lower_bound(problem, fusion=False) == pytest.approx(step, rel=1e-12) == pytest.approx(3 * RELU)


def test_chain_bound_with_fusion_matches_the_fully_fused_kernel() -> None:
    problem = SimulationProblem.from_graph(chain(3), topology(1))
    # Unavoidable: r0 reads x (4000 B), r2 writes the graph output (4000 B): 8 us; FLOPs 3 us;
    # plus one launch: 9 us, exactly the time of the three Relus fused into one kernel.
    assert unavoidable_node_bytes(problem).tolist() == [4000, 0, 4000]
    assert critical_path_bound(problem) == pytest.approx(9 * US, rel=1e-12)
    fused = simulate(problem, decide(problem, [0, 0, 0], group=[0, 0, 0]))
    assert fused.step_time_s == pytest.approx(9 * US, rel=1e-12)
    assert step_time_lower_bound(problem) == pytest.approx(9 * US, rel=1e-12)


def test_work_bound_on_identical_devices() -> None:
    b = Builder()
    x = b.input("x")
    for i in range(4):
        b.graph.add_output(b.op("Relu", [x], f"r{i}"))
    problem = SimulationProblem.from_graph(b.graph, topology(2, latency=0.0, bandwidth=1e18))
    # 4 x 9 us over two devices: 18 us; the critical path is only 9 us.
    assert work_bound(problem, fusion=False) == pytest.approx(18 * US, rel=1e-12)
    assert critical_path_bound(problem, fusion=False) == pytest.approx(9 * US, rel=1e-12)
    step = simulate(problem, decide(problem, [0, 0, 1, 1])).step_time_s
    assert step >= step_time_lower_bound(problem, fusion=False)


def test_work_bound_weights_heterogeneous_speeds() -> None:
    slow = DeviceSpec("slow", "gpu", {"fp32": 1e9}, 1e18, 1e9, 0.0)
    fast = DeviceSpec("fast", "gpu", {"fp32": 3e9}, 1e18, 1e9, 0.0)
    links = [Link("slow", "fast", 1e18, 0.0), Link("fast", "slow", 1e18, 0.0)]
    graph = Graph()
    w = graph.add_initializer(Value("w", const=NumpyTensor(np.ones((10, 10), np.float32))))
    for i in range(6):
        node = graph.add_node("MatMul", [w, w], name=f"m{i}")  # 2000 FLOPs each
        node.outputs[0].type = TensorType(DType.FLOAT32, (10, 10))
        graph.add_output(node.outputs[0])
    problem = SimulationProblem.from_graph(graph, Topology("hetero", [slow, fast], links))
    # Speeds = peak FLOP/s: 6 x 2000 FLOPs / (1 + 3) GFLOP/s = 3 us (a uniform split would claim 2/3 us).
    assert work_bound(problem, fusion=False) == pytest.approx(3 * US, rel=1e-9)
    best = simulate(problem, Decisions(np.array([0, 1, 1, 1, 1, 1]), np.full(6, -1), np.zeros(6)))
    assert best.step_time_s == pytest.approx(10 / 3 * US, rel=1e-9)
    assert best.step_time_s >= step_time_lower_bound(problem, fusion=False)


def test_memory_feasibility() -> None:
    b = Builder(size=100_000)  # 400 kB values
    w = b.const("w")
    b.graph.add_output(b.op("Mul", [b.input("x"), w], "m"))
    roomy = SimulationProblem.from_graph(b.graph, topology(2, memory=1.2e6))
    assert memory_feasible(roomy) and memory_feasible(roomy, fusion=False)
    tight = SimulationProblem.from_graph(b.graph, topology(2, memory=1e6))
    # Fused, m needs w, x and its output (1.2 MB) somewhere: no device holds that.
    check = memory_feasible(tight)
    assert not check and "node 'm' needs 1200000 bytes" in check.reasons[0]
    tiny = SimulationProblem.from_graph(b.graph, topology(2, memory=3e5))
    reasons = memory_feasible(tiny).reasons
    assert len(reasons) == 2 and "constant %w (400000 bytes) fits no device" in reasons[0]


# -- property: lower bound <= simulated step time ----------------------------------------------------
def _mixed_topology() -> Topology:
    cpu = load_topology("cpu").devices[0].renamed("cpu0")
    v100 = load_topology("v100").devices[0].renamed("gpu0")
    k80 = load_topology("k80").devices[0].renamed("gpu1")
    links = []
    for a, b, bw, lat in (("cpu0", "gpu0", 15.75e9, 1e-5), ("cpu0", "gpu1", 8e9, 2e-5), ("gpu0", "gpu1", 5e9, 3e-6)):
        links += [Link(a, b, bw, lat), Link(b, a, bw, lat)]
    return Topology("mixed", [cpu, v100, k80], links)


TOPOLOGIES = [_mixed_topology(), load_topology("2xK80"), load_topology("mcm36-ring"), topology(3, ring=True)]
DTYPES = [DType.FLOAT32, DType.FLOAT16, DType.INT8]


def random_graph(rng: np.random.Generator, count: int) -> Graph:
    graph = Graph()
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    values = [graph.add_input(Value("x", TensorType(dtype, (int(rng.integers(1, 5000)),))))]
    if rng.random() < 0.7:
        size = int(rng.integers(1, 40))
        values.append(graph.add_initializer(Value("w", const=NumpyTensor(np.zeros((size, size), dtype.numpy)))))
    for i in range(count):
        op = ("Relu", "Add", "MatMul", "Mul")[int(rng.integers(4))]
        arity = 1 if op == "Relu" else 2
        inputs = [values[int(j)] for j in rng.integers(0, len(values), size=arity)]
        node = graph.add_node(op, inputs, name=f"n{i}")
        if op == "MatMul":
            m, k, n = (int(s) for s in rng.integers(1, 64, size=3))
            shape: tuple[int, ...] = (m, n)
            for value in inputs:  # give MatMul operands 2-D shapes it can count
                if value.producer is not None and rng.random() < 0.5:
                    value.type = TensorType(dtype, (m, k))
        else:
            shape = (int(rng.integers(1, 100_000)),)
        node.outputs[0].type = TensorType(dtype, shape)
        values.append(node.outputs[0])
    for node in graph:
        if not node.outputs[0].uses or rng.random() < 0.2:
            graph.add_output(node.outputs[0])
    return graph


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 14),
    topology_index=st.integers(0, len(TOPOLOGIES) - 1),
    fusion_rate=st.sampled_from([0.0, 0.0, 0.3, 0.8]),
)
def test_lower_bound_never_exceeds_simulated_step_time(seed: int, count: int, topology_index: int, fusion_rate: float) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, count)
    topo = TOPOLOGIES[topology_index]
    problem = SimulationProblem.from_graph(graph, topo)
    devices = rng.integers(0, min(topo.num_devices, 4), size=count)
    groups = np.where(rng.random(count) < fusion_rate, rng.integers(0, 3, size=count), -1)
    decisions = Decisions(devices, groups, rng.integers(-2, 3, size=count).astype(float))
    try:
        result = simulate(problem, decisions)
    except DecisionError as err:
        assert "cycle" in str(err)  # only fusion cycles may be refused
        return
    assert step_time_lower_bound(problem) <= result.step_time_s + 1e-12
    if (groups < 0).all():
        assert step_time_lower_bound(problem, fusion=False) <= result.step_time_s + 1e-12
    # Sanity of the result itself.
    assert result.step_time_s >= result.tasks.kernel_duration.max() - 1e-15
    assert np.all(result.task_end >= result.task_start)
