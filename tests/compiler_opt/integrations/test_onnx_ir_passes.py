"""compiler-opt passes as onnx_ir passes: contracts, a mixed pipeline with onnx_ir's and
onnxscript's own passes on an ONNX-package model, equal outputs in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common
import onnxruntime as ort
import pytest
from onnx_ir.passes import FunctionalPass, InPlacePass

from compiler_opt.integrations import onnx_ir_pass
from passes.infra.base import PassError
from passes.infra.registry import UnknownPassError


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.fixture(scope="module")
def squeezenet(onnx_backend_data) -> onnx.ModelProto:
    return onnx.load(onnx_backend_data / "light" / "light_squeezenet.onnx")


def test_mixed_pipeline_with_onnx_ir_and_onnxscript_passes_matches_onnxruntime(squeezenet):
    from onnxscript import rewriter
    from onnxscript.optimizer._constant_folding import FoldConstantsPass

    model = ir.serde.deserialize_model(squeezenet)
    ours = [onnx_ir_pass("cse"), onnx_ir_pass("fuse", max_nodes=8), onnx_ir_pass("schedule", target="host", reorder=True)]
    manager = ir.passes.PassManager(
        [
            common.InlinePass(),
            FoldConstantsPass(shape_inference=True, input_size_limit=1024, output_size_limit=1 << 20),
            ours[0],
            rewriter.RewritePass(rewriter._DEFAULT_REWRITE_RULES),  # onnxscript's optimizer rules
            ours[1],
            ours[2],
            common.RemoveUnusedNodesPass(),
            common.TopologicalSortPass(),
        ]
    )
    assert manager.in_place  # onnxscript's optimizer sequence requires in-place passes
    result = manager(model)
    assert result.model is model and result.modified
    out = ir.serde.serialize_model(result.model)
    onnx.checker.check_model(out, full_check=True)
    props = [dict((p.key, p.value) for p in n.metadata_props) for n in out.graph.node]
    groups = {p["compiler_opt.fusion_group"] for p in props if "compiler_opt.fusion_group" in p}
    assert len(groups) >= 5  # squeezenet's conv+relu chains were grouped
    assert sum("compiler_opt.priority" in p for p in props) == len(out.graph.node)
    feeds = _feeds(squeezenet)
    expected = _session(squeezenet).run(None, feeds)
    got = _session(out).run(None, feeds)
    assert float(np.std(expected[0])) > 0
    for a, b in zip(expected, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_fused_groups_as_functions_run_in_onnxruntime(squeezenet):
    model = ir.serde.deserialize_model(squeezenet)
    fuse = onnx_ir_pass("fuse", fused_groups_as_functions=True)
    result = fuse(model)
    out = ir.serde.serialize_model(result.model)
    assert len(out.functions) >= 5 and all(f.domain == "compiler_opt.fused" for f in out.functions)
    assert len(out.graph.node) < len(squeezenet.graph.node)
    feeds = _feeds(squeezenet, seed=1)
    np.testing.assert_allclose(_session(out).run(None, feeds)[0], _session(squeezenet).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


def test_functional_pass_leaves_its_input_alone(squeezenet):
    model = ir.serde.deserialize_model(squeezenet)
    before = ir.serde.serialize_model(model).SerializeToString()
    pass_ = onnx_ir_pass("fuse", in_place=False)
    assert isinstance(pass_, FunctionalPass) and not pass_.in_place and not pass_.changes_input
    result = pass_(model)
    assert result.model is not model and result.modified
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert any("compiler_opt.fusion_group" in n.metadata_props for n in result.model.graph)


def test_in_place_pass_returns_the_same_model_and_reports_no_change():
    graph = ir.Graph(
        inputs=[x := ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))],
        outputs=[],
        nodes=[relu := ir.node("Relu", [x])],
        opset_imports={"": 18},
    )
    relu.outputs[0].name = "y"
    relu.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
    relu.outputs[0].shape = ir.Shape([2])
    graph.outputs.append(relu.outputs[0])
    model = ir.Model(graph, ir_version=9)
    pass_ = onnx_ir_pass("dce")
    assert isinstance(pass_, InPlacePass)
    result = pass_(model)
    assert result.model is model and not result.modified
    assert [n.op_type for n in model.graph] == ["Relu"]


def test_bad_names_and_options_raise_project_errors():
    with pytest.raises(UnknownPassError, match="unknown pass 'fusee'.*did you mean 'fuse'"):
        onnx_ir_pass("fusee")
    with pytest.raises(PassError, match="pass 'fuse' has no option 'max_notes'"):
        onnx_ir_pass("fuse", max_notes=3)
    assert onnx_ir_pass("schedule", **{"strategy": "memory"}).inner.strategy == "memory"


def test_the_target_reaches_the_pass_and_a_contradicting_option_is_refused(squeezenet):
    from passes.infra.context import TargetConflictError

    with pytest.raises(TargetConflictError, match="pass 'm-etf' option devices=8xA100 contradicts the target"):
        onnx_ir_pass("m-etf", target="2xV100", devices="8xA100")
    model = ir.serde.deserialize_model(squeezenet)
    result = onnx_ir_pass("m-etf", target="2xV100")(model)
    assert result.modified
    devices = {n.metadata_props.get("compiler_opt.device") for n in result.model.graph}
    assert devices <= {"gpu0", "gpu1"} and devices & {"gpu0", "gpu1"}, devices
