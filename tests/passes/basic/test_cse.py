from __future__ import annotations

import numpy as np
import pytest

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value, assert_structurally_equal
from passes.basic import CommonSubexpressionElimination


def f32(name: str, *shape: int) -> Value:
    return Value(name, TensorType(DType.FLOAT32, shape))


def run_cse(graph: Graph, **options: object) -> bool:
    result = CommonSubexpressionElimination(**options)(graph)
    assert result.graph is graph
    graph.verify()
    return result.modified


def const(graph: Graph, array: np.ndarray, name: str = "c") -> Value:
    return graph.add_constant(NumpyTensor(array), name)


def test_duplicates_and_their_users_merge_in_one_run(assert_same_numerics) -> None:
    before = Graph("main")
    x = before.add_input(f32("x", 2, 3))
    w1 = const(before, np.arange(6, dtype=np.float32).reshape(2, 3), "w1")
    w2 = const(before, np.arange(6, dtype=np.float32).reshape(2, 3), "w2")  # equal content
    a1 = before.add_node("Add", [x, w1])
    a2 = before.add_node("Add", [x, w2])
    r1 = before.add_node("Softmax", [a1.outputs[0]], attrs={"axis": 1})
    r2 = before.add_node("Softmax", [a2.outputs[0]], attrs={"axis": 1})
    out = before.add_node("Mul", [r1.outputs[0], r2.outputs[0]])
    before.add_output(out.outputs[0])
    original = before.clone()

    assert run_cse(before)

    expected = Graph("main")
    ex = expected.add_input(f32("x", 2, 3))
    ew = const(expected, np.arange(6, dtype=np.float32).reshape(2, 3), "w1")
    ea = expected.add_node("Add", [ex, ew])
    er = expected.add_node("Softmax", [ea.outputs[0]], attrs={"axis": 1})
    expected.add_output(expected.add_node("Mul", [er.outputs[0], er.outputs[0]]).outputs[0])
    assert_structurally_equal(before, expected)
    assert before.find_node(a1.name) is a1  # the first node is the one kept
    assert_same_numerics(original, before)
    assert not run_cse(before)


def test_different_attributes_or_input_order_do_not_merge() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3))
    y = graph.add_input(f32("y", 2, 3))
    nodes = [
        graph.add_node("Softmax", [x], attrs={"axis": 0}),
        graph.add_node("Softmax", [x], attrs={"axis": 1}),
        graph.add_node("Softmax", [x]),
        graph.add_node("Sub", [x, y]),
        graph.add_node("Sub", [y, x]),
        graph.add_node("Relu", [x], domain="custom"),
        graph.add_node("Relu", [x]),
    ]
    graph.set_outputs([n.outputs[0] for n in nodes])
    assert not run_cse(graph)
    assert len(graph) == 7


def test_attribute_order_and_tensor_attributes_compare_by_content() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 1, 1, 4, 4))
    kwargs = [
        {"kernel_shape": [2, 2], "strides": [2, 2]},
        {"strides": [2, 2], "kernel_shape": [2, 2]},
    ]
    pools = [graph.add_node("MaxPool", [x], attrs=kw) for kw in kwargs]
    consts = [
        graph.add_node("Constant", [], attrs={"value": NumpyTensor(np.array([1.0, 2.0], np.float32))}) for _ in range(2)
    ]
    graph.add_output(graph.add_node("Concat", [p.outputs[0] for p in pools], attrs={"axis": 0}).outputs[0])
    graph.add_output(graph.add_node("Add", [c.outputs[0] for c in consts]).outputs[0])
    assert run_cse(graph)
    assert [n.op_type for n in graph] == ["MaxPool", "Constant", "Concat", "Add"]


def test_random_and_side_effecting_nodes_never_merge() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    randoms = [graph.add_node("RandomNormalLike", [x]) for _ in range(2)]
    graph.set_outputs([r.outputs[0] for r in randoms])
    assert not run_cse(graph)


def test_nodes_with_subgraphs_never_merge() -> None:
    graph = Graph("main")
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = graph.add_input(f32("x", 2))
    ifs = []
    for _ in range(2):
        then_branch, else_branch = Graph("then"), Graph("else")
        then_branch.add_output(then_branch.add_node("Relu", [x]).outputs[0])
        else_branch.add_output(else_branch.add_node("Neg", [x]).outputs[0])
        ifs.append(graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch}))
    graph.set_outputs([n.outputs[0] for n in ifs])
    assert not run_cse(graph)


