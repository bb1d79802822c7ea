"""Array and networkx views of a graph, on a small hand-checked graph and on random DAGs."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_ir import DType, Graph, NumpyTensor, Shape, TensorType, Value
from graph_ir.features import NODE_FEATURE_NAMES, OP_KIND_INDEX, graph_arrays
from graph_ir.verify import topological_order

F32_2x3 = TensorType(DType.FLOAT32, Shape([2, 3]))  # 6 elements, 24 bytes


def diamond() -> Graph:
    """x -> a(Relu) -> {b(Neg), c(Exp)} -> d(Add) -> out; a's output feeds b and c."""
    graph = Graph("diamond")
    x = graph.add_input(Value("x", F32_2x3))
    w = graph.add_constant(NumpyTensor(np.ones((2, 3), np.float32)), "w")
    a = graph.add_node("Relu", [x], name="a")
    b = graph.add_node("Neg", [a.outputs[0]], name="b")
    c = graph.add_node("Exp", [a.outputs[0]], name="c")
    d = graph.add_node("Add", [b.outputs[0], c.outputs[0]], name="d")
    e = graph.add_node("Mul", [d.outputs[0], w], name="e")
    for node in graph:
        node.outputs[0].type = F32_2x3
    graph.add_output(e.outputs[0])
    graph.verify()
    return graph


def test_graph_arrays_on_a_small_graph() -> None:
    graph = diamond()
    arrays = graph_arrays(graph)
    assert [n.name for n in arrays.nodes] == ["a", "b", "c", "d", "e"]
    assert arrays.edge_index.dtype == np.int64 and arrays.edge_index.shape == (2, 5)
    edges = sorted(map(tuple, arrays.edge_index.T.tolist()))
    assert edges == [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)]
    np.testing.assert_array_equal(arrays.edge_bytes, np.full(5, 24.0))
    assert arrays.op_kind.shape == (5,)
    assert arrays.op_kind[0] == OP_KIND_INDEX[graph.find_node("a").kind]
    features = arrays.node_features
    assert features.shape == (5, len(NODE_FEATURE_NAMES)) and features.dtype == np.float32
    column = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}
    np.testing.assert_allclose(features[:, column["log_out_elements"]], math.log1p(6))
    np.testing.assert_allclose(features[:, column["log_out_bytes"]], math.log1p(24))
    np.testing.assert_allclose(features[:, column["log_in_bytes"]], [math.log1p(24), math.log1p(24), math.log1p(24), math.log1p(48), math.log1p(48)], rtol=1e-6)
    np.testing.assert_array_equal(features[:, column["num_inputs"]], [1, 1, 1, 2, 2])
    np.testing.assert_array_equal(features[:, column["in_degree"]], [0, 1, 1, 2, 1])  # graph inputs and constants are not nodes
    np.testing.assert_array_equal(features[:, column["out_degree"]], [2, 1, 1, 1, 0])
    np.testing.assert_allclose(features[:, column["topo_position"]], [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(features[:, column["has_subgraph"]], 0)


def test_unknown_shapes_give_zero_sizes() -> None:
    graph = Graph("unknown")
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, Shape(["N"]))))
    a = graph.add_node("Relu", [x], name="a")
    b = graph.add_node("Neg", [a.outputs[0]], name="b")
    graph.add_output(b.outputs[0])
    arrays = graph_arrays(graph)
    np.testing.assert_array_equal(arrays.edge_bytes, [0.0])
    assert arrays.node_features[:, 0].tolist() == [0.0, 0.0]


def test_empty_graph_arrays() -> None:
    arrays = graph_arrays(Graph("empty"))
    assert arrays.edge_index.shape == (2, 0) and arrays.node_features.shape == (0, len(NODE_FEATURE_NAMES))


def test_networkx_view_has_one_edge_per_use() -> None:
    graph = diamond()
    graph.add_node("Add", [graph.find_node("a").outputs[0], graph.find_node("a").outputs[0]], name="twice")
    view = graph.to_networkx()
    assert view.number_of_nodes() == 6
    assert view.number_of_edges() == 7  # the 5 of the diamond + two uses of a's output by 'twice'
    assert view.number_of_edges("a", "twice") == 2
    data = view.get_edge_data("a", "b")[0]
    assert data == {"value": "a", "index": 0, "bytes": 24}
    assert view.nodes["d"]["op_type"] == "Add"
    # graph_arrays keeps one edge per (value, consumer) pair instead
    assert graph_arrays(graph).edge_index.shape[1] == 6


# -- random DAGs ---------------------------------------------------------------------------------


