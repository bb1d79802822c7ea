"""Use-def chains kept by the IR itself, node removal rules, ownership, and clone independence."""

from __future__ import annotations

import numpy as np
import pytest

from graph_ir import (
    Attr,
    AttrKind,
    DType,
    Graph,
    GraphIRError,
    Node,
    NumpyTensor,
    Shape,
    TensorType,
    Use,
    Value,
    assert_structurally_equal,
    structural_equal,
)

F32 = TensorType(DType.FLOAT32, Shape([2, 3]))


def small_graph() -> tuple[Graph, dict[str, object]]:
    """x, w -> add -> relu -> neg -> output; relu's output is also read by mul(relu, x)."""
    graph = Graph("small")
    x = graph.add_input(Value("x", F32))
    w = graph.add_constant(NumpyTensor(np.ones((2, 3), np.float32)), "w")
    add = graph.add_node("Add", [x, w], name="add")
    relu = graph.add_node("Relu", [add.outputs[0]], name="relu")
    neg = graph.add_node("Neg", [relu.outputs[0]], name="neg")
    mul = graph.add_node("Mul", [relu.outputs[0], x], name="mul")
    graph.add_output(neg.outputs[0])
    graph.add_output(mul.outputs[0])
    graph.verify()
    return graph, {"x": x, "w": w, "add": add, "relu": relu, "neg": neg, "mul": mul}


def uses_of(value: Value) -> list[tuple[str, int]]:
    return [(use.node.name, use.index) for use in value.uses]


def test_uses_are_recorded_on_construction() -> None:
    graph, n = small_graph()
    assert uses_of(n["x"]) == [("add", 0), ("mul", 1)]
    assert uses_of(n["relu"].outputs[0]) == [("neg", 0), ("mul", 0)]
    assert n["relu"].outputs[0].producer is n["relu"] and n["relu"].outputs[0].index == 0
    assert n["x"].producer is None and n["x"].is_graph_input and n["x"].graph is graph
    assert n["w"].is_constant and not n["w"].is_graph_input
    assert n["mul"].predecessors() == [n["relu"]]
    assert n["relu"].users() == [n["neg"], n["mul"]]
    assert n["x"].users() == [n["add"], n["mul"]]


def test_inputs_are_read_only() -> None:
    _, n = small_graph()
    with pytest.raises((AttributeError, TypeError)):
        n["add"].inputs = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        n["add"].inputs[0] = n["w"]  # type: ignore[index]


def test_set_input_moves_the_use() -> None:
    graph, n = small_graph()
    n["neg"].set_input(0, n["x"])
    assert uses_of(n["relu"].outputs[0]) == [("mul", 0)]
    assert ("neg", 0) in uses_of(n["x"])
    n["neg"].set_input(0, None)  # an empty optional input
    assert ("neg", 0) not in uses_of(n["x"])
    graph.verify()


def test_same_value_twice_records_two_uses() -> None:
    graph = Graph("g")
    x = graph.add_input(Value("x", F32))
    node = graph.add_node("Add", [x, x], name="double")
    assert uses_of(x) == [("double", 0), ("double", 1)]
    node.set_input(1, None)
    assert uses_of(x) == [("double", 0)]
    node.replace_input_with(x, None)
    assert not x.has_uses()


def test_replace_inputs_can_change_the_arity() -> None:
    graph, n = small_graph()
    n["add"].replace_inputs([n["x"], n["w"], None, n["x"]])
    assert uses_of(n["x"]) == [("mul", 1), ("add", 0), ("add", 3)]
    n["add"].replace_inputs([n["w"]])
    assert uses_of(n["x"]) == [("mul", 1)]
    assert uses_of(n["w"]) == [("add", 0)]


def test_replace_all_uses_with_updates_nodes_and_graph_outputs() -> None:
    graph, n = small_graph()
    relu_out, add_out = n["relu"].outputs[0], n["add"].outputs[0]
    relu_out.replace_all_uses_with(add_out)
    assert not relu_out.has_uses()
    assert uses_of(add_out) == [("relu", 0), ("neg", 0), ("mul", 0)]
    neg_out = n["neg"].outputs[0]
    neg_out.replace_all_uses_with(add_out, replace_graph_outputs=False)
    assert graph.outputs[0] is neg_out
    neg_out.replace_all_uses_with(add_out)
    assert graph.outputs[0] is add_out
    graph.remove_nodes([n["relu"], n["neg"]])
    graph.verify()


