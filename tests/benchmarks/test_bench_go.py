"""benchmarks/bench_go.py: the `seeds+polish` control (GO fine-tune's seeds and polish, no policy) end to end."""

from __future__ import annotations

import json

import pytest

from tests.benchmark_scripts import benchmark_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_go") as module:
        yield module


def test_the_search_control_row_is_the_best_seed_polished(bench, tmp_path) -> None:
    out = tmp_path / "go.json"
    argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--seconds", "3", "--json", str(out)]
    assert bench.main([*argv, "--rows", "classical", bench.SEARCH_CONTROL, "--classical-methods", "human-expert"]) == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    control = rows[bench.SEARCH_CONTROL]
    assert control["iterations"] == 0 and control["polish_evaluations"] > 0 and control["polish_starts"] >= 1
    fitting = [s[1] for s in control["seeds"] if s[3]]
    assert control["best_seed_s"] == min(fitting)
    assert control["step_time_s"] <= control["best_seed_s"] <= rows["human-expert"]["step_time_s"]
    assert control["seconds"] < 3 + 5  # the budget, plus the last simulation and joint variants
