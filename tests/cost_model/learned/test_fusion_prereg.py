"""The seventeenth session's pre-registered comparison (`benchmarks/bench_fusion_prereg.py`): the
decision rule as written before the labels were seen, and the per-graph scoring."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location("bench_fusion_prereg", Path(__file__).resolve().parents[3] / "benchmarks" / "bench_fusion_prereg.py")
prereg = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(prereg)  # type: ignore[union-attr]


def test_b_wins_only_with_a_lower_mean_and_not_worse_on_more_than_half() -> None:
    assert prereg.decide([0.10, 0.10, 0.10, 0.10], [0.05, 0.05, 0.11, 0.11])["b_wins"]  # lower mean, worse on exactly half
    lost_mean = prereg.decide([0.10, 0.10], [0.05, 0.16])
    assert not lost_mean["b_lower_mean"] and not lost_mean["b_wins"]
    many_worse = prereg.decide([0.10, 0.10, 0.10, 0.30], [0.11, 0.11, 0.11, 0.05])  # lower mean, but worse on 3 of 4
    assert many_worse["b_lower_mean"] and many_worse["b_worse_on"] == 3 and not many_worse["b_wins"]
    tie = prereg.decide([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])  # equal: not lower, so not a win
    assert tie["b_worse_on"] == 0 and not tie["b_wins"]
    odd = prereg.decide([0.2, 0.2, 0.2], [0.21, 0.21, 0.05])  # worse on 2 of 3 > 1.5
    assert not odd["b_wins"]
    with pytest.raises(ValueError):
        prereg.decide([0.1], [0.1, 0.2])


def test_scores_are_kernel_metrics_per_graph_with_the_level() -> None:
    runtime = np.array([10e-6, 20e-6, 40e-6, 4e-6])  # the last one is under the 5 us MAPE floor
    record = SimpleNamespace(name="g@1", config_runtime=runtime)
    model = SimpleNamespace(predict_terms=lambda terms: terms[:, 0])
    (row,) = prereg.score_model(model, [record], [np.stack([runtime * np.array([1.1, 1.1, 1.1, 2.0])], axis=1)])
    assert row["graph"] == "g@1" and row["configs"] == 4
    assert row["mape"] == pytest.approx(0.1) and row["level"] == pytest.approx(1.1)
    assert row["kendall"] == pytest.approx(1.0)
