"""`compiler-opt optimize`: summary, output, HTML and JSON reports, and the exit codes 2 (bad
input) and 3 (the result computes something else; nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler_opt.cli.main import main

pytest.importorskip("onnxruntime")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_optimize_writes_model_summary_and_reports(capsys, example_model, tmp_path):
    out_model = tmp_path / "cnn.opt.onnx"
    code, out, err = _run(
        capsys, "optimize", str(example_model), "-o", str(out_model), "--devices", "2xV100", "--method", "m-etf",
        "--check", "--report", str(tmp_path / "report"), "--report-json", str(tmp_path / "r.json"), "-O2",
    )
    assert code == 0, err
    onnx.checker.check_model(onnx.load(out_model), full_check=True)
    assert "simulated step time (us)" in out and "BatchNormalization" in out and "time per pass" in out
    assert "outputs equal in onnxruntime" in out
    report = json.loads((tmp_path / "r.json").read_text())
    for key in ("step_time_before_s", "step_time_after_s", "lower_bound_s", "method", "search_seconds", "numerics_ok", "devices"):
        assert key in report
    assert report["numerics_ok"] is True and report["method"] == "m-etf" and report["devices"] == "2xV100"
    assert report["nodes_before"] == 55 and report["nodes_after"] == 18
    page = (tmp_path / "report" / "report.html").read_text()
    assert '<svg class="placement"' in page and '<svg class="gantt"' in page and "<script" not in page
    assert "fold-conv-bn" in page  # the per-pass change log


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a protobuf")
    code, _, err = _run(capsys, "optimize", str(bad), "-o", str(tmp_path / "o.onnx"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("compiler-opt: error:")
    code, _, err = _run(capsys, "optimize", str(bad), "-o", str(tmp_path / "o.onnx"), "--input-shape", "image=1,3")
    assert code == 2 and "--input-shape" in err
    assert not (tmp_path / "o.onnx").exists()


def test_a_wrong_rewrite_is_caught_by_check_and_exits_3(capsys, example_model, tmp_path, monkeypatch):
    # A model whose batch norms really shift and scale (the bundled one has fresh statistics).
    model = onnx.load(example_model)
    rng = np.random.default_rng(0)
    for init in model.graph.initializer:
        if "running_var" in init.name or "running_mean" in init.name:
            values = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(rng.uniform(0.5, 2.0, values.shape).astype(values.dtype), init.name))
    path = tmp_path / "stats.onnx"
    onnx.save(model, path)

    from passes.onnx import conv_fold

    original_call = conv_fold.FoldConvBatchNorm.call

    def forgets_the_mean(self, graph):  # noqa: ANN001, ANN202 - the bug: running means treated as 0
        for node in graph:
            if node.op_type == "BatchNormalization":
                mean = node.inputs[3]
                if mean.const is not None:
                    zero = graph.add_constant(numpy_helper_tensor(np.zeros(mean.shape, np.float32)), "zero_mean")
                    node.set_input(3, zero)
        return original_call(self, graph)

    monkeypatch.setattr(conv_fold.FoldConvBatchNorm, "call", forgets_the_mean)
    code, _, err = _run(capsys, "optimize", str(path), "-o", str(tmp_path / "o.onnx"), "--method", "single-device", "--check")
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "numerical check failed" in lines[0] and "'logits'" in lines[0]
    assert not (tmp_path / "o.onnx").exists()


def numpy_helper_tensor(array: np.ndarray):
    from graph_ir import NumpyTensor

    return NumpyTensor(array)


def test_readme_optimize_command_runs(capsys, example_model, tmp_path):
    """The README's first command, as written there (paths made local)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "compiler-opt optimize examples/small_cnn.onnx" in readme
    code, out, _ = _run(capsys, "optimize", str(example_model), "-o", str(tmp_path / "small_cnn.opt.onnx"), "--report", str(tmp_path / "report"))
    assert code == 0 and (tmp_path / "report" / "report.html").is_file()


_TWO_MODULES = """HloModule first

ENTRY main {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}

// -----

HloModule second

ENTRY main {
  p = f32[8] parameter(0)
  e = f32[8] exponential(p)
  ROOT a = f32[8] add(e, p)
}
"""


def test_optimize_picks_one_module_of_an_hlo_file(capsys, tmp_path):
    pytest.importorskip("jax")
    import compiler_opt
    from graph_ir.errors import CompilerOptError

    path = tmp_path / "two.hlo"
    path.write_text(_TWO_MODULES)
    code, _, err = _run(capsys, "optimize", str(path), "-o", str(tmp_path / "o.hlo"), "--method", "m-etf")
    assert code == 2 and "--module N" in err  # the flag the error names exists
    code, out, err = _run(capsys, "optimize", str(path), "-o", str(tmp_path / "o.hlo"), "--method", "m-etf", "--module", "1", "--check")
    assert code == 0, err
    assert "outputs equal" in out and "exponential" in (tmp_path / "o.hlo").read_text()
    assert compiler_opt.optimize(path, method="m-etf", module=0).graph.name == "first"
    with pytest.raises(CompilerOptError, match="give the file's path") as info:
        compiler_opt.optimize(_TWO_MODULES, method="m-etf", module=1)
    assert info.value.field == "module"
