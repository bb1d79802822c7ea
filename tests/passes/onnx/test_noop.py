from __future__ import annotations

import numpy as np

from graph_ir import Graph, assert_structurally_equal
from passes.onnx import EliminateNoops

from _build import const, f32, ops, typed  # noqa: I001 - the folder's helper


def test_identity_dropout_same_cast_reshape_transpose_pad_expand_are_removed(assert_same_numerics):
    before = Graph("main")
    x = before.add_input(f32("x", 2, 3))
    a = before.add_node("Identity", [x]).outputs[0]
    b = before.add_node("Dropout", [a]).outputs[0]
    c = before.add_node("Cast", [b], attrs={"to": 1}).outputs[0]
    d = before.add_node("Reshape", [c, const(before, np.array([2, 3]), "s")]).outputs[0]
    e = before.add_node("Transpose", [d], attrs={"perm": (0, 1)}).outputs[0]
    f = before.add_node("Pad", [e, const(before, np.zeros(4, dtype=np.int64), "p")]).outputs[0]
    g = before.add_node("Expand", [f, const(before, np.array([2, 3]), "e")]).outputs[0]
    h = before.add_node("CastLike", [g, x]).outputs[0]
    out = before.add_node("Relu", [h], name="relu").outputs[0]
    before.add_output(out)
    before = typed(before)
    original = before.clone()

    assert EliminateNoops()(before).modified
    before.verify()

    expected = Graph("main")
    ex = expected.add_input(f32("x", 2, 3))
    expected.add_output(expected.add_node("Relu", [ex], name="relu").outputs[0])
    assert_structurally_equal(before, typed(expected))
    assert not before.initializers  # the shape/pad constants went with their nodes
    assert_same_numerics(original, before)
    assert not EliminateNoops()(before).modified


def test_what_changes_values_stays():
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3))
    a = graph.add_node("Cast", [x], attrs={"to": 10}).outputs[0]  # to float16
    b = graph.add_node("Transpose", [a], attrs={"perm": (1, 0)}).outputs[0]
    c = graph.add_node("Pad", [b, const(graph, np.array([0, 1, 0, 0]), "p")]).outputs[0]
    graph.add_output(c)
    graph = typed(graph)
    assert not EliminateNoops()(graph).modified
    assert ops(graph) == ["Cast", "Transpose", "Pad"]


def test_a_graph_output_keeps_its_name(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 4))
    r = graph.add_node("Relu", [x], name="relu").outputs[0]
    out = graph.add_node("Identity", [r]).outputs[0]
    out.name = "y"
    graph.add_output(out)
    graph = typed(graph)
    original = graph.clone()
    assert EliminateNoops()(graph).modified
    assert ops(graph) == ["Relu"] and graph.outputs[0].name == "y"
    assert_same_numerics(original, graph)
    # an Identity from an input straight to the output must stay (the names are the interface)
    passthrough = Graph("main")
    x = passthrough.add_input(f32("x", 4))
    passthrough.add_output(passthrough.add_node("Identity", [x]).outputs[0])
    assert not EliminateNoops()(passthrough).modified


def test_dropout_in_training_mode_or_with_a_read_mask_stays():
    graph = Graph("main")
    x = graph.add_input(f32("x", 4))
    node = graph.add_node("Dropout", [x, const(graph, np.array(0.5, np.float32), "r"), const(graph, np.array(True), "t")], outputs=2)
    graph.add_output(node.outputs[0])
    graph.add_output(node.outputs[1])
    assert not EliminateNoops()(graph).modified


def test_adding_zero_and_multiplying_by_one_go_unless_they_broadcast(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3))
    a = graph.add_node("Add", [const(graph, np.zeros(3, np.float32), "zero"), x]).outputs[0]
    b = graph.add_node("Mul", [a, const(graph, np.ones((1, 3), np.float32), "one")]).outputs[0]
    c = graph.add_node("Add", [b, const(graph, np.zeros((4, 2, 3), np.float32), "wide_zero")], name="widens").outputs[0]
    graph.add_output(c)
    graph = typed(graph)
    original = graph.clone()
    assert EliminateNoops()(graph).modified
    assert ops(graph) == ["Add"] and graph.nodes[0].name == "widens" and graph.nodes[0].inputs[0].name == "x"
    assert_same_numerics(original, graph)
