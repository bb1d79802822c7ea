"""`benchmarks/bench_autotune_exhaustive.py`: real kernels of the bundled model timed once (scaled down,
three candidates each), the labels kept, and `--rescore` scoring the same labels again without timing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.benchmark_scripts import benchmark_script
from tests.conftest import REPO_ROOT

pytest.importorskip("scipy")
pytest.importorskip("tvm")
pytest.importorskip("xgboost")


def test_labels_are_kept_and_rescored_without_timing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    timed, again = tmp_path / "timed.json", tmp_path / "again.json"
    with benchmark_script("bench_autotune_exhaustive") as bench:
        assert bench.main([str(REPO_ROOT / "examples" / "small_cnn.onnx"), "--max-flops", "2e5", "--budget", "3", "--top-k", "1",
                           "--extra-k", "0", "--rankers", "gbdt", "--timing-protocol", "short", "--json", str(timed)]) == 0
        saved = json.loads(timed.read_text())
        assert saved["max_flops"] == 2e5 and saved["rankers"] == ["gbdt"]
        rows = saved["rows"]
        assert len(rows) == len({r["kernel"] for r in rows}) >= 3  # distinct kernels, each scaled to the cap
        for row in rows:
            assert len(row["configs"]) == len(row["seconds"]) == row["candidates"] == 3
            assert min(row["seconds"]) * 1e6 == pytest.approx(row["best_us"])
            assert -1.0 <= row["gbdt"]["tau"] <= 1.0 and row["gbdt"]["top1_slowdown"] >= 0.0
        assert bench.main(["--rescore", str(timed), "--top-k", "1", "--extra-k", "0", "--rankers", "gbdt", "--json", str(again)]) == 0
        rescored = json.loads(again.read_text())
        assert rescored["rescored_from"] == str(timed)
        for first, second in zip(rows, rescored["rows"], strict=True):
            assert second["seconds"] == first["seconds"] and second["measure_s"] == first["measure_s"]
            assert second["gbdt"] == pytest.approx(first["gbdt"])  # same ranker, same labels: same scores
        # a resumed run reads every label back from the kept cache: the same labels, timed in no time
        resumed = tmp_path / "resumed.json"
        (tmp_path / "timed.sqlite").rename(tmp_path / "resumed.sqlite")
        assert bench.main([str(REPO_ROOT / "examples" / "small_cnn.onnx"), "--max-flops", "2e5", "--budget", "3", "--top-k", "1",
                           "--extra-k", "0", "--rankers", "gbdt", "--timing-protocol", "short", "--json", str(resumed), "--resume"]) == 0
        again_rows = json.loads(resumed.read_text())["rows"]
        assert [r["seconds"] for r in again_rows] == [r["seconds"] for r in rows] and json.loads(resumed.read_text())["resumed"]
        # gbdt-ens files share one compile of each candidate and score as their own rank() does
        from cost_model.learned.predictor import load_tile_ranker

        ranker = load_tile_ranker("gbdt-ens")
        space, candidates, _ = bench._saved_labels(timed)[1][0]
        shared: dict = {}
        assert bench._ranked(ranker, space, candidates, shared).tolist() == pytest.approx(ranker.rank(space, candidates).tolist())
        assert len(shared) == 1 and bench._ranked(ranker, space, candidates, shared).tolist() == pytest.approx(ranker.rank(space, candidates).tolist())
        # the compiled rows are kept beside the labels, and a second rescore reads them
        assert bench.main(["--rescore", str(timed), "--top-k", "1", "--extra-k", "0", "--rankers", "gbdt-ens", "--json", str(again)]) == 0
        kept = tmp_path / "timed.rows.npz"
        first = json.loads(again.read_text())["rows"]
        assert kept.is_file() and len(np.load(kept).files) == len(rows)
        stamp = kept.stat().st_mtime_ns
        assert bench.main(["--rescore", str(timed), "--top-k", "1", "--extra-k", "0", "--rankers", "gbdt-ens", "--prefilters", "0.5",
                           "--json", str(again)]) == 0
        assert kept.stat().st_mtime_ns == stamp  # nothing new to keep
        second = json.loads(again.read_text())
        assert [r["gbdt-ens"] for r in second["rows"]] == [r["gbdt-ens"] for r in first]
        assert second["rankers"] == ["gbdt-ens", "gbdt-ens @prefilter 0.5"]
        for row in second["rows"]:  # keeping 2 of 3: the best of the top 1 is the ranker's pick among the code-blind model's first two
            blind = np.argsort(load_tile_ranker("gbdt", None).rank(*bench._saved_labels(timed)[1][second["rows"].index(row)][:2]), kind="stable")[:2]
            full = np.asarray(ranker.rank(*bench._saved_labels(timed)[1][second["rows"].index(row)][:2]))
            pick = blind[np.argmin(full[blind])]
            assert row["gbdt-ens @prefilter 0.5"]["topk_slowdown"] == pytest.approx(row["seconds"][pick] / min(row["seconds"]) - 1)
        for bad in (["--prefilters", "1"], ["--prefilters", "x"], ["--rankers", "gbdt", "--prefilters", "0.5"]):
            with pytest.raises(SystemExit):
                bench.main(["--rescore", str(timed), "--rankers", "gbdt-ens", "--json", str(again)] + bad)
        # labels for other candidates than this checkout draws are refused, naming the kernel
        saved["rows"][0]["configs"] = saved["rows"][0]["configs"][::-1]
        timed.write_text(json.dumps(saved))
        with pytest.raises(SystemExit):
            bench.main(["--rescore", str(timed), "--rankers", "gbdt", "--json", str(again)])
        with pytest.raises(SystemExit):  # neither models nor saved labels
            bench.main(["--rankers", "gbdt", "--json", str(again)])


def test_the_group_table_by_hand() -> None:
    with benchmark_script("bench_autotune_exhaustive") as bench:
        rows = [{"kind": "a", "x": {"tau": 0.5, "topk_slowdown": 0.01}}, {"kind": "b", "x": {"tau": 0.7, "topk_slowdown": 0.1}},
                {"kind": "a", "x": {"tau": 0.3, "topk_slowdown": 0.0}}]
        text = bench.group_table(rows, ["x"], "kind", 7)
        assert "| ranker | a (2) | b (1) |" in text
        assert "| x | 0.40 / +0.5% / 2 | 0.70 / +10.0% / 0 |" in text
