"""The -O levels on real exports: the bundled small CNN (torch dynamo export, optimizer off) and
onnx-package models; outputs equal in onnxruntime, `check_model(full_check=True)` passes."""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np
import onnx
import pytest

import graph_ir
from graph_ir.io.onnx_export import export_onnx
from passes import run_pipeline
from passes.basic import ConstantFolding
from passes.onnx import opt_level_pipeline

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-4, 1e-5  # folded BatchNorm weights round once in float32


def _run(model: onnx.ModelProto, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _optimized(path, level: int):
    original = onnx.load(path)
    graph = run_pipeline(graph_ir.load(path), opt_level_pipeline(level)).graph
    graph.verify()
    model = export_onnx(graph)
    onnx.checker.check_model(model, full_check=True)
    inits = {i.name for i in original.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d.dim_value or 1 for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in original.graph.input
        if i.name not in inits
    }
    for got, want in zip(_run(model, feeds), _run(original, feeds)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    return original, model


def test_o2_on_the_small_cnn_folds_batchnorm_and_the_bias_chains(example_model):
    original, model = _optimized(example_model, 2)
    counts = Counter(n.op_type for n in model.graph.node)
    assert len(original.graph.node) == 55
    assert counts == {"Conv": 6, "Relu": 6, "Add": 2, "MaxPool": 1, "ReduceMean": 1, "Reshape": 1, "Gemm": 1}


@pytest.mark.parametrize("name", ["light_inception_v1", "light_resnet50"])
def test_o2_on_onnx_package_models(onnx_backend_data, name):
    path = onnx_backend_data / "light" / f"{name}.onnx"
    original, model = _optimized(path, 2)
    assert len(model.graph.node) <= len(original.graph.node)
    # The "light" models make their weights at run time with ConstantOfShape (folding those would
    # grow the file past the size limit), so their BatchNormalizations have no constant weights.
    assert not any(n.op_type in ("Dropout", "Identity") for n in model.graph.node)


def test_constant_folding_reports_what_the_size_limit_skipped(caplog):
    from graph_ir import Graph, NumpyTensor

    graph = Graph("main")
    w = graph.add_constant(NumpyTensor(np.ones((64, 64), np.float32)), "w")  # 16 KiB
    t = graph.add_node("Transpose", [w], attrs={"perm": (1, 0)}, name="weight_t").outputs[0]
    graph.add_output(t)
    graph = run_pipeline(graph, "shape-infer").graph
    folding = ConstantFolding(size_limit=1024)
    with caplog.at_level(logging.INFO, logger="passes.basic.constant_folding"):
        assert not folding(graph).modified
    assert folding.report["skipped_for_size"] == [("weight_t", 16384)]
    assert "size-limit=1024" in caplog.text and "weight_t" in caplog.text
    assert ConstantFolding(size_limit=1024, same_size=True)(graph).modified  # no bigger than its input
    assert not any(True for _ in graph)
