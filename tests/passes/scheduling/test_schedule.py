"""`schedule`: priorities per strategy, checked against the simulator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import graph_ir
from cost_model.decisions import Decisions
from cost_model.devices import DeviceSpec, Link, Topology
from cost_model.simulator import SimulationProblem, simulate
from graph_ir import DType, Graph, TensorType, Value, assert_structurally_equal
from passes import PassError, run_pipeline
from passes.scheduling import Schedule, memory_order, sequential_peak_bytes

F32 = DType.FLOAT32


def op(graph: Graph, op_type: str, inputs: list[Value], name: str, size: int, device: str | None = None) -> Value:
    node = graph.add_node(op_type, inputs, name=name)
    node.outputs[0].name = name
    node.outputs[0].type = TensorType(F32, (size,))
    node.device = device
    return node.outputs[0]


def small_topology(count: int = 2) -> Topology:
    devices = [DeviceSpec(f"d{i}", "gpu", {"fp32": 1e9}, mem_bandwidth=1e9, memory_bytes=1e9, launch_overhead_s=1e-6) for i in range(count)]
    links = [Link(f"d{a}", f"d{b}", 1e9, 1e-6) for a, b in itertools.permutations(range(count), 2)]
    return Topology("test", devices, links)


def three_nodes(priorities: list[float] | None = None) -> Graph:
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(F32, (4,))))
    a = op(graph, "Relu", [x], "a", 4)
    b = op(graph, "Neg", [a], "b", 4)
    c = op(graph, "Add", [a, b], "c", 4)
    graph.add_output(c)
    for node, p in zip(graph, priorities or []):
        node.priority = p
    return graph


def test_topological_strategy_numbers_nodes_in_graph_order() -> None:
    graph = three_nodes()
    assert Schedule(strategy="topological")(graph).modified
    assert_structurally_equal(graph, three_nodes([3.0, 2.0, 1.0]))
    assert not Schedule(strategy="topological")(graph).modified


def critical_vs_light() -> Graph:
    """d0 runs `light` (first in node order) and `heavy`; heavy feeds a long chain on d1."""
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(F32, (1000,))))
    op(graph, "Tanh", [x], "light", 50_000, "d0")
    v = op(graph, "Tanh", [x], "heavy", 50_000, "d0")
    for i in range(4):
        v = op(graph, "Tanh", [v], f"chain{i}", 50_000, "d1")
    graph.set_outputs([graph.find_node("light").outputs[0], v])
    return graph


def step(graph: Graph, topology: Topology) -> float:
    problem = SimulationProblem.from_graph(graph, topology)
    return simulate(problem, Decisions.from_graph(graph, topology, nodes=problem.nodes)).step_time_s


def test_critical_path_first_beats_graph_order_when_it_matters(tmp_path) -> None:  # type: ignore[no-untyped-def]
    topo = small_topology()
    by_order, by_path = critical_vs_light(), critical_vs_light()
    # The pass takes a topology name or file; write this one out as YAML.
    spec = tmp_path / "two.yaml"
    spec.write_text(
        "topology:\n  name: two\n  devices:\n"
        + "".join(
            f"    - {{name: d{i}, kind: gpu, peak_flops: {{fp32: 1e9}}, mem_bandwidth: 1e9, memory: 1e9, launch_overhead: 1e-6}}\n"
            for i in range(2)
        )
        + "  links:\n    - {all_pairs: [d0, d1], bandwidth: 1e9, latency: 1e-6}\n"
    )
    Schedule(strategy="topological", devices=str(spec))(by_order)
    Schedule(strategy="critical-path", devices=str(spec))(by_path)
    heavy = by_path.find_node("heavy")
    light = by_path.find_node("light")
    assert heavy.priority > light.priority
    assert step(by_path, topo) < step(by_order, topo) - 1e-5


def branches_then_reductions(branches: int = 4, size: int = 100_000) -> Graph:
    """x -> big_i = Exp(x) for every branch, then small_i = ReduceSum(big_i), then Concat."""
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(F32, (size,))))
    bigs = [op(graph, "Exp", [x], f"big{i}", size) for i in range(branches)]
    smalls = [op(graph, "ReduceSum", [b], f"small{i}", 1) for i, b in enumerate(bigs)]
    graph.add_output(op(graph, "Concat", smalls, "out", branches))
    return graph


def test_memory_strategy_lowers_the_simulated_peak() -> None:
    topo = small_topology(1)
    plain, aware = branches_then_reductions(), branches_then_reductions()
    run_pipeline(plain, "schedule{strategy=topological,devices=1xV100}")
    run_pipeline(aware, "schedule{strategy=memory,devices=1xV100,reorder=true}")
    aware.verify()
    assert [n.name for n in aware][:4] == ["big0", "small0", "big1", "small1"]

    def peak(graph: Graph) -> int:
        problem = SimulationProblem.from_graph(graph, topo)
        return int(simulate(problem, Decisions.from_graph(graph, topo, nodes=problem.nodes)).peak_memory_bytes[0])

    # Graph order holds all four 400 kB branches at once; the memory order holds at most two.
    assert peak(plain) >= 400_000 * 5
    assert peak(aware) <= 400_000 * 3 + 100
    problem = SimulationProblem.from_graph(branches_then_reductions(), topo)
    assert sequential_peak_bytes(problem, memory_order(problem)) < sequential_peak_bytes(problem, list(range(problem.num_nodes)))


@pytest.mark.parametrize("strategy", ["topological", "critical-path", "memory"])
def test_every_strategy_gives_a_valid_reorder_on_a_real_model(strategy: str) -> None:
    graph = graph_ir.load("examples/small_cnn.onnx")
    run_pipeline(graph, f"single-device,schedule{{strategy={strategy},reorder=true}}")
    graph.verify()  # the new order is topological
    priorities = [n.priority for n in graph]
    assert all(p is not None and np.isfinite(p) for p in priorities)
    if strategy != "critical-path":
        assert priorities == sorted(priorities, reverse=True)


def test_unknown_strategy_is_an_error() -> None:
    with pytest.raises(PassError, match="strategy must be one of"):
        Schedule(strategy="fastest")
