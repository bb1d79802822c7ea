"""`benchmarks/bench_ranker_files.py`: a linked file's row names the file its start is read from, and its scores equal
those of the same trees stored whole."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("tvm")

from tests.benchmark_scripts import benchmark_script  # noqa: E402


def test_rows_of_a_linked_file_and_its_copy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.tpugraphs import save_npz
    from cost_model.measure.tile.kernels import KernelSpec
    from tests.cost_model.learned.test_gbdt_predictor import TRAIN_SHAPES, _record

    records = [_record(KernelSpec("matmul", dims), 40, seed) for seed, dims in enumerate(TRAIN_SHAPES)]
    data, linked, whole = tmp_path / "data", tmp_path / "linked", tmp_path / "whole"
    for folder in (data, linked, whole):
        folder.mkdir()
    for i, record in enumerate(records):
        save_npz(record, data / f"k{i}.npz")
    GbdtEnsembleTilePredictor.train(records[:4], members=(("rank", 0, 50),), rounds=20, depth=4).save(linked / "start.json")
    ranker = GbdtEnsembleTilePredictor.train(records[4:], members=(("rank", 0, 50), ("ndcg", 0, 50)), rounds=10, depth=4,
                                             init=GbdtEnsembleTilePredictor.load(linked / "start.json"))
    ranker.save(linked / "ranker.json", link_starts=True)
    ranker.save(whole / "ranker.json")
    shutil.copy(linked / "start.json", whole / "start.json")
    with benchmark_script("bench_ranker_files") as bench:
        out = tmp_path / "rows.json"
        assert bench.main([str(linked / "start.json"), str(linked / "ranker.json"), "--data", str(data), "--against", str(whole),
                           "--repeats", "1", "--json", str(out)]) == 0
    start, row = json.loads(out.read_text())["rows"]
    assert start["starts_from"] == [] and row["starts_from"] == ["start.json"]
    assert row["kernels"] == len(records) and row["largest_difference"] == 0.0 and row["same_first_pick"] == len(records)
    assert row["mb"] < 0.8 * (whole / "ranker.json").stat().st_size / 1e6
