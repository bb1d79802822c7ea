from __future__ import annotations

import numpy as np

from graph_ir import DType, Graph, NumpyTensor, SequenceType, TensorType, Value, assert_structurally_equal
from passes.basic import ShapeInference
from passes.basic.shape_inference import refine_type


def t(*shape: int | str | None, dtype: DType = DType.FLOAT32) -> TensorType:
    return TensorType(dtype, shape)


def run_infer(graph: Graph, **options: object) -> bool:
    result = ShapeInference(**options)(graph)
    assert result.graph is graph
    graph.verify()
    return result.modified


def mlp(typed: bool) -> Graph:
    """x[batch,3] -> MatMul w[3,4] -> Relu -> Transpose; with or without intermediate types."""
    graph = Graph("main", opset_imports={"": 18})
    x = graph.add_input(Value("x", t("batch", 3)))
    w = graph.add_constant(NumpyTensor(np.ones((3, 4), np.float32)), "w")
    mm = graph.add_node("MatMul", [x, w], outputs=[Value("mm", t("batch", 4) if typed else None)])
    relu = graph.add_node("Relu", [mm.outputs[0]], outputs=[Value("relu", t("batch", 4) if typed else None)])
    tr = graph.add_node("Transpose", [relu.outputs[0]], attrs={"perm": [1, 0]}, outputs=[Value("tr", t(4, "batch") if typed else None)])
    graph.add_output(tr.outputs[0])
    return graph


def test_types_are_filled_in() -> None:
    graph = mlp(typed=False)
    assert run_infer(graph)
    assert_structurally_equal(graph, mlp(typed=True))
    assert not run_infer(graph)


def test_data_propagation_gives_static_reshape_shapes() -> None:
    def build(data_shape: tuple | None) -> Graph:
        graph = Graph("main", opset_imports={"": 18})
        x = graph.add_input(Value("x", t(2, 3, 4)))
        shape = graph.add_node("Shape", [x], outputs=[Value("shape", t(3, dtype=DType.INT64))])
        minus_one = graph.add_constant(NumpyTensor(np.array([-1], np.int64)), "minus_one")
        first = graph.add_node("Slice", [shape.outputs[0], graph.add_constant(NumpyTensor(np.array([0], np.int64)), "s0"),
                                         graph.add_constant(NumpyTensor(np.array([1], np.int64)), "s1")],
                               outputs=[Value("first", t(1, dtype=DType.INT64))])
        target = graph.add_node("Concat", [first.outputs[0], minus_one], attrs={"axis": 0},
                                outputs=[Value("target", t(2, dtype=DType.INT64))])
        reshaped = graph.add_node("Reshape", [x, target.outputs[0]],
                                  outputs=[Value("y", None if data_shape is None else t(*data_shape))])
        graph.add_output(reshaped.outputs[0])
        return graph

    with_prop = build(None)
    assert run_infer(with_prop)
    assert_structurally_equal(with_prop, build((2, 12)))
    without = build(None)
    run_infer(without, data_prop=False)
    assert without.outputs[0].shape != (2, 12)


def test_known_information_is_never_erased() -> None:
    graph = mlp(typed=False)
    graph.inputs[0].type = t(None, 3)  # onnx cannot know the first dim
    mm, relu = graph.nodes[0].outputs[0], graph.nodes[1].outputs[0]
    mm.type = t("n", None)
    relu.type = t(7, None)
    assert run_infer(graph)
    assert mm.type == t("n", 4) and relu.type == t(7, 4)  # static dims replace unknown ones only


