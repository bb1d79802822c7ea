from __future__ import annotations

import numpy as np
import pytest

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value, assert_structurally_equal
from passes.basic import ConstantFolding


def f32(name: str, *shape: int | str) -> Value:
    return Value(name, TensorType(DType.FLOAT32, shape))


def run_fold(graph: Graph, **options: object) -> bool:
    result = ConstantFolding(**options)(graph)
    assert result.graph is graph
    graph.verify()
    return result.modified


def const(graph: Graph, array: np.ndarray, name: str = "c") -> Value:
    return graph.add_constant(NumpyTensor(array), name)


W1 = np.arange(6, dtype=np.float32).reshape(2, 3)
W2 = np.full((2, 3), 0.5, np.float32)


def test_chain_of_constants_folds_in_one_run(assert_same_numerics) -> None:
    before = Graph("main")
    x = before.add_input(f32("x", 2, 3))
    w1, w2 = const(before, W1, "w1"), const(before, W2, "w2")
    summed = before.add_node("Add", [w1, w2])
    scaled = before.add_node("Mul", [summed.outputs[0], w2])
    out = before.add_node("Sub", [x, scaled.outputs[0]])
    before.add_output(out.outputs[0])
    original = before.clone()

    assert run_fold(before)

    expected = Graph("main")
    ex = expected.add_input(f32("x", 2, 3))
    folded = const(expected, (W1 + W2) * W2, "folded")
    expected.add_output(expected.add_node("Sub", [ex, folded]).outputs[0])
    assert_structurally_equal(before, expected)
    # the new constant keeps the name of the output it replaces
    assert out.inputs[1].name == scaled.outputs[0].name and out.inputs[1].const is not None
    assert_same_numerics(original, before)
    assert not run_fold(before)


def test_constant_node_inputs_fold_and_the_constant_node_goes() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 3))
    c = graph.add_node("Constant", [], attrs={"value": NumpyTensor(np.array([1.0, -2.0, 3.0], np.float32))})
    kept = graph.add_node("Constant", [], attrs={"value_floats": [4.0, 5.0, 6.0]})
    ints = graph.add_node("Constant", [], attrs={"value_ints": [1, 2, 3]})
    cast = graph.add_node("Cast", [ints.outputs[0]], attrs={"to": DType.FLOAT32.onnx_code})
    neg = graph.add_node("Neg", [c.outputs[0]])
    total = graph.add_node("Sum", [x, neg.outputs[0], kept.outputs[0], cast.outputs[0]])
    graph.add_output(total.outputs[0])
    graph.add_output(kept.outputs[0])

    assert run_fold(graph)

    expected = Graph("main")
    ex = expected.add_input(f32("x", 3))
    ekept = expected.add_node("Constant", [], attrs={"value_floats": [4.0, 5.0, 6.0]})
    ecast = const(expected, np.array([1.0, 2.0, 3.0], np.float32), "cast")
    eneg = const(expected, np.array([-1.0, 2.0, -3.0], np.float32), "neg")
    expected.add_output(expected.add_node("Sum", [ex, eneg, ekept.outputs[0], ecast]).outputs[0])
    expected.add_output(ekept.outputs[0])
    assert_structurally_equal(graph, expected)


def test_size_limit_keeps_large_results_computed() -> None:
    def build() -> Graph:
        graph = Graph("main")
        base = const(graph, np.ones((1, 4), np.float32), "base")
        reps = const(graph, np.array([64, 1], np.int64), "reps")
        graph.add_output(graph.add_node("Tile", [base, reps]).outputs[0])
        return graph

    large = build()
    text = str(large)
    assert not run_fold(large, size_limit=1023)  # the result is 64 * 4 * 4 = 1024 bytes
    assert str(large) == text
    small = build()
    assert run_fold(small, size_limit=1024)
    (output,) = small.outputs
    np.testing.assert_array_equal(output.const.numpy(), np.ones((64, 4), np.float32))
    assert list(small.initializers) == [output.name]  # the consumed inputs are gone


def test_declared_large_outputs_are_not_even_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    from passes.basic import constant_folding

    def fail(*args: object) -> None:
        raise AssertionError("evaluated a node whose declared output is over the limit")

    monkeypatch.setattr(constant_folding, "_evaluate", fail)
    graph = Graph("main")
    base = const(graph, np.ones((1, 4), np.float32), "base")
    reps = const(graph, np.array([64, 1], np.int64), "reps")
    graph.add_output(graph.add_node("Tile", [base, reps], outputs=[f32("tiled", 64, 4)]).outputs[0])
    assert not run_fold(graph, size_limit=1000)


def test_shape_and_size_of_static_values_fold() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3, 5))
    relu = graph.add_node("Relu", [x])
    shape = graph.add_node("Shape", [relu.outputs[0]])
    tail = graph.add_node("Shape", [x], attrs={"start": -2})
    middle = graph.add_node("Shape", [x], attrs={"start": 1, "end": 2})
    size = graph.add_node("Size", [x])
    graph.set_outputs([relu.outputs[0], *(n.outputs[0] for n in (shape, tail, middle, size))])
    assert run_fold(graph)
    assert [n.op_type for n in graph] == ["Relu", "Shape"]  # Relu's output has no declared shape yet

    relu.outputs[0].type = TensorType(DType.FLOAT32, (2, 3, 5))
    assert run_fold(graph)
    assert [n.op_type for n in graph] == ["Relu"]
    folded = [v.const.numpy() for v in graph.outputs[1:]]
    assert [f.tolist() for f in folded] == [[2, 3, 5], [3, 5], [3], 30]
    assert all(f.dtype == np.int64 for f in folded) and folded[3].shape == ()


