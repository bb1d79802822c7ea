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


@pytest.mark.slow  # two paper-free runs of dp-ls, ~20 s here
def test_a_timed_classical_search_fills_the_rows_seconds(bench, tmp_path) -> None:
    """`dp-ls+fused+groups+timed`: dp-ls with group moves searching for --seconds CPU seconds
    (pass option `cpu_seconds`), counted as a classical row of its cell."""
    out = tmp_path / "go.json"
    argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--json", str(out), "--rows", "classical"]
    method = "dp-ls+fused+groups"
    assert bench.main([*argv, "--seconds", "1", "--classical-methods", f"{method}{bench.TIMED_SUFFIX}"]) == 0
    assert bench.main([*argv, "--seconds", "6", "--classical-methods", f"{method}{bench.TIMED_SUFFIX}", "--json", str(tmp_path / "long.json")]) == 0
    short = json.loads(out.read_text())["rows"][0]
    long = json.loads((tmp_path / "long.json").read_text())["rows"][0]
    assert short["method"] == long["method"] == f"{method}{bench.TIMED_SUFFIX}"
    assert 10 <= short["evaluations"] < long["evaluations"]
    assert long["seconds"] < 6 + 3  # the deadline, plus the problem built from the graph and the default fusion
    assert long["step_time_s"] <= short["step_time_s"] * 1.000001  # same seed: more of the same search
    assert bench._is_classical(long["method"], set(bench.classical_methods()))


def test_the_zero_shot_polish_row_is_the_zero_shot_searched_further(bench, tmp_path) -> None:
    out = tmp_path / "go.json"
    argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--json", str(out), "--zero-shot-polish-seconds", "0.5"]
    assert bench.main([*argv, "--rows", "go-zero-shot", "go-zero-shot-polish"]) == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    plain, polished = rows["go-zero-shot"], rows["go-zero-shot-polish"]
    assert polished["step_time_s"] <= plain["step_time_s"]
    assert polished["evaluations"] > plain["evaluations"]  # the search's simulations are counted


def test_the_warm_polish_row_is_no_slower_than_the_warm_row_or_its_best_seed(bench, tmp_path) -> None:
    """go-zero-shot-warm-polish: the same seeds (within their CPU budget), the policy's edits, then the search."""
    out = tmp_path / "go.json"
    argv = ["--workloads", "rnnlm-2:inference", "--devices", "2xV100", "--json", str(out),
            "--zero-shot-seed-seconds", "5", "--zero-shot-warm-polish-seconds", "0.5"]
    assert bench.main([*argv, "--rows", "go-zero-shot-warm", "go-zero-shot-warm-polish"]) == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())["rows"]}
    warm, searched = rows["go-zero-shot-warm"], rows["go-zero-shot-warm-polish"]
    assert searched["step_time_s"] <= warm["step_time_s"] * (1 + 1e-9)  # the seeds all fit 5 s here: the same start
    assert searched["evaluations"] > warm["evaluations"]


def test_a_timed_sa_row_stops_at_its_seconds_whatever_the_pilots_estimate(bench, monkeypatch) -> None:
    """sa/random rows size their evaluation budget from two pilots; an estimate far too low (as on gnmt-8, 29k nodes:
    181 CPU s for a 60-s row) must not let the run pass the row's seconds: the run carries them as `cpu_seconds`."""
    from compiler_opt.rl import GraphEnvironment, load_graph
    from cost_model.devices.loader import load_topology

    name, graph = load_graph("rnnlm-2:inference")
    env = GraphEnvironment(name, graph, load_topology("2xV100"))
    real = bench._classical
    seen: list[dict] = []

    def spy(env_, method, **options):
        seen.append(options)
        return real(env_, method, **options)

    monkeypatch.setattr(bench, "_classical", spy)
    decisions, seconds, evaluations = bench._timed_search(env, "sa", 0.5, 0)
    assert len(seen) == 1 and seen[0]["cpu_seconds"] == 0.5 and seen[0]["budget"] >= 10
    assert seconds < 0.5 + 2.0 and 0 < evaluations <= seen[0]["budget"]
    assert len(decisions.device) == env.problem.num_nodes
