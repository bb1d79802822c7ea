"""Fuzzing every importer with atheris (compiler_opt.fuzz): a 30-second smoke run in CI and a
bounded campaign in the slow tier. Every input must end in a verified graph or a project error;
a Python exception of another class, a graph that fails verify(), a native crash, a timeout or
an out-of-memory is a found bug (goal: none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("atheris")

from compiler_opt.fuzz.campaign import default_seeds, main_table, run_campaign  # noqa: E402
from compiler_opt.fuzz.targets import FORMATS  # noqa: E402


def _assert_clean(report) -> None:
    bugs = {key: bug["traceback"][-1500:] for key, bug in report.bugs.items()}
    crashes = [(c["kind"], c["format"], c["artifact"], c["log"][-1500:]) for c in report.crashes]
    assert not bugs, json.dumps(bugs, indent=1)
    assert not crashes, crashes


def test_smoke_fuzz_30_seconds(shared_testdata, tmp_path, monkeypatch):
    seeds = default_seeds(shared_testdata)
    monkeypatch.chdir(tmp_path)  # a relative output folder, as the benchmark's --out takes it (the workers run elsewhere)
    assert all(seeds[f.name] for f in FORMATS), {k: len(v) for k, v in seeds.items()}
    # the smallest few seeds per format, so the 30 s go to mutations rather than to the seeds
    small = {fmt: sorted(paths, key=lambda p: p.stat().st_size)[:3] for fmt, paths in seeds.items()}
    # A generous per-input cap: CI runs this beside other tests on two cores.
    report = run_campaign(small, 30, "fuzz", per_input_timeout_s=60)
    print(main_table(report))
    assert report.inputs >= report.seeds  # the seeds ran, then mutations
    assert len(report.formats) == len(FORMATS)
    assert report.distinct_errors >= 3  # the mutations reach the importers' error paths
    examples = [(fmt, name, example) for fmt, per in report.formats.items() for name, example in per.get("examples", {}).items()]
    assert len(examples) == report.distinct_errors  # the first refusal of each class is kept, message and input
    for fmt, name, example in examples:
        assert example["message"] and Path(example["sample"]).is_file(), (fmt, name)
    _assert_clean(report)


@pytest.mark.slow
def test_bounded_fuzz_campaign(shared_testdata, tmp_path):
    report = run_campaign(default_seeds(shared_testdata), 240, tmp_path / "fuzz")
    print(main_table(report))
    assert report.inputs >= 500
    _assert_clean(report)
