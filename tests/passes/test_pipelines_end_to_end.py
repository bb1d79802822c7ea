"""The basic passes together, to a fixpoint, on generated and bundled ONNX models."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value
from passes import PassManager, run_pipeline
from passes.infra import TimingInstrument

PIPELINE = "topo-sort,shape-infer,constant-folding,cse,dce"


def redundant_model() -> Graph:
    """A small net with foldable weight preprocessing, duplicated branches and dead code."""
    graph = Graph("main", opset_imports={"": 18})
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, (4, 8))))
    rng = np.random.default_rng(0)
    raw = graph.add_constant(NumpyTensor(rng.standard_normal((16, 8)).astype(np.float32)), "raw")
    scale = graph.add_constant(NumpyTensor(np.float32(0.5)), "scale")
    scaled = graph.add_node("Mul", [raw, scale])
    weight = graph.add_node("Transpose", [scaled.outputs[0]], attrs={"perm": [1, 0]})
    heads = []
    for _ in range(2):  # the same head twice: cse merges them
        mm = graph.add_node("MatMul", [x, weight.outputs[0]])
        heads.append(graph.add_node("Relu", [mm.outputs[0]]))
    graph.add_node("Exp", [heads[0].outputs[0]])  # dead
    shape = graph.add_node("Shape", [x])
    target = graph.add_constant(NumpyTensor(np.array([2, 32], np.int64)), "target")
    total = graph.add_node("Add", [heads[0].outputs[0], heads[1].outputs[0]])
    graph.add_output(graph.add_node("Reshape", [total.outputs[0], target]).outputs[0])
    graph.add_output(graph.add_node("Cast", [shape.outputs[0]], attrs={"to": DType.FLOAT32.onnx_code}).outputs[0])
    return graph


def test_fixpoint_pipeline_simplifies_and_keeps_numerics(assert_same_numerics) -> None:
    graph = redundant_model()
    original = graph.clone()
    timing = TimingInstrument()
    manager = PassManager(PIPELINE, fixpoint=True, verify_each=True, instruments=[timing])
    result = manager.run(graph)
    assert result.modified and manager.iterations >= 2
    assert [n.op_type for n in graph] == ["MatMul", "Relu", "Add", "Reshape"]
    assert len(graph.initializers) == 3  # folded weight, reshape target, folded shape-as-float
    assert_same_numerics(original, graph)
    assert {row.pass_text for row in timing.rows} == set(PIPELINE.split(","))
    assert not run_pipeline(graph, PIPELINE, verify_each=True).modified


def test_bundled_example_model(example_model: Path, assert_same_numerics) -> None:
    from graph_ir.io.onnx_import import import_onnx

    graph = import_onnx(str(example_model))
    original = import_onnx(str(example_model))
    run_pipeline(graph, PIPELINE, fixpoint=True, verify_each=True)
    assert len(graph) <= len(original)
    assert_same_numerics(original, graph)
