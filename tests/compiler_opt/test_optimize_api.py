"""`compiler_opt.optimize()` on an onnx-package model and the bundled CNN: the result runs equal
in onnxruntime, its simulated step time respects the lower bound, and the per-pass log adds up.
(GraphDef and HLO inputs: test_optimize_tf_hlo.py, which imports TensorFlow at collection.)"""

from __future__ import annotations

import onnx
import pytest

import compiler_opt
from compiler_opt.api import OptimizeError, OptimizeResult

pytest.importorskip("onnxruntime")


def test_optimize_an_onnx_package_model_path(onnx_backend_data):
    path = onnx_backend_data / "light" / "light_squeezenet.onnx"
    result = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", budget_s=5, check=True)
    assert isinstance(result, OptimizeResult)
    assert result.numerics is not None and result.numerics.ok, result.numerics.one_line()
    assert result.method == "m-etf" and result.format == "onnx"
    assert result.step_time_after_s >= result.lower_bound_s > 0
    assert sum(result.ops_after.values()) == sum(1 for _ in result.graph.all_nodes())
    stages = [p.stage for p in result.passes]
    assert stages[0] == "clean-up" and "fusion" in stages and "placement" in stages and stages[-1] == "schedule"
    assert any(n.device is not None for n in result.graph)
    assert set(result.to_json()) >= {"step_time_before_s", "step_time_after_s", "lower_bound_s", "method", "search_seconds", "numerics_ok", "devices"}


def test_auto_keeps_the_best_candidate_and_takes_a_model_proto(example_model):
    result = compiler_opt.optimize(onnx.load(example_model), target="4xV100", method="auto", budget_s=0, check=True)
    assert result.numerics.ok
    assert len(result.candidates) >= 2  # the first two always run, then the budget (0 s) stops it
    assert result.method == min(result.candidates, key=result.candidates.get)
    assert result.step_time_after_s <= min(result.candidates.values()) * 1.0001 or "schedule" in [p.stage for p in result.passes]
    assert any("budget" in n for n in result.notes)
    assert sum(result.ops_after.values()) == 18  # -O2: batch norms folded, bias chains gone


def test_bad_arguments_are_errors_naming_the_field(example_model):
    with pytest.raises(OptimizeError, match="unknown task"):
        compiler_opt.optimize(str(example_model), tasks=("placement", "tiling"))
    with pytest.raises(OptimizeError, match="unknown placement method 'm-eft'"):
        compiler_opt.optimize(str(example_model), method="m-eft")
    with pytest.raises(Exception, match="model must be a path"):
        compiler_opt.optimize(42)
    with pytest.raises(OptimizeError, match="opt_level must be 0, 1, 2 or 3, got 9") as caught:
        compiler_opt.optimize(str(example_model), opt_level=9)
    assert caught.value.field == "opt_level"
    for budget in (-1, float("nan"), float("inf")):  # NaN passed every `< 0` check before the forty-ninth session
        with pytest.raises(OptimizeError, match="budget must be a finite number of seconds >= 0") as caught:
            compiler_opt.optimize(str(example_model), budget_s=budget)
        assert caught.value.field == "budget_s"


def test_input_shape_makes_the_shape_chain_fold():
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
        helper.make_tensor("rest", TensorProto.INT64, [1], [12]),
    ]
    graph = helper.make_graph(
        nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    dynamic = compiler_opt.optimize(model, tasks=(), check=False)
    assert "Shape" in dynamic.ops_after  # the batch is unknown: the chain must stay
    result = compiler_opt.optimize(model, tasks=(), input_shapes={"x": (2, 3, 4)}, check=True)
    assert result.ops_after == {"Reshape": 1} and result.numerics.ok
    from compiler_opt.api.loading import ModelFormatError

    for bad in ((-1, 3, 4), (2.5, 3, 4)):  # the input is named, not a bare shape error from deep in the IR
        with pytest.raises(ModelFormatError, match="input 'x': every dimension must be an integer >= 0"):
            compiler_opt.optimize(model, tasks=(), input_shapes={"x": bad})
