"""`benchmarks/bench_tile_paired.py`: each file's means are what `costmodel evaluate` reports, the paired differences
are the per-kernel ones, the bootstrap interval holds their mean, and a file against itself differs by exactly 0."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("xgboost")
pytest.importorskip("tvm")

from tests.benchmark_scripts import benchmark_script  # noqa: E402


def test_paired_rows_of_two_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.gbdt_predictor import ranker_metrics
    from cost_model.learned.tpugraphs import save_npz
    from cost_model.measure.tile.kernels import KernelSpec
    from tests.cost_model.learned.test_gbdt_predictor import TRAIN_SHAPES, _record

    records = [_record(KernelSpec("matmul", dims), 40, seed) for seed, dims in enumerate(TRAIN_SHAPES)]
    data = tmp_path / "data"
    data.mkdir()
    for i, record in enumerate(records):
        save_npz(record, data / f"k{i}.npz")
    one, two = GbdtEnsembleTilePredictor.train(records[:3], members=(("rank", 0, 50),), rounds=15, depth=3), \
        GbdtEnsembleTilePredictor.train(records[3:], members=(("rank", 0, 50),), rounds=15, depth=3)
    one.save(tmp_path / "one.json")
    one.save(tmp_path / "same.json")
    two.save(tmp_path / "two.json")
    out = tmp_path / "paired.json"
    with benchmark_script("bench_tile_paired") as bench:
        assert bench.main([str(data), "--baseline", str(tmp_path / "one.json"), "--files", str(tmp_path / "two.json"),
                           str(tmp_path / "same.json"), "--bootstrap", "500", "--by-kind", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kernels"] == len(records) and doc["left_out"] == 0
    base, other = doc["summary"][str(tmp_path / "one.json")], doc["summary"][str(tmp_path / "two.json")]
    for row, ranker in ((base, one), (other, two)):
        expected = ranker_metrics(ranker, records)
        assert row["top1"] == pytest.approx(expected["top1"]) and row["kendall"] == pytest.approx(expected["kendall"])
        assert row["top7"] <= row["top5"] <= row["top1"]
    kernels = doc["per_kernel"]
    diffs = np.array([kernels[str(tmp_path / "two.json")][n]["kendall"] - kernels[str(tmp_path / "one.json")][n]["kendall"] for n in kernels[str(tmp_path / "one.json")]])
    assert other["tau_diff"] == pytest.approx(diffs.mean()) and diffs.std() > 0
    lo, hi = other["tau_diff_ci"]
    assert lo <= other["tau_diff"] <= hi and lo < hi
    assert other["tau_higher"] + other["tau_lower"] <= len(records)
    same = doc["summary"][str(tmp_path / "same.json")]
    assert same["tau_diff"] == 0 and same["tau_diff_ci"] == [0, 0] and same["top1_diff"] == 0 and same["tau_higher"] == same["tau_lower"] == 0
    with benchmark_script("bench_tile_paired") as bench, pytest.raises(SystemExit, match="given twice"):
        bench.main([str(data), "--baseline", str(tmp_path / "one.json"), "--files", str(tmp_path / "one.json")])
    assert doc["by_kind"]["matmul"][str(tmp_path / "two.json")]["kernels"] == len(records)