def test_remove_nodes_drops_their_uses() -> None:
    graph, n = small_graph()
    graph.set_outputs([n["mul"].outputs[0]])
    graph.remove(n["neg"])
    assert uses_of(n["relu"].outputs[0]) == [("mul", 0)]
    assert n["neg"].graph is None and graph.find_node("neg") is None
    assert n["neg"].inputs == ()
    graph.verify()


def test_removing_a_used_node_is_an_error_naming_the_user() -> None:
    graph, n = small_graph()
    with pytest.raises(GraphIRError, match="still used by node 'neg'") as info:
        graph.remove(n["relu"])
    assert info.value.node == "relu"
    graph.verify()  # nothing changed
    assert uses_of(n["relu"].outputs[0]) == [("neg", 0), ("mul", 0)]


def test_removing_a_node_whose_output_is_a_graph_output_is_an_error() -> None:
    graph, n = small_graph()
    with pytest.raises(GraphIRError, match="graph output"):
        graph.remove(n["neg"])


def test_remove_nodes_accepts_a_set_whose_uses_stay_inside() -> None:
    graph, n = small_graph()
    graph.set_outputs([n["x"]])
    graph.remove_nodes([n["mul"], n["neg"], n["relu"], n["add"]])  # any order
    assert len(graph) == 0 and not n["x"].has_uses() and not n["w"].has_uses()
    graph.verify()
    graph.remove_initializer(n["w"])
    assert "w" not in graph.initializers


def test_inputs_and_constants_with_uses_cannot_be_removed() -> None:
    graph, n = small_graph()
    with pytest.raises(GraphIRError, match="still has 2 uses"):
        graph.remove_input(n["x"])
    with pytest.raises(GraphIRError, match="still has 1 uses"):
        graph.remove_initializer(n["w"])


def test_names_are_unique_and_generated_when_missing() -> None:
    graph, n = small_graph()
    with pytest.raises(GraphIRError, match="already used"):
        graph.add_node("Abs", [n["x"]], name="add")
    unnamed = graph.add_node("Abs", [n["x"]])
    assert unnamed.name == "abs" and unnamed.outputs[0].name == "abs"
    second = graph.add_node("Abs", [n["x"]])
    assert second.name not in ("abs", "add") and second.outputs[0].name != "abs"
    with pytest.raises(GraphIRError, match="already defined"):
        graph.add_input(Value("x", F32))
    graph.verify()


def test_a_failed_add_node_leaves_no_trace() -> None:
    """Node() records its input uses; when the graph then refuses it, those uses go away."""
    graph, n = small_graph()
    before = uses_of(n["x"])
    with pytest.raises(GraphIRError, match="node name 'add' is already used"):
        graph.add_node("Abs", [n["x"]], name="add")
    with pytest.raises(GraphIRError, match="value name %relu is already defined"):
        graph.add_node("Split", [n["x"]], outputs=["fresh", "relu"], name="split")
    assert uses_of(n["x"]) == before
    assert graph.lookup("fresh") is None and graph.find_node("split") is None
    graph.verify()


def test_a_node_belongs_to_one_graph() -> None:
    graph, n = small_graph()
    other = Graph("other")
    with pytest.raises(GraphIRError, match="already belongs"):
        other.append(n["add"])
    with pytest.raises(GraphIRError, match="already defined elsewhere"):
        Node("Relu", [], outputs=[n["x"]])


def _if_graph() -> tuple[Graph, Node, Node]:
    """An If whose then-branch reads the outer relu output (a capture)."""
    graph = Graph("outer")
    x = graph.add_input(Value("x", F32))
    c = graph.add_input(Value("c", TensorType(DType.BOOL, Shape([]))))
    relu = graph.add_node("Relu", [x], name="relu")
    then_branch = Graph("then")
    inner = then_branch.add_node("Neg", [relu.outputs[0]], name="inner_neg")
    then_branch.add_output(inner.outputs[0])
    else_branch = Graph("else")
    else_branch.add_output(x)
    if_node = graph.add_node("If", [c], attrs={"then_branch": then_branch, "else_branch": else_branch}, name="if")
    graph.add_output(if_node.outputs[0])
    graph.verify()
    return graph, relu, if_node


