"""benchmarks/bench_go_zero_shot_polish.py: zero-shot, zero-shot + a short local search, the no-policy control."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_polished_zero_shot_is_never_slower_and_is_read_against_fine_tune(tmp_path) -> None:
    fine_tune = tmp_path / "ft.json"  # the shape of a bench_go.py file: one go-fine-tune row per run
    rows = [{"workload": "rnnlm-2:inference", "devices": "2xV100", "method": "go-fine-tune", "vs_expert": v} for v in (0.1, 0.4)]
    fine_tune.write_text(json.dumps({"rows": rows + [{**rows[0], "method": "metis", "vs_expert": 0.01}]}))
    out = tmp_path / "zsp.json"
    with benchmark_script("bench_go_zero_shot_polish") as bench:
        argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--polish-seconds", "0.5",
                "--held-out", "rnnlm-2:inference", "--fine-tune", str(fine_tune), "--warm", "--json", str(out)]
        assert bench.main(argv) == 0
        with pytest.raises(SystemExit):
            bench.main(["--polish-seconds", "0", "--json", str(tmp_path / "bad.json")])
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["zero-shot+0.5"] <= row["zero-shot"]
    assert row["control@0.5"] > 0 and row["control@0.5_s"] > 0
    # the warm start's seeds include the human expert, and the answer is never slower than the best seed
    assert 0 < row["warm+0.5"] <= 1.0 + 1e-9
    assert 0 < row["control@warm+0.5"] <= 1.0 + 1e-9 and "control@warm+0.5" in data["summary"]
    assert row["fine-tune"] == pytest.approx(0.2)  # the geometric mean of the two runs; other rows ignored
    summary = data["summary"]["zero-shot+0.5"]
    assert summary["over_fine_tune"] == pytest.approx(row["zero-shot+0.5"] / 0.2)
    assert summary["held_out_geomean"] == pytest.approx(row["zero-shot+0.5"])
    assert not (tmp_path / "bad.json").exists()


def test_several_warm_seed_budgets_are_columns_and_their_control_runs_the_same_seeds(tmp_path) -> None:
    out = tmp_path / "zsp.json"
    with benchmark_script("bench_go_zero_shot_polish") as bench:
        argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--polish-seconds", "0.3", "--warm",
                "--warm-seed-seconds", "0", "0.2", "--no-cold-search", "--polish-race", "sequential", "--json", str(out)]
        assert bench.main(argv) == 0
        for bad in (["--no-cold-search"], ["--warm", "--warm-seed-seconds", "-1"], ["--warm", "--polish-race", "fastest"]):
            with pytest.raises(SystemExit):
                bench.main([*bad, "--json", str(tmp_path / "bad.json")])
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert data["polish_race"] == "sequential"
    assert "zero-shot+0.3" not in row and 0 < row["zero-shot"] <= 1.0 + 1e-9
    for column in ("warm0+0.3", "warm0.2+0.3"):
        assert 0 < row[column] <= 1.0 + 1e-9 and 0 < row[f"control@{column}"] <= 1.0 + 1e-9
    assert not (tmp_path / "bad.json").exists()
