"""`compiler-opt convert` and `compiler-opt passes`, plus subprocess smoke and start-up tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

import graph_ir
from compiler_opt.cli.main import main

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY_FRAMEWORKS = ("torch", "tensorflow", "jax")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _logits(path: Path) -> np.ndarray:
    import onnxruntime as ort

    image = np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"image": image})[0]


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from passes.infra import registry

    monkeypatch.setattr(registry, "_registry", dict(registry._registry))


# -- convert -------------------------------------------------------------------------------------
def test_convert_without_passes_round_trips(
    capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path
) -> None:
    target = tmp_path / "copy.onnx"
    code, out, err = _run(capsys, "convert", str(example_model), str(target))
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith(f"converted {example_model} (onnx, 55 nodes) -> {target}")
    assert "unchanged" in out
    onnx.checker.check_model(onnx.load(str(target)), full_check=True)
    np.testing.assert_array_equal(_logits(target), _logits(example_model))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.onnx"]  # no staging leftovers


def test_convert_with_pipeline_simplifies_and_keeps_numerics(
    capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path
) -> None:
    target = tmp_path / "small_cnn.opt.onnx"
    code, out, err = _run(capsys, "convert", str(example_model), str(target), "--passes", "dce,cse,shape-infer")
    assert code == 0, err
    assert "with passes dce,cse,shape-infer: modified" in out
    optimized = onnx.load(str(target))
    # The export repeats one Shape/Constant/CastLike chain per conv bias: CSE merges the copies.
    assert len(optimized.graph.node) < len(onnx.load(str(example_model)).graph.node)
    np.testing.assert_allclose(_logits(target), _logits(example_model), rtol=1e-5, atol=1e-6)


def test_convert_unknown_pass_is_one_line(capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    code, out, err = _run(capsys, "convert", str(example_model), str(target), "-p", "dce,no-such-pass")
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("compiler-opt: error: ") and "no-such-pass" in err
    assert not target.exists()


def test_convert_unknown_output_extension(capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path) -> None:
    code, _, err = _run(capsys, "convert", str(example_model), str(tmp_path / "out.bin"))
    assert code == 2
    assert err.startswith(f"compiler-opt: error: {tmp_path / 'out.bin'}: unknown model format")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["folder-as-target", "missing-folder"])
def test_convert_bad_target_path(
    capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path, where: str
) -> None:
    if where == "folder-as-target":
        target = tmp_path / "already_a_dir.onnx"
        target.mkdir()
    else:
        target = tmp_path / "nowhere" / "out.onnx"
    code, _, err = _run(capsys, "convert", str(example_model), str(target))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("compiler-opt: error: ")
    assert [p.name for p in tmp_path.iterdir()] == (["already_a_dir.onnx"] if where == "folder-as-target" else [])


def test_failing_exporter_leaves_target_untouched(
    capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graph_ir.io.onnx_export as onnx_export
    from graph_ir.errors import ExportError

    def half_write(graph, path, **options) -> None:
        Path(path).write_bytes(b"\x08\x07partial")  # a crash halfway through writing
        Path(str(path) + ".data").write_bytes(b"side file")
        raise ExportError("disk full (simulated)", file=os.fspath(path))

    monkeypatch.setattr(onnx_export, "save_onnx", half_write)
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous contents")
    code, _, err = _run(capsys, "convert", str(example_model), str(target))
    assert code == 2
    assert err.splitlines() == [f"compiler-opt: error: {target}: disk full (simulated)"]
    assert target.read_bytes() == b"previous contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_failing_pass_writes_nothing(
    capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path, isolated_registry: None
) -> None:
    from passes.infra import Pass, register_pass

    @register_pass
    @dataclass(frozen=True)
    class ExplodingPass(Pass):
        name = "explode-for-test"

        def call(self, graph):
            raise ZeroDivisionError("boom")

    target = tmp_path / "out.onnx"
    code, _, err = _run(capsys, "convert", str(example_model), str(target), "--passes", "dce,explode-for-test")
    assert code == 1  # a pass that crashes is our bug, not bad input (issue 12): exit 1, naming the pass
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("compiler-opt: internal error: ") and "explode-for-test" in lines[0]
    assert list(tmp_path.iterdir()) == []


# -- passes --------------------------------------------------------------------------------------
def test_passes_json_lists_registered_passes(capsys: pytest.CaptureFixture[str]) -> None:
    import passes

    code, out, _ = _run(capsys, "passes", "--json")
    assert code == 0
    described = json.loads(out)
    assert [entry["name"] for entry in described] == list(passes.available_passes())
    by_name = {entry["name"]: entry for entry in described}
    for name in ("dce", "cse", "shape-infer"):
        assert by_name[name]["summary"]
    for entry in described:
        for opt in entry["options"]:
            assert set(opt) == {"name", "type", "default", "required", "doc"}
            assert "_" not in opt["name"]  # kebab-case, as pipelines spell them


def test_passes_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "passes")
    assert code == 0
    assert any(line.split()[:1] == ["dce"] for line in out.splitlines())


# -- subprocesses --------------------------------------------------------------------------------
def _cli_command() -> list[str]:
    script = Path(sys.executable).with_name("compiler-opt")
    return [str(script)] if script.exists() else [sys.executable, "-m", "compiler_opt.cli.main"]


def test_console_script_smoke(example_model: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [*_cli_command(), "inspect", str(example_model), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ops"]["Conv"] == 6
    missing = tmp_path / "missing.onnx"
    proc = subprocess.run([*_cli_command(), "inspect", str(missing)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"compiler-opt: error: {missing}: no such file"]


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_help_and_inspect_do_not_import_frameworks(example_model: Path) -> None:
    helped = _modules_after(
        "from compiler_opt.cli.main import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])"
    )
    # --help needs nothing but the standard library.
    assert not {"numpy", "graph_ir", "onnx"} & helped
    inspected = _modules_after(
        "from compiler_opt.cli.main import main\n"
        "import contextlib, io\n"
        f"with contextlib.redirect_stdout(io.StringIO()): assert main(['inspect', {str(example_model)!r}, '--json']) == 0"
    )
    assert "graph_ir.io.onnx_import" in inspected  # the probe really ran an import
    loaded = {name.split(".")[0] for name in inspected}
    assert not loaded & set(HEAVY_FRAMEWORKS), loaded & set(HEAVY_FRAMEWORKS)


def test_package_import_is_light() -> None:
    loaded = _modules_after("import compiler_opt")
    assert not {"numpy", "graph_ir", "onnx", *HEAVY_FRAMEWORKS} & loaded


@pytest.mark.slow
def test_readme_example_commands(example_model: Path, tmp_path: Path) -> None:
    """The README's main job, end to end in a subprocess."""
    target = tmp_path / "small_cnn.opt.onnx"
    cli = _cli_command()
    inspected = subprocess.run([*cli, "inspect", str(example_model)], capture_output=True, text=True, timeout=300)
    assert inspected.returncode == 0, inspected.stderr
    assert "FLOPs" in inspected.stdout and "BatchNormalization" in inspected.stdout
    argv = ["convert", str(example_model), str(target), "--passes", "dce,cse,shape-infer"]
    converted = subprocess.run([*cli, *argv], capture_output=True, text=True, timeout=300)
    assert converted.returncode == 0, converted.stderr
    onnx.checker.check_model(onnx.load(str(target)), full_check=True)
    np.testing.assert_allclose(_logits(target), _logits(example_model), rtol=1e-5, atol=1e-6)


