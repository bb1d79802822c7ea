"""Benchmark workloads (random ONNX DAGs, DenseNet-121) and the import benchmark's driver."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler_opt.workloads.synthetic import random_onnx_dag

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("num_nodes", [1, 2, 3, 57, 600])
def test_random_dag_is_valid_typed_and_runs(num_nodes: int) -> None:
    model = random_onnx_dag(num_nodes, seed=num_nodes)
    assert len(model.graph.node) == num_nodes
    onnx.checker.check_model(model, full_check=True)
    typed = {vi.name for vi in model.graph.value_info} | {o.name for o in model.graph.output}
    assert all(out in typed for node in model.graph.node for out in node.output)
    # Declared shapes agree with onnx's own inference (strict mode raises on a conflict).
    onnx.shape_inference.infer_shapes(model, strict_mode=True)
    outputs = _run_onnxruntime(model, {"x": np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)})
    assert all(out.shape == (8, 64) and np.isfinite(out).all() for out in outputs)


def test_random_dag_is_deterministic_and_seeded() -> None:
    first = random_onnx_dag(300, seed=1).SerializeToString()
    assert random_onnx_dag(300, seed=1).SerializeToString() == first
    assert random_onnx_dag(300, seed=2).SerializeToString() != first


def test_random_dag_has_skip_connections() -> None:
    model = random_onnx_dag(2000, seed=0)
    position = {out: i for i, node in enumerate(model.graph.node) for out in node.output}
    spans = [i - position[name] for i, node in enumerate(model.graph.node) for name in node.input if name in position]
    assert max(spans) > 100  # long-range edges, not just a chain
    assert len(model.graph.output) < 20  # few values are left dangling


def test_densenet121_architecture() -> None:
    torch = pytest.importorskip("torch")
    from compiler_opt.workloads.densenet import DENSENET121_PARAMETERS, densenet121

    model = densenet121()
    assert sum(p.numel() for p in model.parameters()) == DENSENET121_PARAMETERS
    with torch.no_grad():
        assert tuple(model(torch.randn(1, 3, 64, 64)).shape) == (1, 1000)


@pytest.mark.slow
def test_densenet121_export_matches_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from compiler_opt.workloads.densenet import densenet121, export_densenet121_onnx

    path = export_densenet121_onnx(tmp_path / "densenet.onnx", image_size=64)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = densenet121()(image).numpy()
    got = _run_onnxruntime(model, {"image": image.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def _bench_module(monkeypatch: pytest.MonkeyPatch):
    """benchmarks/ is not a package: load the script as a module (registered, as dataclasses need)."""
    spec = importlib.util.spec_from_file_location("bench_import", REPO_ROOT / "benchmarks" / "bench_import.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_import", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("memory", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_bench_import_smoke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, memory: bool
) -> None:
    bench = _bench_module(monkeypatch)
    out_json = tmp_path / "result.json"
    argv = ["--cases", "random-dag", "--nodes", "300", "--repeat", "1", "--json", str(out_json), "--cache", str(tmp_path)]
    assert bench.main(argv + ([] if memory else ["--no-memory"])) == 0
    printed = capsys.readouterr().out
    assert "goal (ONNX): graph_ir import <= 3x onnx_ir time and <= 2x its memory" in printed
    payload = json.loads(out_json.read_text())
    (result,) = payload["results"]
    assert result["case"] == "random-dag" and result["format"] == "onnx"
    rows = {row["tool"]: row for row in result["rows"]}
    assert set(rows) == {"graph_ir", "onnx_ir", "onnx"}
    assert rows["onnx_ir"]["import_ratio"] == 1.0
    for row in rows.values():
        assert row["import_ms"] > 0 and row["export_ms"] > 0
        assert (row["import_memory_mb"] is not None) == memory
    if memory:
        assert all(row["import_memory_mb"] > 0 for row in rows.values())
        assert set(result["goal_met"]) == {"time", "memory"}
