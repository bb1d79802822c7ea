"""benchmarks/bench_go.py: the `seeds+polish` control (GO fine-tune's seeds and polish, no policy) end to end."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bench():
    """benchmarks/ is not a package: load the script as a module (registered, as dataclasses need)."""
    spec = importlib.util.spec_from_file_location("bench_go", REPO_ROOT / "benchmarks" / "bench_go.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_go"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_go", None)


@pytest.fixture
def one_torch_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
