"""benchmarks/bench_fusion_decode.py: a zero-shot's fusion decodes recorded, replayed and timed."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script

pytest.importorskip("numba")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_zero_shots_decodes_are_recorded_and_replayed(tmp_path) -> None:
    out = tmp_path / "decode.json"
    with benchmark_script("bench_fusion_decode") as bench:
        assert bench.main(["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--repeats", "2", "--json", str(out)]) == 0
        with pytest.raises(SystemExit):
            bench.main(["--repeats", "0", "--json", str(tmp_path / "bad.json")])
        (row,) = json.loads(out.read_text())["rows"]
        assert row["decodes"] >= 9  # the greedy and the sampled episodes' rounds at least
        assert len(row["runs_s"]) == 2 and row["seconds"] > 0
        assert len(row["groups_digest"]) == 12  # every repeat replayed to the same groups (main checks they agree)
    assert not (tmp_path / "bad.json").exists()