def test_duplicates_inside_a_subgraph_merge_there() -> None:
    graph = Graph("main")
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = graph.add_input(f32("x", 2))
    outer = graph.add_node("Relu", [x])
    then_branch, else_branch = Graph("then"), Graph("else")
    inner = [then_branch.add_node("Relu", [x], name=f"inner{i}") for i in range(2)]  # not merged with the outer one
    then_branch.add_output(then_branch.add_node("Add", [inner[0].outputs[0], inner[1].outputs[0]]).outputs[0])
    else_branch.add_output(outer.outputs[0])
    node = graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch})
    graph.add_output(node.outputs[0])
    assert run_cse(graph)
    assert [n.op_type for n in then_branch] == ["Relu", "Add"]
    assert then_branch.nodes[1].inputs == (inner[0].outputs[0],) * 2
    assert len(graph) == 2


def test_graph_output_duplicates_are_not_merged() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    first = graph.add_node("Relu", [x])
    second = graph.add_node("Relu", [x])
    graph.add_output(second.outputs[0])
    graph.add_output(first.outputs[0])
    assert not run_cse(graph)
    assert [v.name for v in graph.outputs] == [second.outputs[0].name, first.outputs[0].name]


def test_different_decisions_do_not_merge() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    a, b = graph.add_node("Relu", [x]), graph.add_node("Relu", [x])
    a.device, b.device = "gpu:0", "gpu:1"
    graph.add_output(graph.add_node("Add", [a.outputs[0], b.outputs[0]]).outputs[0])
    assert not run_cse(graph)
    b.device = "gpu:0"
    assert run_cse(graph)


def test_constants_merge_only_when_equal_and_small_enough() -> None:
    graph = Graph("main")
    values = [
        const(graph, np.ones(4, np.float32), "a"),
        const(graph, np.ones(4, np.float32), "b"),  # merges into a
        const(graph, np.ones(4, np.float64), "c"),  # other dtype
        const(graph, np.ones((2, 2), np.float32), "d"),  # other shape
        const(graph, np.full(4, 2.0, np.float32), "e"),  # other content
        const(graph, np.zeros(1000, np.float32), "big1"),
        const(graph, np.zeros(1000, np.float32), "big2"),  # over the limit below
    ]
    overridable = Value("f", const=NumpyTensor(np.ones(4, np.float32)))
    graph.add_initializer(overridable)
    graph.add_input(overridable)  # a graph input: a caller may feed another value
    users = [graph.add_node("Identity", [v]) for v in [*values, overridable]]
    graph.set_outputs([u.outputs[0] for u in users])

    assert run_cse(graph, constant_size_limit=1024)
    assert sorted(graph.initializers) == ["a", "big1", "big2", "c", "d", "e", "f"]
    assert users[1].inputs[0] is values[0]

    assert run_cse(graph, constant_size_limit=4000)
    assert "big2" not in graph.initializers and users[6].inputs[0] is values[5]


def test_merge_constants_option() -> None:
    graph = Graph("main")
    a = const(graph, np.ones(2, np.float32), "a")
    b = const(graph, np.ones(2, np.float32), "b")
    graph.add_output(graph.add_node("Add", [a, b]).outputs[0])
    assert not run_cse(graph, merge_constants=False)
    assert run_cse(graph)
    assert graph.nodes[0].inputs == (a, a)


@pytest.mark.parametrize("seed", [0, 1])
def test_numerics_on_a_diamond(assert_same_numerics, seed: int) -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 3, 4))
    w = const(graph, np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "w")
    branches = []
    for _ in range(3):
        mm = graph.add_node("MatMul", [x, w])
        branches.append(graph.add_node("Tanh", [mm.outputs[0]]))
    total = graph.add_node("Sum", [b.outputs[0] for b in branches])
    graph.add_output(total.outputs[0])
    original = graph.clone()
    assert run_cse(graph)
    assert [n.op_type for n in graph] == ["MatMul", "Tanh", "Sum"]
    assert_same_numerics(original, graph, seed=seed)
