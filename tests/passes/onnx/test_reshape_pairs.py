from __future__ import annotations

import numpy as np
import pytest

from graph_ir import DType, Graph, TensorType, Value
from passes.onnx import CancelReshapePairs, FoldChains

from _build import const, f32, ops, typed  # noqa: I001 - the folder's helper


def _gelu_sandwich(scalar: np.ndarray, exit_shape: tuple[int, ...] = (6, 4)) -> Graph:
    """x[6,4] -> Reshape[2,3,4] -> tanh-GELU-like chain with scalar constants -> Reshape back."""
    graph = Graph("main")
    x = graph.add_input(f32("x", 6, 4))
    y = graph.add_node("Reshape", [x, const(graph, np.array([2, 3, 4]), "up")]).outputs[0]
    p = graph.add_node("Pow", [y, const(graph, np.array(3.0, np.float32), "three")]).outputs[0]
    m = graph.add_node("Mul", [p, const(graph, scalar, "k")]).outputs[0]
    s = graph.add_node("Add", [y, m]).outputs[0]
    t = graph.add_node("Tanh", [s]).outputs[0]
    h = graph.add_node("Mul", [y, t]).outputs[0]
    back = graph.add_node("Reshape", [h, const(graph, np.array(exit_shape), "down")]).outputs[0]
    graph.add_output(graph.add_node("Relu", [back]).outputs[0])
    return typed(graph)


def test_reshape_pair_around_elementwise_ops_is_dropped(assert_same_numerics):
    graph = _gelu_sandwich(np.array([[0.044715]], np.float32))  # rank 2 <= min(rank A, rank B): no new axis
    original = graph.clone()
    assert CancelReshapePairs()(graph).modified
    graph.verify()
    assert ops(graph) == ["Pow", "Mul", "Add", "Tanh", "Mul", "Relu"]
    assert all(tuple(n.outputs[0].shape) == (6, 4) for n in graph)
    assert graph.nodes[0].inputs[0].name == "x"
    assert {"up", "down"}.isdisjoint(graph.initializers)
    assert_same_numerics(original, graph)


@pytest.mark.parametrize(
    "scalar, exit_shape, why",
    [
        (np.full((4,), 0.5, np.float32), (6, 4), "a [4] operand broadcasts per position"),
        (np.full((1, 1, 1), 0.5, np.float32), (6, 4), "a rank-3 scalar adds an axis on the [6,4] view"),
        (np.array(0.5, np.float32), (4, 6), "the exit Reshape goes elsewhere"),
    ],
)
def test_reshape_pair_stays_when_the_views_compute_differently(scalar, exit_shape, why):
    graph = _gelu_sandwich(scalar, exit_shape)
    assert not CancelReshapePairs()(graph).modified, why
    assert ops(graph).count("Reshape") == 2


def test_reshape_pair_stays_when_a_region_value_leaves_otherwise():
    graph = Graph("main")
    x = graph.add_input(f32("x", 6, 4))
    y = graph.add_node("Reshape", [x, const(graph, np.array([2, 3, 4]), "up")]).outputs[0]
    t = graph.add_node("Tanh", [y]).outputs[0]
    graph.add_output(graph.add_node("Reshape", [t, const(graph, np.array([6, 4]), "down")]).outputs[0])
    graph.add_output(graph.add_node("ReduceSum", [t, const(graph, np.array([2]), "axes")]).outputs[0])  # reads the [2,3,4] view
    graph = typed(graph)
    assert not CancelReshapePairs()(graph).modified
    other = Graph("main")
    x = other.add_input(f32("x", 6, 4))
    y = other.add_node("Reshape", [x, const(other, np.array([2, 3, 4]), "up")]).outputs[0]
    t = other.add_node("Tanh", [y]).outputs[0]
    other.add_output(other.add_node("Reshape", [t, const(other, np.array([6, 4]), "down")]).outputs[0])
    other.add_output(t)  # a graph output keeps its shape
    assert not CancelReshapePairs()(typed(other)).modified


def test_the_rewrite_keeps_a_graph_output_name_and_integer_ops(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(DType.INT64, (6, 4))))
    y = graph.add_node("Reshape", [x, const(graph, np.array([24]), "flat")]).outputs[0]
    c = graph.add_node("Cast", [y], attrs={"to": 1}).outputs[0]
    d = graph.add_node("Div", [c, const(graph, np.array([2.0], np.float32), "two")]).outputs[0]
    out = graph.add_node("Reshape", [d, const(graph, np.array([6, 4]), "back")]).outputs[0]
    out.name = "logits"
    graph.add_output(out)
    graph = typed(graph)
    original = graph.clone()
    assert CancelReshapePairs()(graph).modified
    graph.verify()
    assert ops(graph) == ["Cast", "Div"] and graph.outputs[0].name == "logits"
    assert_same_numerics(original, graph)


def test_reshape_chains_with_allowzero_fold_when_the_outer_shape_has_no_zero(assert_same_numerics):
    """The dynamo exporter writes allowzero=1 on every Reshape; without 0 entries it means nothing."""
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3, 4))
    a = graph.add_node("Reshape", [x, const(graph, np.array([1, 6, 4]), "s1")], attrs={"allowzero": 1}).outputs[0]
    graph.add_output(graph.add_node("Reshape", [a, const(graph, np.array([-1, 4]), "s2")], attrs={"allowzero": 1}).outputs[0])
    graph = typed(graph)
    original = graph.clone()
    assert FoldChains()(graph).modified
    assert ops(graph) == ["Reshape"] and graph.nodes[0].attr("allowzero") == 1
    assert_same_numerics(original, graph)
