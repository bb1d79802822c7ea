from __future__ import annotations

import numpy as np

from graph_ir import Graph, NumpyTensor, assert_structurally_equal
from passes.onnx import ConstantsToInitializers

from _build import const, f32, typed  # noqa: I001 - the folder's helper


def test_constant_nodes_become_initializers_of_the_same_name(assert_same_numerics):
    before = Graph("main")
    x = before.add_input(f32("x", 3))
    c = before.add_node("Constant", [], attrs={"value": NumpyTensor(np.arange(3, dtype=np.float32))}).outputs[0]
    c.name = "bias"
    s = before.add_node("Constant", [], attrs={"value_float": 2.0}).outputs[0]
    y = before.add_node("Mul", [before.add_node("Add", [x, c], name="add").outputs[0], s], name="mul").outputs[0]
    before.add_output(y)
    before = typed(before)
    original = before.clone()
    assert ConstantsToInitializers()(before).modified
    before.verify()

    expected = Graph("main")
    ex = expected.add_input(f32("x", 3))
    bias = const(expected, np.arange(3, dtype=np.float32), "bias")
    two = const(expected, np.array(2.0, dtype=np.float32), "two")
    expected.add_output(expected.add_node("Mul", [expected.add_node("Add", [ex, bias], name="add").outputs[0], two], name="mul").outputs[0])
    assert_structurally_equal(before, typed(expected))
    assert "bias" in before.initializers
    assert_same_numerics(original, before)


def test_a_constant_returned_as_a_graph_output_stays():
    graph = Graph("main")
    c = graph.add_node("Constant", [], attrs={"value": NumpyTensor(np.ones(2, np.float32))}).outputs[0]
    graph.add_output(c)
    assert not ConstantsToInitializers()(graph).modified