def test_symbolic_shapes_and_disabled_shape_folding_stay() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", "batch", 3))
    y = graph.add_input(f32("y", 4, 3))
    graph.set_outputs([graph.add_node("Shape", [x]).outputs[0], graph.add_node("Size", [y]).outputs[0]])
    assert not run_fold(graph, fold_shape_ops=False)
    assert run_fold(graph)
    assert [n.op_type for n in graph] == ["Shape"]


def test_folded_graph_output_keeps_its_name(assert_same_numerics) -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3))
    w1 = const(graph, W1, "w1")
    doubled = graph.add_node("Add", [w1, w1], outputs=["doubled"])
    graph.add_output(doubled.outputs[0])
    graph.add_output(graph.add_node("Mul", [x, doubled.outputs[0]], outputs=["y"]).outputs[0])
    original = graph.clone()
    assert run_fold(graph)
    assert [v.name for v in graph.outputs] == ["doubled", "y"]
    assert graph.outputs[0].const is not None and "w1" not in graph.initializers
    assert_same_numerics(original, graph)


def test_overridable_initializers_random_ops_and_other_domains_do_not_fold() -> None:
    graph = Graph("main")
    default = Value("bias", const=NumpyTensor(np.ones(3, np.float32)))
    graph.add_initializer(default)
    graph.add_input(default)
    w = const(graph, np.ones(3, np.float32), "w")
    nodes = [
        graph.add_node("Neg", [default]),  # input may be fed at run time
        graph.add_node("RandomUniformLike", [w]),
        graph.add_node("Neg", [w], domain="com.example"),
        graph.add_node("NoSuchOnnxOp", [w]),  # the evaluator fails: skipped quietly
        graph.add_node("Neg", [w], outputs=[Value("wrong", TensorType(DType.INT32, (3,)))]),  # declared type disagrees
    ]
    graph.set_outputs([n.outputs[0] for n in nodes])
    assert not run_fold(graph)
    assert len(graph) == 5


def test_dead_nodes_are_left_for_dce() -> None:
    graph = Graph("main")
    w = const(graph, np.ones(3, np.float32), "w")
    graph.add_node("Neg", [w])
    assert not run_fold(graph)


def test_multi_output_nodes_fold_every_used_output() -> None:
    graph = Graph("main")
    w = const(graph, np.arange(6, dtype=np.float32), "w")
    split = graph.add_node("Split", [w], outputs=3, attrs={"num_outputs": 3})
    graph.set_outputs([split.outputs[0], split.outputs[2]])
    assert run_fold(graph)
    assert len(graph) == 0
    assert [v.const.numpy().tolist() for v in graph.outputs] == [[0.0, 1.0], [4.0, 5.0]]
    assert sorted(graph.initializers) == sorted(v.name for v in graph.outputs)


def test_folding_inside_subgraphs(assert_same_numerics) -> None:
    graph = Graph("main")
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = graph.add_input(f32("x", 2, 3))
    w = const(graph, W1, "w")
    then_branch, else_branch = Graph("then"), Graph("else")
    inner = then_branch.add_node("Exp", [w], name="inner_exp")
    then_branch.add_output(then_branch.add_node("Add", [x, inner.outputs[0]], name="inner_add", outputs=[f32("t", 2, 3)]).outputs[0])
    else_branch.add_output(else_branch.add_node("Neg", [x], name="inner_neg", outputs=[f32("e", 2, 3)]).outputs[0])
    node = graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch}, outputs=[f32("y", 2, 3)])
    graph.add_output(node.outputs[0])
    original = graph.clone()

    assert run_fold(graph)
    assert [n.op_type for n in then_branch] == ["Add"]
    folded = then_branch.nodes[0].inputs[1]
    assert folded.graph is then_branch and folded.name in then_branch.initializers
    np.testing.assert_allclose(folded.const.numpy(), np.exp(W1), rtol=1e-6)
    assert "w" not in graph.initializers
    for seed in range(4):
        assert_same_numerics(original, graph, seed=seed)


@pytest.mark.parametrize("opset", [13, 21])
def test_uses_the_graph_opset(opset: int) -> None:
    # ReduceSum takes `axes` as an input from opset 13 on (an attribute before).
    graph = Graph("main", opset_imports={"": opset})
    w = const(graph, W1, "w")
    axes = const(graph, np.array([1], np.int64), "axes")
    graph.add_output(graph.add_node("ReduceSum", [w, axes], attrs={"keepdims": 0}).outputs[0])
    assert run_fold(graph)
    np.testing.assert_array_equal(graph.outputs[0].const.numpy(), W1.sum(axis=1))


def test_shape_arithmetic_folds_to_a_static_reshape(assert_same_numerics) -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3, 4))
    shape = graph.add_node("Shape", [x])
    zero = const(graph, np.array([0], np.int64), "zero")
    batch = graph.add_node("Gather", [shape.outputs[0], zero], attrs={"axis": 0})
    minus_one = const(graph, np.array([-1], np.int64), "minus_one")
    target = graph.add_node("Concat", [batch.outputs[0], minus_one], attrs={"axis": 0})
    graph.add_output(graph.add_node("Reshape", [x, target.outputs[0]]).outputs[0])
    original = graph.clone()

    assert run_fold(graph)

    expected = Graph("main")
    ex = expected.add_input(f32("x", 2, 3, 4))
    etarget = const(expected, np.array([2, -1], np.int64), "target")
    expected.add_output(expected.add_node("Reshape", [ex, etarget]).outputs[0])
    assert_structurally_equal(graph, expected)
    assert_same_numerics(original, graph)
