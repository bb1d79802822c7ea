from __future__ import annotations

import pytest

from graph_ir import CycleError, DType, Graph, Node, TensorType, Value, assert_structurally_equal
from graph_ir.errors import TopologicalOrderError
from passes.basic import TopologicalSort


def f32(name: str) -> Value:
    return Value(name, TensorType(DType.FLOAT32, (2,)))


def scrambled() -> tuple[Graph, list[Node]]:
    """relu -> neg -> add(relu, neg), appended as add, neg, relu."""
    graph = Graph("main")
    x = graph.add_input(f32("x"))
    relu = Node("Relu", [x], name="relu")
    neg = Node("Neg", [relu.outputs[0]], name="neg")
    add = Node("Add", [relu.outputs[0], neg.outputs[0]], name="add")
    graph.extend([add, neg, relu])
    graph.add_output(add.outputs[0])
    return graph, [relu, neg, add]


def test_sorts_an_out_of_order_graph() -> None:
    graph, (relu, neg, add) = scrambled()
    with pytest.raises(TopologicalOrderError):
        graph.verify()
    assert TopologicalSort()(graph).modified
    graph.verify()
    assert graph.nodes == [relu, neg, add]

    expected = Graph("main")
    x = expected.add_input(f32("x"))
    r = expected.add_node("Relu", [x])
    n = expected.add_node("Neg", [r.outputs[0]])
    expected.add_output(expected.add_node("Add", [r.outputs[0], n.outputs[0]]).outputs[0])
    assert_structurally_equal(graph, expected)
    assert not TopologicalSort()(graph).modified


def test_independent_nodes_keep_their_order() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x"))
    nodes = [graph.add_node(op, [x]) for op in ("Exp", "Relu", "Neg", "Abs")]
    graph.set_outputs([n.outputs[0] for n in nodes])
    assert not TopologicalSort()(graph).modified
    assert graph.nodes == nodes


def test_subgraphs_are_sorted_too() -> None:
    graph = Graph("main")
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = graph.add_input(f32("x"))
    then_branch, else_branch = Graph("then"), Graph("else")
    first = Node("Relu", [x], name="first")
    second = Node("Neg", [first.outputs[0]], name="second")
    then_branch.extend([second, first])
    then_branch.add_output(second.outputs[0])
    else_branch.add_output(x)
    graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch})
    graph.add_output(graph.nodes[0].outputs[0])
    assert TopologicalSort()(graph).modified
    graph.verify()
    assert then_branch.nodes == [first, second]


def test_a_cycle_is_reported_with_the_pass_name() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x"))
    a = graph.add_node("Add", [x, x], name="a")
    b = graph.add_node("Neg", [a.outputs[0]], name="b")
    a.set_input(1, b.outputs[0])
    graph.add_output(b.outputs[0])
    with pytest.raises(CycleError) as info:
        TopologicalSort()(graph)
    message = str(info.value)
    assert "in pass 'topo-sort'" in message
    assert "has a cycle: a -> b -> a" in message or "has a cycle: b -> a -> b" in message
