"""The simulator against timelines worked out by hand.

Devices run 1 GFLOP/s with 1 GB/s memory and a 1 us launch, so a Relu on 1000 f32 values
(1000 FLOPs, 8000 bytes) takes 8 + 1 = 9 us and an Add of two of them 12 + 1 = 13 us. Links carry
1 GB/s with 1 us latency: one 4000-byte value crosses in 1 + 4 = 5 us.
"""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.decisions import DecisionError, Decisions
from cost_model.devices import DeviceSpec, Link, Topology, load_topology
from cost_model.roofline import group_time
from cost_model.simulator import SimulationProblem, device_loads, simulate, throughput_objective
from graph_ir import DType, Graph, Node, NumpyTensor, TensorType, Value

F32 = DType.FLOAT32
US = 1e-6
RELU = 9 * US
ADD = 13 * US
HOP = 5 * US


def device(name: str, memory: float = 1e9) -> DeviceSpec:
    return DeviceSpec(name, "gpu", {"fp32": 1e9}, mem_bandwidth=1e9, memory_bytes=memory, launch_overhead_s=US)


def topology(count: int = 2, *, bandwidth: float = 1e9, latency: float = US, memory: float = 1e9, ring: bool = False) -> Topology:
    devices = [device(f"d{i}", memory) for i in range(count)]
    pairs = [(i, i + 1) for i in range(count - 1)] if ring else [(i, j) for i in range(count) for j in range(i + 1, count)]
    if ring and count > 2:
        pairs.append((count - 1, 0))
    links = []
    for i, j in pairs:
        links += [Link(f"d{i}", f"d{j}", bandwidth, latency), Link(f"d{j}", f"d{i}", bandwidth, latency)]
    return Topology("test", devices, links)


class Builder:
    """Small typed graphs: every value is f32[size]."""

    def __init__(self, size: int = 1000) -> None:
        self.graph = Graph()
        self.size = size

    def input(self, name: str) -> Value:
        return self.graph.add_input(Value(name, TensorType(F32, (self.size,))))

    def const(self, name: str) -> Value:
        return self.graph.add_initializer(Value(name, const=NumpyTensor(np.zeros(self.size, np.float32))))

    def op(self, op_type: str, inputs: list[Value], name: str) -> Value:
        node = self.graph.add_node(op_type, inputs, name=name)
        node.outputs[0].type = TensorType(F32, (self.size,))
        return node.outputs[0]

    def node(self, name: str) -> Node:
        found = self.graph.find_node(name)
        assert found is not None
        return found


def decide(problem: SimulationProblem, device: list[int], group: list[int] | None = None, priority: list[float] | None = None) -> Decisions:
    n = problem.num_nodes
    return Decisions(
        np.asarray(device), np.asarray(group if group is not None else [-1] * n), np.asarray(priority if priority is not None else [0.0] * n)
    )


def spans(result, names: list[str]) -> dict[str, tuple[float, float]]:
    index = {node.name: i for i, node in enumerate(result.problem.nodes)}
    return {name: (result.node_start[index[name]], result.node_end[index[name]]) for name in names}


def test_chain_on_one_device_is_the_sum_of_roofline_times() -> None:
    b = Builder()
    v = b.input("x")
    for i in range(3):
        v = b.op("Relu", [v], f"r{i}")
    b.graph.add_output(v)
    problem = SimulationProblem.from_graph(b.graph, topology(1))
    result = simulate(problem, decide(problem, [0, 0, 0]))
    assert result.step_time_s == pytest.approx(3 * RELU, rel=1e-12)
    assert result.busy_s.tolist() == pytest.approx([3 * RELU], rel=1e-12)
    assert result.bytes_moved == 0
    assert spans(result, ["r1"])["r1"] == pytest.approx((RELU, 2 * RELU), rel=1e-12)


def diamond() -> Builder:
    b = Builder()
    x = b.input("x")
    a = b.op("Relu", [x], "A")
    left = b.op("Relu", [a], "B")
    right = b.op("Relu", [a], "C")
    b.graph.add_output(b.op("Add", [left, right], "D"))
    return b


