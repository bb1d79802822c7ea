"""`compiler-opt workloads`: the registry as JSON and as a table; node counts appear once built."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from compiler_opt.cli.main import main

EXPECTED = {
    "rnnlm-2", "rnnlm-4", "rnnlm-8", "gnmt-2", "gnmt-4", "gnmt-8", "transformer-xl", "inception-v3", "resnet-50",
    "nasnet", "amoebanet", "wavenet-2x18", "wavenet-4x36", "bert-base",
}


@pytest.fixture(autouse=True)
def workload_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPILER_OPT_CACHE", str(tmp_path))
    return tmp_path


def _workloads_json(capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    assert main(["workloads", "--json"]) == 0
    return {record["name"]: record for record in json.loads(capsys.readouterr().out)}


def test_json_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    records = _workloads_json(capsys)
    assert EXPECTED <= set(records)
    assert records["resnet-50"]["modes"] == ["train", "inference"]
    assert records["resnet-50"]["default_sizes"]["depth"] == 50
    assert records["inception-v3"]["source_format"] == "graphdef"
    assert records["inception-v3"]["export_formats"] == ["graphdef", "hlo"]
    assert records["densenet-121"]["modes"] == ["inference"]
    assert records["wavenet-4x36"]["default_sizes"]["layers"] == 36
    assert all(record["nodes"] == {m: None for m in record["modes"]} for record in records.values())


def test_node_counts_appear_once_built(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("jax")
    from compiler_opt.workloads import build_workload

    graph = build_workload("rnnlm-2", "inference")
    records = _workloads_json(capsys)
    assert records["rnnlm-2"]["nodes"] == {"train": None, "inference": len(graph)}
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("rnnlm-2 "))
    assert row.split()[:5] == ["rnnlm-2", "rnn", "train,inference", "-", str(len(graph))]


def test_listing_imports_no_framework() -> None:
    """Listing reads the registry and the cache folder only: JAX, TF and torch stay unloaded."""
    import subprocess
    import sys

    code = (
        "import sys; from compiler_opt.cli.main import main; main(['workloads', '--json']);"
        "sys.stderr.write(repr([m for m in ('jax', 'tensorflow', 'torch') if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert done.returncode == 0 and done.stderr.strip().endswith("[]"), done.stderr
