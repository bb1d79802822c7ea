"""`benchmarks/bench_tile_stopping.py`'s scoring: the rules and the pre-registered decision on
kernels whose answer is known by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.benchmark_scripts import benchmark_script

pytest.importorskip("scipy")


def _kernels(seed: int, split: str) -> list[dict]:
    # A: the ranker orders its top 5 backwards (tau -1: the gate opens) and the best sits 7th in its order.
    # B: the ranker is right (the gate stays shut) and its first pick is the best.
    runtime_a = [5.0, 4.0, 3.0, 2.0, 1.5, 9.0, 1.0, 8.0, 7.0, 6.0, 10.0, 11.0]
    runtime_b = [1.0, 1.1, 1.2, 1.3, 1.4, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6]
    score = [float(i) for i in range(12)]
    return [{"seed": seed, "split": split, "name": "a", "runtime": runtime_a, "score": score},
            {"seed": seed, "split": split, "name": "b", "runtime": runtime_b, "score": score}]


def test_rules_and_the_control_by_hand(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    with benchmark_script("bench_tile_stopping") as bench:
        slow, count, opened = bench.rule_slowdowns(np.array(_kernels(0, "program")[0]["runtime"]), np.arange(12.0))
        assert opened and slow["top 5"] == pytest.approx(0.5) and slow["top 7"] == 0.0 and count[bench.RULES[5]] == 10 and slow[bench.RULES[5]] == 0.0
        table = bench.score(_kernels(0, "program") + _kernels(1, "program"))["program"]
        assert table["gate_rate"] == 0.5 and table["seeds"] == [0, 1]
        gate, control = table["per_seed"][bench.RULES[5]], table["per_seed"][bench.RULES[6]]
        assert gate["slowdown"] == [0.0, 0.0] and gate["measurements"] == [7.5, 7.5]
        assert control["slowdown"] == pytest.approx([0.125, 0.125])  # kernel a: 0.5 x 0.5 (top 5) + 0.5 x 0 (top 10); b: 0
        assert control["measurements"] == pytest.approx([7.5, 7.5]) and table["gate_better_seeds"] == 2 and table["gate_mean_below_control"]
        # through the command line, from a dump: both splits won -> the decision line says it ships
        dump = tmp_path / "scores.json.gz"
        bench._save(str(dump), _kernels(0, "program") + _kernels(1, "program") + _kernels(0, "random") + _kernels(1, "random"))
        assert bench.main(["--from-dump", str(dump), "--json", str(tmp_path / "t.json")]) == 0
        out = capsys.readouterr().out
        assert "the gate would ship" in out and json.loads((tmp_path / "t.json").read_text())["table"]["random"]["gate_rate"] == 0.5
        with pytest.raises(SystemExit):
            bench.main([])  # neither DATA nor --from-dump