def test_diamond_on_two_devices_runs_branches_in_parallel() -> None:
    problem = SimulationProblem.from_graph(diamond().graph, topology(2))
    result = simulate(problem, decide(problem, [0, 0, 1, 0]))
    # A [0, 9] on d0; B [9, 18] on d0; A's output crosses [9, 14]; C [14, 23] on d1;
    # C's output crosses back [23, 28]; D waits for it: [28, 41].
    got = spans(result, ["A", "B", "C", "D"])
    assert got["A"] == pytest.approx((0, RELU), rel=1e-12)
    assert got["B"] == pytest.approx((RELU, 2 * RELU), rel=1e-12)
    assert got["C"] == pytest.approx((RELU + HOP, 2 * RELU + HOP), rel=1e-12)
    assert got["D"] == pytest.approx((2 * RELU + 2 * HOP, 2 * RELU + 2 * HOP + ADD), rel=1e-12)
    assert result.step_time_s == pytest.approx(41 * US, rel=1e-12)
    assert result.bytes_moved == 8000
    assert result.busy_s.tolist() == pytest.approx([2 * RELU + ADD, RELU], rel=1e-12)
    assert result.link_busy_s.sum() == pytest.approx(2 * HOP, rel=1e-12)
    # All on one device: 9 + 9 + 9 + 13 = 40 us, no transfers.
    single = simulate(problem, decide(problem, [0, 0, 0, 0]))
    assert single.step_time_s == pytest.approx(40 * US, rel=1e-12)


def test_throughput_objective_counts_compute_and_both_ends_of_transfers() -> None:
    problem = SimulationProblem.from_graph(diamond().graph, topology(2))
    decisions = decide(problem, [0, 0, 1, 0])
    # d0: A + B + D = 31 us, sends one value and receives one: + 10 us. d1: C 9 us + 10 us.
    assert device_loads(problem, decisions).tolist() == pytest.approx([41 * US, 19 * US], rel=1e-12)
    assert throughput_objective(problem, decisions) == pytest.approx(41 * US, rel=1e-12)


def test_slow_link_adds_latency_plus_bytes_over_bandwidth_exactly() -> None:
    b = Builder()
    a = b.op("Relu", [b.input("x")], "A")
    b.graph.add_output(b.op("Relu", [a], "B"))
    problem = SimulationProblem.from_graph(b.graph, topology(2, bandwidth=1e6, latency=1e-3))
    same = simulate(problem, decide(problem, [0, 0]))
    split = simulate(problem, decide(problem, [0, 1]))
    transfer = 1e-3 + 4000 / 1e6
    assert split.step_time_s - same.step_time_s == pytest.approx(transfer, rel=1e-12)
    assert split.step_time_s == pytest.approx(2 * RELU + transfer, rel=1e-12)
    (event,) = [e for e in split.events() if e.kind == "transfer"]
    assert (event.resource, event.start_s, event.end_s) == ("d0->d1", pytest.approx(RELU), pytest.approx(RELU + transfer))


def test_ring_transfer_is_store_and_forward_over_the_hops() -> None:
    b = Builder()
    a = b.op("Relu", [b.input("x")], "A")
    b.graph.add_output(b.op("Relu", [a], "B"))
    problem = SimulationProblem.from_graph(b.graph, topology(5, ring=True))
    # d0 -> d2 is two hops on a 5-ring; d0 -> d4 one hop (the ring is closed).
    assert simulate(problem, decide(problem, [0, 2])).step_time_s == pytest.approx(2 * RELU + 2 * HOP, rel=1e-12)
    result = simulate(problem, decide(problem, [0, 4]))
    assert result.step_time_s == pytest.approx(2 * RELU + HOP, rel=1e-12)


