"""`compiler-opt simulate` in-process: JSON report, decisions files, outputs, and exit-2 errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from compiler_opt.cli.main import main

pytest.importorskip("jax")

# Small and quick to build: RNNLM-2 inference with 4 unrolled steps (~300 nodes).
WORKLOAD = "rnnlm-2:inference"
SMALL = ["--size", "steps=4"]
REQUIRED_KEYS = {
    "step_time_s", "lower_bound_s", "peak_memory_bytes", "bytes_moved", "oom", "throughput_s", "busy_s", "devices",
}


@pytest.fixture(scope="module", autouse=True)
def workload_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("workload-cache")
    old = os.environ.get("COMPILER_OPT_CACHE")
    os.environ["COMPILER_OPT_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("COMPILER_OPT_CACHE", None)
    else:
        os.environ["COMPILER_OPT_CACHE"] = old


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = _run(capsys, "simulate", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_workload_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, WORKLOAD, "--devices", "4xV100", *SMALL)
    assert REQUIRED_KEYS <= set(report)
    assert report["devices"] == ["cpu0", "gpu0", "gpu1", "gpu2", "gpu3"]
    assert set(report["peak_memory_bytes"]) == set(report["devices"]) == set(report["busy_s"])
    assert 0 < report["lower_bound_s"] <= report["step_time_s"]
    # Default decisions: everything on the fastest device, so nothing moves and only it is busy.
    assert report["decisions"] == "default" and report["default_device"] == "gpu0"
    assert report["bytes_moved"] == 0 and report["oom"] is False
    assert report["busy_s"]["gpu0"] == pytest.approx(report["step_time_s"])
    assert report["peak_memory_bytes"]["gpu0"] > 0 and report["peak_memory_bytes"]["gpu1"] == 0
    assert report["objective"] == "latency" and report["objective_value"] == report["step_time_s"]


def test_objectives(capsys: pytest.CaptureFixture[str]) -> None:
    memory = _report(capsys, WORKLOAD, "--devices", "4xV100", *SMALL, "--objective", "memory")
    assert memory["objective_value"] == max(memory["peak_memory_bytes"].values())
    throughput = _report(capsys, WORKLOAD, "--devices", "4xV100", *SMALL, "--objective", "throughput")
    assert throughput["objective_value"] == throughput["throughput_s"]


def test_human_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "simulate", WORKLOAD, "--devices", "2xV100", *SMALL)
    assert code == 0
    assert out.startswith("rnnlm-2:inference on 2xV100 (roofline costs):")
    assert "step time" in out and "lower bound" in out and "gpu1" in out


def test_decisions_file_moves_work_and_data(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from compiler_opt.workloads import build_workload

    graph = build_workload("rnnlm-2", "inference", steps=4)
    names = [node.name for node in graph]
    half = len(names) // 2
    # Second half of the graph on gpu1, with one fused pair and a priority: the run must pay
    # transfers and split the busy time.
    decisions = {name: {"device": "gpu1"} for name in names[half:]}
    decisions[names[0]] = {"priority": 3.0, "fusion_group": None}
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(decisions))
    trace, plot = tmp_path / "trace.json", tmp_path / "gantt.png"
    report = _report(capsys, WORKLOAD, "--devices", "4xV100", *SMALL, "--decisions", str(path), "--trace", str(trace), "--plot", str(plot))
    assert report["decisions"] == "file" and report["decisions_file_nodes"] == len(decisions)
    assert report["bytes_moved"] > 0
    assert report["busy_s"]["gpu0"] > 0 and report["busy_s"]["gpu1"] > 0
    assert report["lower_bound_s"] <= report["step_time_s"]
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_model_file_with_device_fields(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file's own decisions are used: an HLO export simulated with its nodes placed."""
    import graph_ir
    from compiler_opt.workloads import export_workload

    path = export_workload("rnnlm-2", "inference", tmp_path / "rnnlm.hlo", steps=4)
    plain = _report(capsys, str(path), "--devices", "4xV100")
    assert plain["nodes"] == len(graph_ir.load(str(path))) and plain["model"] == "rnnlm.hlo"
    assert plain["decisions"] == "default" and plain["lower_bound_s"] <= plain["step_time_s"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--devices", "4xV1000"], "--devices 4xV1000: unknown device preset 'V1000'"),
        (["--devices", "nope.yaml"], "nope.yaml: device file not found"),
        (["--devices", "4xV100", "--decisions", "missing.json"], "missing.json: no such decisions file"),
        (["--devices", "4xV100", "--size", "batch"], "--size expects KEY=VALUE"),
        (["--devices", "4xV100", "--size", "depth=3"], "has no size 'depth'"),
    ],
)
def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = _run(capsys, "simulate", WORKLOAD, *argv)
    assert code == 2 and out == ""
    assert err.startswith("compiler-opt: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"no_such_node": {"device": "gpu1"}}', "node 'no_such_node': 1 unknown node name(s): 'no_such_node'"),
        ("[1, 2]", "expected a JSON object keyed by node name, got list"),
        ("{not json", "not valid JSON: Expecting property name"),
        ('{"@FIRST@": {"device": "tpu7"}}', "field 'device'"),
        ('{"@FIRST@": {"device": 9}}', "device index 9 out of range [0, 5)"),
        ('{"@FIRST@": {"fusion_group": -2}}', "fusion_group must be an integer >= 0 or null"),
        ('{"@FIRST@": {"priority": "high"}}', "priority must be a number"),
        ('{"@FIRST@": {"placement": 1}}', "unknown field(s) ['placement']"),
    ],
)
def test_bad_decisions_files_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str) -> None:
    from compiler_opt.workloads import build_workload

    first = next(iter(build_workload("rnnlm-2", "inference", steps=4))).name
    path = tmp_path / "decisions.json"
    path.write_text(content.replace("@FIRST@", first))
    code, out, err = _run(capsys, "simulate", WORKLOAD, "--devices", "4xV100", *SMALL, "--decisions", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"compiler-opt: error: {path}") and message in err and err.count("\n") == 1


def test_unknown_model_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "simulate", "resnet-51", "--devices", "4xV100")
    assert code == 2 and "'resnet-51' is neither a file nor a workload (workloads: rnnlm, rnnlm-2," in err
    code, _, err = _run(capsys, "simulate", "resnet-50:eval", "--devices", "4xV100")
    assert code == 2 and "resnet-50 has no mode 'eval'" in err
    code, _, err = _run(capsys, "simulate", "missing.onnx", "--devices", "4xV100")
    assert code == 2 and "missing.onnx: no such file" in err


def test_size_options_refused_for_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from compiler_opt.workloads import export_workload

    path = export_workload("rnnlm-2", "inference", tmp_path / "rnnlm.hlo", steps=4)
    code, _, err = _run(capsys, "simulate", str(path), "--devices", "4xV100", "--paper-sizes")
    assert code == 2 and "--size and --paper-sizes apply to workloads, not to model files" in err


def test_default_fusion_is_reported_and_can_be_turned_off(capsys: pytest.CaptureFixture[str]) -> None:
    fused = _report(capsys, WORKLOAD, "--devices", "1xV100", *SMALL)
    plain = _report(capsys, WORKLOAD, "--devices", "1xV100", *SMALL, "--no-default-fusion")
    assert fused["default_fusion"] == "xla-gpu" and fused["default_fusion_groups"] > 0
    assert plain["default_fusion"] == "none" and plain["default_fusion_groups"] == 0
    assert fused["decisions"] == plain["decisions"] == "default"
    # Fewer launches and no round trips for the fused intermediates.
    assert fused["step_time_s"] < plain["step_time_s"]
