"""`benchmarks/bench_tile_more_kernels.py`: the pair-gap table on predictions whose answers are known by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.benchmark_scripts import benchmark_script


def test_gap_pairs_sum_per_kind_and_print_shares(capsys: pytest.CaptureFixture[str]) -> None:
    with benchmark_script("bench_tile_more_kernels") as bench:
        records = [SimpleNamespace(meta={"kind": "reduce"}, config_runtime=np.array([1.0, 1.005, 1.2, 2.0])),
                   SimpleNamespace(meta={"kind": "reduce"}, config_runtime=np.array([1.0, 2.0])),
                   SimpleNamespace(meta={"kind": "matmul"}, config_runtime=np.array([1.0, 1.02]))]
        predictions = [np.array([0.0, 1.0, 1.0, 0.5]), np.array([1.0, 0.0]), np.array([0.0, 1.0])]
        got = bench.gap_pairs(predictions, records)
        assert got["reduce"] == [[1.0, 0.0, 0.0, 1.5, 1.0], [1, 0, 0, 2, 4]]  # the second kernel's one far pair ordered wrong
        assert got["matmul"] == [[0.0, 1.0, 0.0, 0.0, 0.0], [0, 1, 0, 0, 0]]
        rows = {"A": {"random": [{"gap_pairs": got}, {"gap_pairs": {"matmul": got["matmul"]}}]}}
        bench.print_by_gap(rows, ["random"])
    out = capsys.readouterr().out
    assert "| A | reduce | 1.00 (1) | - | - | 0.75 (2) | 0.25 (4) |" in out
    assert "| A | matmul | - | 1.00 (2) | - | - | - |" in out  # summed over both runs
