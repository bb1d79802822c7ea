from __future__ import annotations

import numpy as np

from graph_ir import DType, Graph, TensorType, Value
from passes.onnx import FoldChains, FuseGemm, SimplifyCasts

from _build import const, f32, ops, typed  # noqa: I001 - the folder's helper


def test_transpose_pairs_compose_and_reshape_pairs_keep_the_last(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3, 4))
    a = graph.add_node("Transpose", [x], attrs={"perm": (2, 0, 1)}).outputs[0]
    b = graph.add_node("Transpose", [a], attrs={"perm": (1, 0, 2)}).outputs[0]
    c = graph.add_node("Reshape", [b, const(graph, np.array([6, 4]), "s1")]).outputs[0]
    d = graph.add_node("Reshape", [c, const(graph, np.array([-1]), "s2")]).outputs[0]
    graph.add_output(d)
    graph = typed(graph)
    original = graph.clone()
    assert FoldChains()(graph).modified
    assert ops(graph) == ["Transpose", "Reshape"]
    assert graph.nodes[0].attr("perm") == (0, 2, 1)  # p[q] = (2,0,1)[(1,0,2)]
    assert_same_numerics(original, graph)


def test_reshape_with_a_zero_entry_reads_the_intermediate_and_stays():
    graph = Graph("main")
    x = graph.add_input(f32("x", 2, 3, 4))
    c = graph.add_node("Reshape", [x, const(graph, np.array([6, 4]), "s1")]).outputs[0]
    graph.add_output(graph.add_node("Reshape", [c, const(graph, np.array([0, 2, 2]), "s2")]).outputs[0])
    assert not FoldChains()(typed(graph)).modified


def test_matmul_plus_bias_becomes_gemm_only_for_matrices(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 5, 3))
    m = graph.add_node("MatMul", [x, const(graph, np.ones((3, 4), np.float32), "w")]).outputs[0]
    graph.add_output(graph.add_node("Add", [const(graph, np.arange(4, dtype=np.float32), "b"), m]).outputs[0])
    x3 = graph.add_input(f32("x3", 2, 5, 3))
    m3 = graph.add_node("MatMul", [x3, const(graph, np.ones((3, 4), np.float32), "w3")]).outputs[0]
    graph.add_output(graph.add_node("Add", [m3, const(graph, np.arange(4, dtype=np.float32), "b3")]).outputs[0])
    graph = typed(graph)
    original = graph.clone()
    assert FuseGemm()(graph).modified
    assert ops(graph) == ["Gemm", "MatMul", "Add"]
    assert_same_numerics(original, graph)


def test_castlike_becomes_cast_and_lossless_double_casts_collapse(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 4))
    i = graph.add_input(Value("i", TensorType(DType.INT32, (4,))))
    a = graph.add_node("CastLike", [i, x]).outputs[0]  # int32 -> like f32
    wide = graph.add_node("Cast", [x], attrs={"to": 11}).outputs[0]  # f32 -> f64 (lossless)
    back = graph.add_node("Cast", [wide], attrs={"to": 1}).outputs[0]  # -> f32
    narrow = graph.add_node("Cast", [x], attrs={"to": 10}).outputs[0]  # f32 -> f16 (lossy)
    again = graph.add_node("Cast", [narrow], attrs={"to": 1}).outputs[0]
    graph.add_output(graph.add_node("Add", [a, back]).outputs[0])
    graph.add_output(again)
    graph = typed(graph)
    original = graph.clone()
    assert SimplifyCasts()(graph).modified
    graph.verify()
    casts = [(n.inputs[0].name, n.attr("to")) for n in graph if n.op_type == "Cast"]
    assert ("i", 1) in casts and ("x", 1) in casts  # CastLike -> Cast; f32->f64->f32 reads x
    assert sum(1 for n in graph if n.op_type == "Cast" and n.inputs[0].producer is not None) == 1  # f16 round trip kept
    assert "CastLike" not in ops(graph)
    assert_same_numerics(original, graph)