def test_subgraph_values_are_typed() -> None:
    def build(typed: bool) -> Graph:
        graph = Graph("main", opset_imports={"": 18})
        cond = graph.add_input(Value("cond", t(dtype=DType.BOOL)))
        x = graph.add_input(Value("x", t(2, 3)))
        then_branch, else_branch = Graph("then"), Graph("else")
        inner = then_branch.add_node("Relu", [x], name="inner", outputs=[Value("inner", t(2, 3) if typed else None)])
        then_branch.add_output(then_branch.add_node("Neg", [inner.outputs[0]], name="a", outputs=[Value("a", t(2, 3))]).outputs[0])
        else_branch.add_output(else_branch.add_node("Exp", [x], name="b", outputs=[Value("b", t(2, 3))]).outputs[0])
        node = graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch},
                              outputs=[Value("y", t(2, 3) if typed else None)])
        graph.add_output(node.outputs[0])
        return graph

    graph = build(False)
    assert run_infer(graph)
    assert_structurally_equal(graph, build(True))


def test_other_domains_are_left_alone() -> None:
    only_custom = Graph("main")
    x = only_custom.add_input(Value("x", t(2)))
    only_custom.add_output(only_custom.add_node("Fancy", [x], domain="hlo").outputs[0])
    assert not run_infer(only_custom)

    mixed = Graph("main", opset_imports={"": 18, "com.example": 1})
    x = mixed.add_input(Value("x", t(2)))
    relu = mixed.add_node("Relu", [x])
    fancy = mixed.add_node("Fancy", [relu.outputs[0]], domain="com.example")
    mixed.add_output(fancy.outputs[0])
    assert run_infer(mixed)
    assert relu.outputs[0].type == t(2) and fancy.outputs[0].type is None


def test_unexportable_graphs_are_skipped() -> None:
    from graph_ir import Attr, AttrKind

    graph = Graph("main")
    x = graph.add_input(Value("x", t(2)))
    node = graph.add_node("Relu", [x], attrs=[Attr("payload", AttrKind.OPAQUE, object())])
    graph.add_output(node.outputs[0])
    assert not run_infer(graph)
    assert node.outputs[0].type is None


def test_refine_type_rules() -> None:
    assert refine_type(None, t(2)) == t(2)
    assert refine_type(t(2), None) == t(2)
    assert refine_type(t("n", None, 3), t(4, "m", None)) == t(4, "m", 3)
    assert refine_type(TensorType(None, None), t(2)) == t(2)
    assert refine_type(t(2, 3), TensorType(None, None)) == t(2, 3)
    assert refine_type(t(2), t(2, 1)) == t(2, 1)  # a rank disagreement: onnx's answer wins
    assert refine_type(SequenceType(None), SequenceType(t(2))) == SequenceType(t(2))


def test_sibling_subgraphs_may_reuse_a_name() -> None:
    def build(typed: bool) -> Graph:
        graph = Graph("main", opset_imports={"": 18})
        cond = graph.add_input(Value("cond", t(dtype=DType.BOOL)))
        x = graph.add_input(Value("x", t(2, 3)))
        then_branch, else_branch = Graph("then"), Graph("else")
        # both branches define %v, with different shapes
        v_then = then_branch.add_node("Transpose", [x], attrs={"perm": [1, 0]}, name="v", outputs=[Value("v", t(3, 2) if typed else None)])
        then_branch.add_output(then_branch.add_node("ReduceSum", [v_then.outputs[0]], name="a", outputs=[Value("a", t(1, 1))]).outputs[0])
        v_else = else_branch.add_node("Relu", [x], name="v", outputs=[Value("v", t(2, 3) if typed else None)])
        else_branch.add_output(else_branch.add_node("ReduceSum", [v_else.outputs[0]], name="b", outputs=[Value("b", t(1, 1))]).outputs[0])
        node = graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch},
                              outputs=[Value("y", t(1, 1))])
        graph.add_output(node.outputs[0])
        return graph

    graph = build(False)
    assert run_infer(graph)
    assert_structurally_equal(graph, build(True))


def test_impossible_inferred_dims_are_ignored_not_fatal():
    """onnx's data propagation infers dim -1 inside an expanded AffineGrid's untaken branch."""
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    from graph_ir.io.onnx_import import import_onnx
    from passes import run_pipeline

    case = next(c for c in collect_testcases() if c.name == "test_affine_grid_3d_expanded")
    graph = import_onnx(case.model)
    result = run_pipeline(graph, "shape-infer", verify_each=True)
    result.graph.verify()
