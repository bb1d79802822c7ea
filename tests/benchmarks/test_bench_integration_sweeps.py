"""benchmarks/bench_torch_sweep.py and bench_xla_hook_sweep.py: rows in child processes, their outcomes, the JSON;
a crash or a hang in a child is that row's outcome, not the sweep's end."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script


def test_torch_sweep_rows_and_the_json(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    with benchmark_script("bench_torch_sweep") as bench:
        assert bench.main(["nn-conv-bn", "--executors", "fx,optimize", "--json", str(tmp_path / "t.json"), "--timeout", "240"]) == 0
        with pytest.raises(SystemExit):
            bench.main(["no-such-model"])
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [(r["model"], r["executor"], r["outcome"]) for r in rows] == [("nn-conv-bn", "fx", "equal"), ("nn-conv-bn", "optimize", "equal")]
    assert "graph(s)" in rows[0]["message"] and "outputs equal in onnxruntime" in rows[1]["message"]
    assert "| fx | equal | 1 |" in capsys.readouterr().out


def test_xla_hook_sweep_rows_and_the_json(tmp_path) -> None:
    pytest.importorskip("jax")
    pytest.importorskip("tensorflow")  # the hook's HLO schema
    with benchmark_script("bench_xla_hook_sweep") as bench:
        assert bench.main(["top-k", "segment-sum", "--json", str(tmp_path / "x.json"), "--timeout", "240"]) == 0
    rows = json.loads((tmp_path / "x.json").read_text())["rows"]
    assert [(r["case"], r["outcome"]) for r in rows] == [("top-k", "equal"), ("segment-sum", "equal")]
    assert all(r["changed"] >= 1 for r in rows)


def test_a_child_that_dies_or_hangs_is_a_row(tmp_path) -> None:
    with benchmark_script("_child_outcome") as child:
        crashed = child.run_child("import os; os._exit(7)", [], 60)
        hung = child.run_child("import time; time.sleep(60)", [], 1)
        fine = child.run_child("import sys; print('noise'); print('OUTCOME {\"outcome\": \"equal\", \"message\": \"' + sys.argv[1] + '\"}')", ["x"], 60)
    assert crashed["outcome"] == "crash" and "exit 7" in crashed["message"]
    assert hung["outcome"] == "timeout"
    assert fine["outcome"] == "equal" and fine["message"] == "x" and fine["seconds"] >= 0
