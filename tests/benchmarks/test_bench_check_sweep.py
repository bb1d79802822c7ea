"""benchmarks/bench_check_sweep.py: outcomes of real models in child processes, the table, the JSON."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script


def test_three_outcomes_and_the_table(onnx_backend_data, tmp_path, capsys) -> None:
    pytest.importorskip("onnxruntime")
    models = [
        onnx_backend_data / "light" / "light_squeezenet.onnx",  # runs: equal
        onnx_backend_data / "simple" / "test_sequence_model8" / "model.onnx",  # f32[n] input: refused
        tmp_path / "broken.onnx",  # not a model
    ]
    models[2].write_bytes(b"not a protobuf")
    with benchmark_script("bench_check_sweep") as bench:
        assert bench.main([*map(str, models), "--json", str(tmp_path / "out.json"), "--timeout", "240"]) == 0
    rows = json.loads((tmp_path / "out.json").read_text())
    outcomes = [rows[str(m)]["outcome"] for m in models]
    assert outcomes[0] == "equal" and outcomes[1] == "refused" and outcomes[2].startswith("error:")
    table = capsys.readouterr().out
    assert "| equal |" in table and "| refused |" in table


def test_the_fusion_tuner_and_the_go_pass_as_actions(onnx_backend_data, tmp_path) -> None:
    """`--action autotune-fusion`: a model that tunes is `done`, an opset-6 one is a clear
    ProfilingError pointing to upgrade-opset; `--action go` runs the learned policy."""
    pytest.importorskip("onnxruntime")
    models = [
        onnx_backend_data / "simple" / "test_single_relu_model" / "model.onnx",
        onnx_backend_data / "pytorch-converted" / "test_Linear" / "model.onnx",  # Gemm-6
    ]
    with benchmark_script("bench_check_sweep") as bench:
        assert bench.main([*map(str, models), "--action", "autotune-fusion", "--json", str(tmp_path / "f.json"), "--timeout", "240"]) == 0
        rows = json.loads((tmp_path / "f.json").read_text())
        assert rows[str(models[0])]["outcome"] == "done"
        assert rows[str(models[1])]["outcome"] == "error:ProfilingError" and "upgrade-opset" in rows[str(models[1])]["message"]
        pytest.importorskip("torch_geometric")
        assert bench.main([str(models[0]), "--action", "go", "--json", str(tmp_path / "g.json"), "--timeout", "240"]) == 0
        assert json.loads((tmp_path / "g.json").read_text())[str(models[0])]["outcome"] == "done"
