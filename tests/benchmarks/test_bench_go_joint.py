"""benchmarks/bench_go_joint.py: zero-shot with and without the joint variants of its fastest candidates."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_joint_variants_never_slow_the_zero_shot_answer(tmp_path) -> None:
    out = tmp_path / "joint.json"
    with benchmark_script("bench_go_joint") as bench:
        argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--counts", "0", "2", "--held-out", "rnnlm-2:inference", "--json", str(out)]
        assert bench.main(argv) == 0
        with pytest.raises(SystemExit):
            bench.main(["--counts", "-1", "--json", str(tmp_path / "bad.json")])
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["joint=2"] <= row["joint=0"]
    assert row["joint=2_evaluations"] > row["joint=0_evaluations"]  # the variants were simulated
    assert data["summary"]["joint=2"]["held_out_geomean"] == pytest.approx(row["joint=2"])
    assert not (tmp_path / "bad.json").exists()