def test_bad_pipeline_fails_before_import(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graph_ir.io

    def must_not_load(*args: object, **kwargs: object):
        raise AssertionError("the model was loaded before the pipeline was checked")

    monkeypatch.setattr(graph_ir.io, "load_with_format", must_not_load)
    model = tmp_path / "m.onnx"
    code, _, err = _run(capsys, "convert", str(model), str(tmp_path / "out.onnx"), "--passes", "dce{unclosed")
    assert code == 2
    # The typo is the pipeline's, not the input file's.
    assert len(err.splitlines()) == 1 and err.startswith("compiler-opt: error: --passes dce{unclosed: ")


def test_convert_devices_is_the_pipeline_target(capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path) -> None:
    target = tmp_path / "placed.onnx"
    code, out, err = _run(capsys, "convert", str(example_model), str(target), "--devices", "2xV100", "--passes", "m-etf,schedule")
    assert code == 0, err
    assert "on devices=2xV100 costs=roofline objective=latency" in out
    placed = graph_ir.load(target)
    assert {n.device for n in placed} <= {"gpu0", "gpu1"} and all(n.priority is not None for n in placed)


def test_convert_target_conflicts_exit_2_naming_both(capsys: pytest.CaptureFixture[str], example_model: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "out.onnx"
    code, _, err = _run(capsys, "convert", str(example_model), str(out_path), "--devices", "2xV100", "--passes", "m-etf{devices=8xA100}")
    assert code == 2 and len(err.splitlines()) == 1
    assert "pass 'm-etf' option devices=8xA100 contradicts the target (devices=2xV100)" in err
    code, _, err = _run(capsys, "convert", str(example_model), str(out_path), "--passes", "m-etf{devices=8xA100},schedule{devices=4xV100}")
    assert code == 2 and "pass 'schedule' option devices=4xV100 contradicts pass 'm-etf' (devices=8xA100)" in err
    code, _, err = _run(capsys, "convert", str(example_model), str(out_path), "--costs", "guesswork", "--passes", "m-etf")
    assert code == 2 and "unknown cost source 'guesswork'" in err
    assert not out_path.exists()