@st.composite
def random_dags(draw) -> tuple[Graph, int]:
    """A DAG of 1-25 nodes; each takes 1-3 inputs from the graph inputs or earlier nodes."""
    graph = Graph("random")
    available = [graph.add_input(Value(f"in{i}", F32_2x3)) for i in range(draw(st.integers(1, 3)))]
    count = draw(st.integers(1, 25))
    for index in range(count):
        arity = draw(st.integers(1, 3))
        inputs = [available[draw(st.integers(0, len(available) - 1))] for _ in range(arity)]
        node = graph.add_node("Sum", inputs, name=f"n{index}")
        node.outputs[0].type = F32_2x3
        available.append(node.outputs[0])
    for value in available[-draw(st.integers(1, min(3, count))) :]:
        graph.add_output(value)
    return graph, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_random_dag_views_match_uses_and_sort_restores_order(dag: tuple[Graph, int]) -> None:
    graph, seed = dag
    graph.verify()
    arrays = graph_arrays(graph)
    row = {node: i for i, node in enumerate(arrays.nodes)}
    expected = {
        (row[node], row[use.node]) for node in graph for value in node.outputs for use in value.uses
    }
    got = set(map(tuple, arrays.edge_index.T.tolist()))
    assert got == expected
    assert arrays.edge_index.shape[1] == len(expected)  # one edge per (value, consumer)
    assert graph.to_networkx().number_of_edges() == sum(v.num_uses for n in graph for v in n.outputs)
    in_degree = arrays.node_features[:, NODE_FEATURE_NAMES.index("in_degree")]
    np.testing.assert_array_equal(in_degree, np.bincount(arrays.edge_index[1], minlength=len(graph)))

    shuffled = graph.nodes
    random.Random(seed).shuffle(shuffled)
    graph.reorder(shuffled)
    graph.sort()
    position = {node: i for i, node in enumerate(graph)}
    for node in graph:
        for producer in node.predecessors():
            assert position[producer] < position[node]
    graph.verify()
    assert topological_order(graph) == graph.nodes  # already sorted: the order is kept


def test_depth_fan_and_flops_columns() -> None:
    graph = diamond()
    column = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}
    arrays = graph_arrays(graph, flops=np.array([0.0, 6.0, 6.0, 6.0, 12.0]))
    features = arrays.node_features
    # a -> b, c -> d -> e: depths 0, 1, 1, 2, 3 out of 3
    np.testing.assert_allclose(features[:, column["topo_depth"]], [0, 1 / 3, 1 / 3, 2 / 3, 1.0], rtol=1e-6)
    np.testing.assert_allclose(features[:, column["log_flops"]], np.log1p([0, 6, 6, 6, 12]), rtol=1e-6)
    np.testing.assert_allclose(features[:, column["log_fan_in"]], np.log1p([0, 1, 1, 2, 1]), rtol=1e-6)
    # A reversed row order gives the same depths per node (the unsorted path).
    reordered = graph_arrays(graph, nodes=list(reversed(list(graph))))
    by_name = dict(zip([n.name for n in reordered.nodes], reordered.node_features[:, column["topo_depth"]]))
    assert by_name == pytest.approx({"a": 0.0, "b": 1 / 3, "c": 1 / 3, "d": 2 / 3, "e": 1.0})
    with pytest.raises(ValueError, match="flops"):
        graph_arrays(graph, flops=np.zeros(3))


def test_path_columns_by_hand() -> None:
    """a -> b -> c -> d <- s, b -> e; sources a and s, sinks d and e (both graph outputs)."""
    graph = Graph("paths")
    x = graph.add_input(Value("x", F32_2x3))
    a = graph.add_node("Relu", [x], name="a")
    b = graph.add_node("Neg", [a.outputs[0]], name="b")
    c = graph.add_node("Exp", [b.outputs[0]], name="c")
    s = graph.add_node("Neg", [x], name="s")
    d = graph.add_node("Add", [c.outputs[0], s.outputs[0]], name="d")
    e = graph.add_node("Sigmoid", [b.outputs[0]], name="e")
    for node in graph:
        node.outputs[0].type = F32_2x3
    graph.add_output(d.outputs[0])
    graph.add_output(e.outputs[0])
    graph.verify()
    column = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}
    expected = {  # longest to a sink / 3, shortest from a source / 2, shortest to a sink / 2
        "a": (1.0, 0.0, 1.0), "b": (2 / 3, 0.5, 0.5), "c": (1 / 3, 1.0, 0.5),
        "s": (1 / 3, 0.0, 0.5), "d": (0.0, 0.5, 0.0), "e": (0.0, 1.0, 0.0),
    }
    names = ("topo_height", "min_depth", "min_height")
    for nodes in (topological_order(graph), list(reversed(topological_order(graph)))):  # the sweep and the relaxation
        arrays = graph_arrays(graph, nodes=nodes)
        got = {n.name: tuple(float(arrays.node_features[i, column[c]]) for c in names) for i, n in enumerate(arrays.nodes)}
        assert got == {k: pytest.approx(v) for k, v in expected.items()}