def test_subgraph_captures_are_uses_and_implicit_inputs() -> None:
    graph, relu, if_node = _if_graph()
    assert uses_of(relu.outputs[0]) == [("inner_neg", 0)]
    # the else branch returns the outer x directly: a capture too, though no node reads it
    assert if_node.implicit_inputs() == [relu.outputs[0], graph.inputs[0]]
    then_branch = if_node.attr("then_branch")
    assert then_branch.parent is if_node and then_branch.root is graph
    assert then_branch.lookup("x") is graph.inputs[0]
    with pytest.raises(GraphIRError, match="still used by node 'inner_neg'"):
        graph.remove(relu)
    graph.set_outputs([relu.outputs[0]])
    graph.remove(if_node)  # its subgraph's uses go with it
    assert not relu.outputs[0].has_uses()
    graph.verify()


def test_a_subgraph_cannot_belong_to_two_nodes() -> None:
    graph, _, if_node = _if_graph()
    with pytest.raises(GraphIRError, match="already belongs"):
        graph.add_node("Loop", [], attrs={"body": if_node.attr("then_branch")}, name="loop")


def test_set_attr_and_remove_attr_keep_subgraph_parents() -> None:
    graph, _, if_node = _if_graph()
    old = if_node.attr("else_branch")
    replacement = Graph("else2")
    replacement.add_output(graph.inputs[0])
    if_node.set_attr(Attr("else_branch", AttrKind.GRAPH, replacement))
    assert old.parent is None and replacement.parent is if_node
    if_node.remove_attr("else_branch")
    assert replacement.parent is None
    assert if_node.attr("else_branch", "absent") == "absent"


def test_clone_is_independent_and_shares_constants() -> None:
    graph, n = small_graph()
    n["relu"].device, n["relu"].fusion_group, n["relu"].priority, n["relu"].tile = "gpu:0", 1, 0.5, (8, 8)
    n["relu"].meta["analysis"] = {"flops": 6}
    copy = graph.clone()
    copy.verify()
    assert_structurally_equal(copy, graph)
    twin = copy.find_node("relu")
    assert twin is not n["relu"] and twin.device == "gpu:0" and twin.tile == (8, 8)
    assert copy.initializers["w"].const is n["w"].const  # tensors are immutable: shared
    # mutate the clone every way: the original does not notice
    twin.device = "cpu"
    twin.meta["analysis"] = "changed"
    copy.find_node("neg").set_input(0, copy.inputs[0])
    copy.add_node("Abs", [copy.inputs[0]], name="extra")
    copy.remove(copy.find_node("extra"))
    copy.rename_value(copy.inputs[0], "renamed")
    assert n["relu"].device == "gpu:0" and n["relu"].meta["analysis"] == {"flops": 6}
    assert uses_of(n["relu"].outputs[0]) == [("neg", 0), ("mul", 0)]
    assert graph.inputs[0].name == "x"
    assert not structural_equal(copy, graph)
    graph.verify()


def test_clone_remaps_subgraph_captures_to_the_clone() -> None:
    graph, relu, _ = _if_graph()
    copy = graph.clone()
    copy.verify()
    inner = copy.find_node("if").attr("then_branch").find_node("inner_neg")
    assert inner.inputs[0] is copy.find_node("relu").outputs[0]
    assert inner.inputs[0] is not relu.outputs[0]
    assert uses_of(relu.outputs[0]) == [("inner_neg", 0)]  # the original's use stays its own
    assert_structurally_equal(copy, graph)


def test_use_is_a_named_tuple() -> None:
    _, n = small_graph()
    use = n["x"].uses[0]
    assert use == Use(n["add"], 0) and use.node is n["add"] and use.index == 0


def test_rename_node_keeps_lookup_and_refuses_a_taken_name() -> None:
    graph, n = small_graph()
    graph.rename_node(n["relu"], "relu.renamed")
    assert graph.find_node("relu.renamed") is n["relu"] and graph.find_node("relu") is None
    graph.verify()
    with pytest.raises(GraphIRError, match="already used"):
        graph.rename_node(n["neg"], "add")
    with pytest.raises(GraphIRError, match="not in graph"):
        Graph("other").rename_node(n["neg"], "x2")
