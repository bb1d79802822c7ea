"""The bookkeeping behind two speed-ups of the -O2 clean-up: nodes count their subgraph
attributes (whole-model walks skip the rest), and the exporter can write big weights as typed
inputs for shape inference."""

from __future__ import annotations

import numpy as np

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value
from graph_ir.attrs import Attr
from graph_ir.io.onnx_export import export_onnx


def _body() -> Graph:
    body = Graph("body")
    x = body.add_input(Value("b_in", TensorType(DType.FLOAT32, (2,))))
    body.add_output(body.add_node("Relu", [x]).outputs[0])
    return body


def test_subgraph_attributes_are_counted_through_set_and_remove():
    graph = Graph("main")
    cond = graph.add_input(Value("c", TensorType(DType.BOOL, ())))
    node = graph.add_node("If", [cond], attrs={"then_branch": _body(), "else_branch": _body()})
    assert node.has_subgraphs and len(list(graph.subgraphs())) == 2
    node.set_attr(Attr.infer("then_branch", _body()))  # replaced, not added
    assert len(list(node.subgraphs())) == 2 and len(list(graph.subgraphs())) == 2
    node.remove_attr("then_branch")
    node.remove_attr("else_branch")
    assert not node.has_subgraphs and list(graph.subgraphs()) == [] and list(node.subgraphs()) == []
    node.set_attr(Attr.infer("alpha", 1.0))
    assert not node.has_subgraphs


def test_export_can_write_big_weights_as_typed_inputs():
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, (4, 300))))
    w = graph.add_constant(NumpyTensor(np.ones((300, 5), np.float32)), "w")
    s = graph.add_constant(NumpyTensor(np.array([5, 4])), "s")
    y = graph.add_node("MatMul", [x, w]).outputs[0]
    graph.add_output(graph.add_node("Reshape", [y, s]).outputs[0])
    full = export_onnx(graph)
    light = export_onnx(graph, weights_as_inputs_above=1024)
    assert [i.name for i in full.graph.initializer] == ["w", "s"]
    assert [i.name for i in light.graph.initializer] == ["s"]  # 1500 elements > 1024
    weight = [i for i in light.graph.input if i.name == "w"][0]
    assert [d.dim_value for d in weight.type.tensor_type.shape.dim] == [300, 5]


def test_analysis_export_leaves_metadata_out():
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, (2,))))
    node = graph.add_node("Relu", [x])
    node.metadata_props["pkg.torch.onnx.stack_trace"] = "File model.py, line 1"
    node.device = "gpu1"
    graph.add_output(node.outputs[0])
    assert {p.key for p in export_onnx(graph).graph.node[0].metadata_props} >= {"pkg.torch.onnx.stack_trace"}
    assert list(export_onnx(graph, metadata=False).graph.node[0].metadata_props) == []
