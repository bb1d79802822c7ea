"""`benchmarks/bench_tile_prefilter.py`: its table on rows whose numbers are known by hand."""

from __future__ import annotations

from tests.benchmark_scripts import benchmark_script


def test_the_table_by_hand() -> None:
    with benchmark_script("bench_tile_prefilter") as bench:
        rows = [{"kind": "matmul", "by_fraction": {"0.5": {"topk": 0.0, "top1": 0.1, "compiled": 0.5}, "1.0": {"topk": 0.0, "top1": 0.1, "compiled": 1.0}}},
                {"kind": "reduce", "by_fraction": {"0.5": {"topk": 0.1, "top1": 0.3, "compiled": 0.5}, "1.0": {"topk": 0.02, "top1": 0.3, "compiled": 1.0}}}]
        text = bench.table(rows, [0.5, 1.0], 7)
        assert "| 0.5 | +5.00% | 1 of 2 | 20.0% | 50% |" in text
        assert "| 1 | +1.00% | 2 of 2 | 20.0% | 100% |" in text
        assert "| 0.5 | +0.0% / 1 | +10.0% / 0 |" in text
