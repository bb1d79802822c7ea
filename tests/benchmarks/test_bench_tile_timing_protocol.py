"""`benchmarks/bench_tile_timing_protocol.py`: the pair statistics on labels whose answers are known by
hand, and one real TVM kernel through every pass (two compiles, two buffer sets, both protocols)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.benchmark_scripts import benchmark_script

pytest.importorskip("scipy")


def _row(labels: dict[str, list[float]], scores: list[float] | None = None) -> dict:
    row = {"kernel": "k", "kind": "matmul", "configs": [f"c{i}" for i in range(4)], "labels": labels, "compile_s": 1.0, "timing_s": 1.0,
           "load": 0.5}
    if scores is not None:
        row["scores"] = scores
    return row


def test_pair_and_ranker_statistics_by_hand() -> None:
    with benchmark_script("bench_tile_timing_protocol") as bench:
        same = [1.0, 2.0, 3.0, 4.0]
        swapped = [2.0, 1.0, 3.0, 4.0]  # the second pass's best is the first's second (2x slower there), and back
        labels = {name: list(same) for name in bench.PASSES} | {"B/b": swapped}
        rows = [_row(labels, scores=[1.0, 0.0, 2.0, 3.0])]
        alone = bench.pair_stats(rows, "A/a", "A/a again")
        assert alone["rel_median"] == 0.0 and alone["top1"] == 0.0 and alone["kendall"] == pytest.approx(1.0)
        both = bench.pair_stats(rows, "A/a", "B/b")
        assert both["top1"] == pytest.approx(1.0)  # both ways: 2/1 - 1 on each side
        assert both["rel_median"] == pytest.approx(0.25)  # median of |2/1 - 1| = 1, |1/2 - 1| = 0.5, 0, 0
        assert both["top1_over_2pct"] == 1.0 and both["kendall"] == pytest.approx(4 / 6)
        # the ranker puts config 1 first: 2x off on A/a's labels, exact on B/b's
        assert bench.ranker_stats(rows, "A/a")["top1"] == pytest.approx(1.0)
        assert bench.ranker_stats(rows, "B/b")["top1"] == 0.0
        text = bench.report({"seed": 1, "long_sample_ms": 2.0, "long_rounds": 15, "rows": rows})
        assert "| new code + buffers (A/a vs B/b) | 25.00% |" in text and "| B/b | 0.00% |" in text
        assert "busy neighbour" not in text  # pairs whose passes a run did not time are left out
        with pytest.raises(ValueError, match="no samples stored"):
            bench.pair_stats(rows, "A/a", "B/b", "median")


def test_the_label_statistics_of_stored_samples() -> None:
    with benchmark_script("bench_tile_timing_protocol") as bench:
        # config 0 has one sample far below its others (an outlier the minimum keeps)
        samples = [[0.5, 2.0, 2.1, 2.2], [1.5, 1.6, 1.7, 1.8], [3.0, 3.0, 3.1, 3.2], [4.0, 4.1, 4.2, 4.3]]
        row = _row({"A/a": [min(x) for x in samples]}) | {"samples": {"A/a": samples}}
        assert bench.pass_labels(row, "A/a").tolist() == [0.5, 1.5, 3.0, 4.0]
        assert bench.pass_labels(row, "A/a", "second").tolist() == [2.0, 1.6, 3.0, 4.1]
        assert bench.pass_labels(row, "A/a", "median").tolist() == [2.05, 1.65, 3.05, 4.15]


def test_one_real_kernel_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    with benchmark_script("bench_tile_timing_protocol") as bench:
        out = tmp_path / "p.json"
        assert bench.main(["--kernels", "1", "--seed", "5", "--configs", "3", "--long-sample-ms", "0.5", "--long-rounds", "2",
                           "--no-ranker", "--json", str(out)]) == 0
        data = json.loads(out.read_text())
        (row,) = data["rows"]
        assert set(row["labels"]) == set(row["samples"]) == set(bench.PASSES)
        assert all(len(s) == 2 for per in row["samples"]["long A/a"] for s in [per])  # --long-rounds 2 samples per configuration
        assert all(len(v) == len(row["configs"]) >= 2 and np.all(np.asarray(v) > 0) for v in row["labels"].values())
        # resumable: a second run finds the kernel in the file and times nothing
        assert bench.main(["--kernels", "1", "--seed", "5", "--configs", "3", "--no-ranker", "--json", str(out)]) == 0
        assert json.loads(out.read_text())["rows"] == data["rows"]
