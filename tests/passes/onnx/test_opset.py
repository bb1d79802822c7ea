"""`upgrade-opset`: old operator versions onnxruntime dropped, converted by onnx and run there."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import graph_ir  # noqa: E402
from passes import run_pipeline  # noqa: E402
from passes.infra.base import PassError  # noqa: E402


def _expected(case):  # type: ignore[no-untyped-def]
    import onnx
    from onnx import numpy_helper

    data = case / "test_data_set_0"
    return (numpy_helper.to_array(onnx.load_tensor(str(data / "input_0.pb"))),
            numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb"))))


@pytest.mark.parametrize("name", ["test_BatchNorm2d_eval", "test_Linear", "test_PReLU_2d_multiparam", "test_AvgPool2d", "test_GLU", "test_ReflectionPad2d"])
def test_opset_6_models_run_in_onnxruntime_after_the_upgrade(onnx_backend_data, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    """Each of these imports opset 6 or older, which onnxruntime refuses ("Could not find an
    implementation for Gemm(6)"); upgraded, it loads and gives the outputs onnx ships with it."""
    import onnxruntime as ort

    case = onnx_backend_data / "pytorch-converted" / name
    graph = graph_ir.load(str(case / "model.onnx"))
    assert graph.opset_imports[""] < 7
    if name != "test_ReflectionPad2d":  # Pad-2 still runs; its conversion makes new initializers (IR version)
        with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
            ort.InferenceSession(str(case / "model.onnx"))
    result = run_pipeline(graph, "upgrade-opset")
    assert result.modified and result.graph.opset_imports[""] == 13
    result.graph.verify()
    out = tmp_path / "up.onnx"
    graph_ir.save(result.graph, str(out))
    session = ort.InferenceSession(str(out))
    given, want = _expected(case)
    got = session.run(None, {session.get_inputs()[0].name: given})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_never_downgrades_and_leaves_other_formats_alone(onnx_backend_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    graph = graph_ir.load(str(onnx_backend_data / "light" / "light_squeezenet.onnx"))  # opset 9
    assert not run_pipeline(graph, "upgrade-opset{version=8}").modified
    hlo = tmp_path / "m.hlo"
    hlo.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    assert not run_pipeline(graph_ir.load(str(hlo)), "upgrade-opset").modified


def test_a_conversion_onnx_cannot_make_is_a_pass_error(onnx_backend_data) -> None:  # type: ignore[no-untyped-def]
    graph = graph_ir.load(str(onnx_backend_data / "pytorch-converted" / "test_Linear" / "model.onnx"))
    with pytest.raises(PassError, match="upgrade-opset"):
        run_pipeline(graph, "upgrade-opset{version=999}")


def test_the_check_and_the_fusion_tuner_point_to_the_upgrade(onnx_backend_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.api import optimize
    from cost_model.profiling.ort_backend import old_opset_hint

    result = optimize(str(onnx_backend_data / "pytorch-converted" / "test_Linear" / "model.onnx"), target="2xV100", budget_s=0.5, check=True)
    assert not result.numerics.ran and "upgrade-opset" in result.numerics.message
    assert old_opset_hint("Could not find an implementation for Gemm(13) node") == ""


@pytest.mark.slow  # 112 models, about 30 s
def test_every_old_opset_model_of_the_onnx_package_matches_its_shipped_outputs(onnx_backend_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """All models the onnx package ships below opset 7 (112 with onnx 1.23), upgraded, run in
    onnxruntime and give the outputs stored beside them (NaN where they store NaN)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    old = [p for p in sorted(onnx_backend_data.rglob("*.onnx"))
           if {o.domain: o.version for o in onnx.load(str(p), load_external_data=False).opset_import}.get("", 99) < 7]
    assert len(old) >= 100
    failures = []
    for path in old:
        out = tmp_path / "up.onnx"
        graph_ir.save(run_pipeline(graph_ir.load(str(path)), "upgrade-opset").graph, str(out))
        session = ort.InferenceSession(str(out))
        data = path.parent / "test_data_set_0"
        if not data.is_dir():
            continue
        given = [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in sorted(data.glob("input_*.pb"))]
        want = [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in sorted(data.glob("output_*.pb"))]
        got = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), given)})
        if not all(np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True) for a, b in zip(got, want)):
            failures.append(str(path.relative_to(onnx_backend_data)))
    assert not failures