def test_value_is_sent_once_per_destination_and_copy_engine_serialises() -> None:
    b = Builder()
    x, y = b.input("x"), b.input("y")
    b.graph.add_output(b.op("Add", [x, y], "P"))  # first consumer: x and y live on P's device
    b.graph.add_output(b.op("Add", [x, y], "Q"))
    b.graph.add_output(b.op("Relu", [x], "R"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    result = simulate(problem, decide(problem, [0, 1, 1]))
    # x and y both cross d0->d1 from t=0, one after the other: [0, 5] and [5, 10]; x once only.
    assert result.bytes_moved == 8000
    transfers = sorted((e.name, e.start_s, e.end_s) for e in result.events() if e.kind == "transfer")
    assert transfers == [("x", 0.0, pytest.approx(HOP)), ("y", pytest.approx(HOP), pytest.approx(2 * HOP))]
    got = spans(result, ["P", "Q", "R"])
    assert got["P"] == pytest.approx((0, ADD), rel=1e-12)
    # R needs only x (ready at 5 us) and goes before Q, which waits for y (10 us).
    assert got["R"] == pytest.approx((HOP, HOP + RELU), rel=1e-12)
    assert got["Q"] == pytest.approx((HOP + RELU, HOP + RELU + ADD), rel=1e-12)


def test_graph_input_lives_on_its_first_consumers_device() -> None:
    b = Builder()
    x = b.input("x")
    b.graph.add_output(b.op("Relu", [x], "first"))
    b.graph.add_output(b.op("Relu", [x], "second"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    result = simulate(problem, decide(problem, [1, 0]))
    (event,) = [e for e in result.events() if e.kind == "transfer"]
    assert event.resource == "d1->d0" and event.start_s == 0.0
    assert result.step_time_s == pytest.approx(HOP + RELU, rel=1e-12)


def test_constants_never_move() -> None:
    b = Builder()
    w = b.const("w")
    a = b.op("Mul", [b.input("x"), w], "A")
    b.graph.add_output(b.op("Mul", [a, w], "B"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    result = simulate(problem, decide(problem, [0, 1]))
    assert result.bytes_moved == 4000  # only A's output
    # w is resident on both devices for the whole step.
    assert result.peak_memory_bytes.tolist() == [4000 + 4000 + 4000, 4000 + 4000 + 4000]


def test_fusion_removes_a_launch_and_the_intermediate_traffic() -> None:
    b = Builder()
    v = b.op("Relu", [b.input("x")], "r0")
    v = b.op("Relu", [v], "r1")
    b.graph.add_output(b.op("Relu", [v], "r2"))
    problem = SimulationProblem.from_graph(b.graph, topology(1))
    plain = simulate(problem, decide(problem, [0, 0, 0]))
    fused = simulate(problem, decide(problem, [0, 0, 0], group=[7, 7, -1]))
    # r0+r1 fused: 2000 FLOPs (2 us) vs 4000 in + 4000 out (8 us) + one launch = 9 us, then r2 9 us.
    assert plain.step_time_s == pytest.approx(27 * US, rel=1e-12)
    assert fused.step_time_s == pytest.approx(18 * US, rel=1e-12)
    assert fused.tasks.num_kernels == 2
    assert fused.tasks.kernel_duration[0] == pytest.approx(group_time(problem.nodes[:2], problem.topology.devices[0]))
    names = [e.name for e in fused.events()]
    assert names == ["r0 (+1 fused)", "r2"]


def test_fused_intermediates_never_reach_memory() -> None:
    b = Builder()
    a = b.op("Relu", [b.input("x")], "a")
    c = b.op("Relu", [a], "b")
    b.graph.add_output(b.op("Add", [a, c], "c"))
    problem = SimulationProblem.from_graph(b.graph, topology(1))
    # Unfused, c holds a, b and its output at once: 12000 bytes; 9 + 9 + 13 us.
    plain = simulate(problem, decide(problem, [0, 0, 0]))
    assert plain.peak_memory_bytes.tolist() == [12000]
    assert plain.step_time_s == pytest.approx(31 * US, rel=1e-12)
    # Fused, only x and c's output: 8000 bytes; 3000 FLOPs (3 us) vs 8000 bytes (8 us) + 1 us.
    fused = simulate(problem, decide(problem, [0, 0, 0], group=[0, 0, 0]))
    assert fused.peak_memory_bytes.tolist() == [8000]
    assert fused.step_time_s == pytest.approx(9 * US, rel=1e-12)


def test_same_group_id_on_two_devices_is_two_kernels() -> None:
    b = Builder()
    v = b.op("Relu", [b.input("x")], "r0")
    b.graph.add_output(b.op("Relu", [v], "r1"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    result = simulate(problem, decide(problem, [0, 1], group=[3, 3]))
    assert result.tasks.num_kernels == 2
    assert result.step_time_s == pytest.approx(2 * RELU + HOP, rel=1e-12)


def test_fusion_cycle_is_a_decision_error() -> None:
    b = Builder()
    a = b.op("Relu", [b.input("x")], "a")
    mid = b.op("Relu", [a], "mid")
    b.graph.add_output(b.op("Add", [a, mid], "c"))
    problem = SimulationProblem.from_graph(b.graph, topology(1))
    with pytest.raises(DecisionError, match="cycle") as info:
        simulate(problem, decide(problem, [0, 0, 0], group=[1, -1, 1]))
    assert "a, c" in str(info.value)


def test_peak_memory_and_oom() -> None:
    b = Builder(size=100_000)  # 400 kB per value
    w = b.const("w")
    v = b.op("Mul", [b.input("x"), w], "m")
    b.graph.add_output(b.op("Relu", [v], "r"))
    ok = SimulationProblem.from_graph(b.graph, topology(1, memory=1.2e6))
    small = SimulationProblem.from_graph(b.graph, topology(1, memory=1.2e6 - 1))
    # During m: w (whole step) + x + m's output = 1.2 MB; during r: w + m + r = 1.2 MB.
    result = simulate(ok, decide(ok, [0, 0]))
    assert result.peak_memory_bytes.tolist() == [1_200_000]
    assert not result.any_oom
    tight = simulate(small, decide(small, [0, 0]))
    assert tight.oom.tolist() == [True] and tight.any_oom
    assert "OOM" in tight.summary()


def test_destination_copy_is_held_until_its_last_consumer_there() -> None:
    b = Builder(size=100_000)
    a = b.op("Relu", [b.input("x")], "A")
    c1 = b.op("Relu", [a], "C1")
    b.graph.add_output(b.op("Add", [a, c1], "C2"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    result = simulate(problem, decide(problem, [0, 1, 1]))
    # d1 holds the copy of A's output from its transfer's start through C2, plus C1 and C2's outputs.
    assert result.peak_memory_bytes.tolist() == [800_000, 1_200_000]


def test_priority_changes_the_order_and_the_step_time() -> None:
    b = Builder()
    x = b.input("x")
    feeder = b.op("Relu", [x], "feeder")  # its output goes to d1
    b.graph.add_output(b.op("Relu", [x], "local"))
    b.graph.add_output(b.op("Relu", [feeder], "remote"))
    problem = SimulationProblem.from_graph(b.graph, topology(2))
    # Equal priorities: topological order, feeder first: feeder [0, 9], local [9, 18],
    # transfer [9, 14], remote [14, 23].
    default = simulate(problem, decide(problem, [0, 0, 1]))
    assert spans(default, ["local"])["local"] == pytest.approx((RELU, 2 * RELU), rel=1e-12)
    assert default.step_time_s == pytest.approx(2 * RELU + HOP, rel=1e-12)
    # local first: feeder [9, 18], transfer [18, 23], remote [23, 32].
    swapped = simulate(problem, decide(problem, [0, 0, 1], priority=[0.0, 1.0, 0.0]))
    got = spans(swapped, ["local", "feeder"])
    assert got["local"] == pytest.approx((0, RELU), rel=1e-12)
    assert got["feeder"] == pytest.approx((RELU, 2 * RELU), rel=1e-12)
    assert swapped.step_time_s == pytest.approx(3 * RELU + HOP, rel=1e-12)


def test_same_decisions_give_identical_results() -> None:
    rng = np.random.default_rng(0)
    b = Builder()
    values = [b.input("x"), b.input("y")]
    for i in range(60):
        picks = rng.choice(len(values), size=2)
        op = "Add" if i % 3 else "Relu"
        inputs = [values[picks[0]], values[picks[1]]] if op == "Add" else [values[picks[0]]]
        values.append(b.op(op, inputs, f"n{i}"))
    b.graph.add_output(values[-1])
    problem = SimulationProblem.from_graph(b.graph, topology(3))
    decisions = decide(problem, rng.integers(0, 3, 60).tolist(), priority=rng.integers(0, 3, 60).astype(float).tolist())
    first, second = simulate(problem, decisions), simulate(problem, decisions.copy())
    assert first.step_time_s == second.step_time_s
    assert np.array_equal(first.task_start, second.task_start) and np.array_equal(first.task_end, second.task_end)
    assert np.array_equal(first.peak_memory_bytes, second.peak_memory_bytes)
    assert first.events() == second.events()
    # A fresh problem from the same graph answers the same.
    again = simulate(SimulationProblem.from_graph(b.graph, topology(3)), decisions)
    assert np.array_equal(first.task_end, again.task_end)


def test_unreachable_device_pair_is_a_decision_error() -> None:
    b = Builder()
    a = b.op("Relu", [b.input("x")], "A")
    b.graph.add_output(b.op("Relu", [a], "B"))
    problem = SimulationProblem.from_graph(b.graph, Topology("islands", [device("d0"), device("d1")]))
    with pytest.raises(DecisionError, match="no route"):
        simulate(problem, decide(problem, [0, 1]))
    with pytest.raises(DecisionError, match="out of range"):
        simulate(problem, decide(problem, [0, 2]))


def test_a_graph_without_computing_nodes_simulates() -> None:
    # XLA's own HLO tests have modules whose outputs are their parameters (no instruction runs).
    from onnx import TensorProto, helper

    from graph_ir.io.onnx_import import import_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    graph = import_onnx(helper.make_model(helper.make_graph([], "passthrough", [x], [x])))
    problem = SimulationProblem.from_graph(graph, load_topology("2xV100"))
    assert problem.num_nodes == 0
    result = simulate(problem, Decisions.default(0, device=1))
    assert result.step_time_s == 0.0
