"""`fuse` and `fuse-by-priority`: Before/Expected graphs, legality on random graphs, numerics."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import graph_ir
from cost_model.decisions import Decisions
from graph_ir.order import node_order
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem, simulate
from graph_ir import DType, Graph, NumpyTensor, TensorType, Value, assert_structurally_equal
from graph_ir.io.onnx_import import import_onnx
from compiler_opt.workloads.synthetic import random_onnx_dag
from passes import PassError, run_pipeline
from passes.fusion import PRIORITY_META_KEY, Fuse, FuseByPriority, fuse_by_priority

F32 = DType.FLOAT32


class Build:
    def __init__(self) -> None:
        self.graph = Graph("main")

    def input(self, name: str, shape: tuple[int, ...] = (4, 8)) -> Value:
        return self.graph.add_input(Value(name, TensorType(F32, shape)))

    def const(self, name: str, shape: tuple[int, ...]) -> Value:
        return self.graph.add_initializer(Value(name, const=NumpyTensor(np.ones(shape, np.float32))))

    def op(self, op_type: str, inputs: list[Value], name: str, shape: tuple[int, ...] = (4, 8), **kw) -> Value:  # type: ignore[no-untyped-def]
        node = self.graph.add_node(op_type, inputs, name=name, **kw)
        node.outputs[0].name = name
        node.outputs[0].type = TensorType(F32, shape)
        return node.outputs[0]

    def group(self, groups: dict[str, int | None]) -> Graph:
        for node in self.graph:
            node.fusion_group = groups.get(node.name)
        return self.graph


def mlp_and_reduction(groups: dict[str, int | None] | None = None) -> Graph:
    b = Build()
    x = b.input("x")
    w = b.const("w", (8, 8))
    bias = b.const("bias", (8,))
    h = b.op("MatMul", [x, w], "mm")
    h = b.op("Add", [h, bias], "bias_add")
    h = b.op("Relu", [h], "relu")
    n = b.op("Neg", [h], "neg")
    r = b.op("ReduceSum", [n], "sum", shape=(4, 1), attrs={"keepdims": 1})
    e = b.op("Exp", [r], "exp", shape=(4, 1))
    b.graph.set_outputs([h, e])
    return b.group(groups or {})


def test_loop_and_epilogue_fusion() -> None:
    graph = mlp_and_reduction()
    assert Fuse()(graph).modified
    graph.verify()
    # The matmul's epilogue (its chain of elementwise sole users) comes first, so neg joins it;
    # the reduction then cannot pull neg in (one hero per group) and takes exp as its epilogue.
    expected = mlp_and_reduction({"mm": 0, "bias_add": 0, "relu": 0, "neg": 0, "sum": 1, "exp": 1})
    assert_structurally_equal(graph, expected)
    assert not Fuse()(graph).modified


def test_never_across_devices() -> None:
    b = Build()
    v = b.input("x")
    for i, device in enumerate(["gpu0", "gpu0", "gpu1", "gpu1", "gpu0"]):
        v = b.op("Tanh", [v], f"t{i}")
        b.graph.nodes[-1].device = device
    b.graph.add_output(v)
    Fuse()(b.graph)
    groups = [n.fusion_group for n in b.graph]
    assert groups == [0, 0, 1, 1, None]


def test_a_merge_that_would_close_a_cycle_is_refused() -> None:
    b = Build()
    x = b.input("x")
    axis = b.graph.add_initializer(Value("axis", const=NumpyTensor(np.array(0, np.int64))))
    a = b.op("Exp", [x], "a")
    scan = b.op("CumSum", [a, axis], "scan")  # never fused; a -> scan -> c and a -> c
    c = b.op("Add", [a, scan], "c")
    d = b.op("Tanh", [c], "d")
    b.graph.add_output(d)
    Fuse()(b.graph)
    by_name = {n.name: n.fusion_group for n in b.graph}
    assert by_name["scan"] is None
    assert by_name["a"] is None  # {a, c} would have to run before and after scan
    assert by_name["c"] == by_name["d"] is not None


def test_max_nodes_bounds_group_size() -> None:
    b = Build()
    v = b.input("x")
    for i in range(10):
        v = b.op("Tanh", [v], f"t{i}")
    b.graph.add_output(v)
    Fuse(max_nodes=3)(b.graph)
    sizes = np.bincount([n.fusion_group for n in b.graph if n.fusion_group is not None])
    assert sizes.max() == 3 and sizes.sum() >= 9


def test_duplication_clones_a_cheap_producer_for_each_user(assert_same_numerics) -> None:  # type: ignore[no-untyped-def]
    b = Build()
    x = b.input("x")
    p = b.op("Exp", [x], "p")
    r = b.op("Relu", [p], "r")
    t = b.op("Tanh", [p], "t")
    b.graph.set_outputs([r, t])
    before = b.graph.clone()
    assert Fuse(max_duplicates=1)(b.graph).modified
    b.graph.verify()
    assert [n.name for n in b.graph] == ["p", "p.dup1", "r", "t"]
    groups = {n.name: n.fusion_group for n in b.graph}
    assert groups["p"] == groups["r"] and groups["p.dup1"] == groups["t"] and groups["r"] != groups["t"]
    assert_same_numerics(before, b.graph)
    # Without duplication both users pull p in: one multi-output kernel of three nodes.
    plain = before.clone()
    Fuse()(plain)
    assert [n.fusion_group for n in plain] == [0, 0, 0]


def quotient_is_acyclic(graph: Graph) -> bool:
    nodes = node_order(graph)
    key = {n: (n.fusion_group, n.device) if n.fusion_group is not None else ("single", i) for i, n in enumerate(nodes)}
    dag = nx.DiGraph()
    dag.add_nodes_from(set(key.values()))
    for n in nodes:
        for v in n.inputs:
            if v is not None and v.producer in key and key[v.producer] != key[n]:
                dag.add_edge(key[v.producer], key[n])
    return nx.is_directed_acyclic_graph(dag)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method", ["fuse", "fuse-by-priority"])
def test_random_graphs_and_placements_fuse_legally(seed: int, method: str) -> None:
    graph = import_onnx(random_onnx_dag(300, seed=seed))
    rng = np.random.default_rng(seed)
    for node in graph:
        node.device = f"gpu{rng.integers(0, 2)}"
    if method == "fuse":
        Fuse(max_nodes=8, max_duplicates=2)(graph)
    else:
        FuseByPriority(priorities=tuple(rng.random(len(graph)).tolist()), max_nodes=8)(graph)
    graph.verify()
    members: dict[int, list] = {}
    for node in graph:
        if node.fusion_group is not None:
            members.setdefault(node.fusion_group, []).append(node)
    assert members, "nothing fused"
    for group in members.values():
        assert len({n.device for n in group}) == 1
        assert 2 <= len(group) <= 8
    assert quotient_is_acyclic(graph)
    topo = load_topology("2xV100")
    simulate(SimulationProblem.from_graph(graph, topo), Decisions.from_graph(graph, topo))  # raises on a cycle


def test_fusion_shortens_the_simulated_step() -> None:
    graph = graph_ir.load("examples/small_cnn.onnx")
    topo = load_topology("1xV100")
    before = simulate(SimulationProblem.from_graph(graph, topo), Decisions.from_graph(graph, topo)).step_time_s
    run_pipeline(graph, "fuse")
    after = simulate(SimulationProblem.from_graph(graph, topo), Decisions.from_graph(graph, topo)).step_time_s
    assert after < 0.8 * before


def elementwise_chain(length: int = 4) -> Graph:
    b = Build()
    v = b.input("x")
    for i in range(length):
        v = b.op("Tanh", [v], f"t{i}")
    b.graph.add_output(v)
    return b.graph


def groups_of(graph: Graph) -> list[int | None]:
    return [n.fusion_group for n in graph]


def test_priorities_decide_which_legal_merges_happen_first() -> None:
    first = elementwise_chain()
    fuse_by_priority(first, [1.0, 2.0, 3.0, 4.0], max_nodes=2)  # t2 -> t3 first, then t0 -> t1
    assert groups_of(first) == [0, 0, 1, 1]
    second = elementwise_chain()
    fuse_by_priority(second, [1.0, 4.0, 3.0, 0.5], max_nodes=2)  # t1 -> t2 first; t0, t3 stay
    assert groups_of(second) == [None, 0, 0, None]


def test_priorities_at_or_below_the_threshold_start_no_merge() -> None:
    graph = elementwise_chain()
    assert not FuseByPriority(priorities=(0.0, 0.0, 0.0, 0.0))(graph).modified
    assert groups_of(graph) == [None] * 4


def test_priorities_come_from_node_meta_by_default() -> None:
    graph = elementwise_chain()
    for node, p in zip(graph, [0.0, 5.0, 0.0, 0.0]):
        node.meta[PRIORITY_META_KEY] = p
    assert run_pipeline(graph, "fuse-by-priority").modified
    assert groups_of(graph) == [None, 0, 0, None]


def test_priorities_of_the_wrong_length_are_an_error() -> None:
    with pytest.raises(PassError, match="got 3 priorities for 4 nodes"):
        FuseByPriority(priorities=(1.0, 1.0, 1.0))(elementwise_chain())
