"""`benchmarks/bench_tile_relabel.py`: dumped rankings scored on a re-measured labelling, on kernels
whose answers are known by hand (the folder is made by the real `merge_remeasurement`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cost_model.learned.tpugraphs import KernelRecord, save_npz
from cost_model.measure.tile.remeasure import merge_remeasurement
from cost_model.profiling.timing import Measurement
from tests.benchmark_scripts import benchmark_script

pytest.importorskip("scipy")

# kernel "a": the collection says config 0 is slow (3.0), the second pass finds it the fastest (0.9)
COLLECT_A, SECOND_A = [3.0, 1.0, 2.0, 4.0, 5.0, 6.0], [0.9, 1.0, 2.0, 4.0, 5.0, 6.0]
COLLECT_B, SECOND_B = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
SCORE = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the ranker puts config 0 first on both


def _folder(tmp_path, remeasure_b: bool = True):  # type: ignore[no-untyped-def]
    folder = tmp_path / "relabelled"
    folder.mkdir()
    for name, collect, second, again in (("a.npz", COLLECT_A, SECOND_A, True), ("b.npz", COLLECT_B, SECOND_B, remeasure_b)):
        rt = np.asarray(collect)
        record = KernelRecord(np.zeros((1, 2), np.float32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64), rt, np.full_like(rt, rt.min()),
                              config_feat=np.zeros((rt.size, 3), np.float32), config_text=[f"c{i}" for i in range(rt.size)],
                              meta={"kernel": name}, path=name)
        if again:
            record = merge_remeasurement(record, {f"c{i}": Measurement.from_samples([s]) for i, s in enumerate(second)})
        save_npz(record, folder / name)
    return folder


def _dump(tmp_path, runtime_a=COLLECT_A):  # type: ignore[no-untyped-def]
    with benchmark_script("bench_tile_stopping") as stopping:
        path = tmp_path / "scores.json.gz"
        stopping._save(str(path), [{"seed": s, "split": "program", "name": n, "runtime": list(r), "score": SCORE}
                                   for s in (0, 1) for n, r in (("a.npz", runtime_a), ("b.npz", COLLECT_B))])
    return path


def test_three_labellings_of_the_same_scores(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = _folder(tmp_path)
    with benchmark_script("bench_tile_relabel") as bench:
        assert bench.main([str(_dump(tmp_path)), "--labels", str(folder), "--json", str(tmp_path / "t.json")]) == 0
        table = json.loads((tmp_path / "t.json").read_text())
        program = table["table"]["program"]
        # collection labels: a's pick is 3x its best (slowdown 2.0), b's is the best -> mean 1.0 per seed
        assert program["collection"]["per_seed"]["top1"] == pytest.approx([1.0, 1.0])
        assert program["collection"]["mean"]["top1_within_2pct"] == pytest.approx(0.5)
        assert program["collection"]["mean"]["tuner_measurements"] == pytest.approx(1.5)  # a: 2nd in order; b: 1st
        # the second pass alone and the minimum of both: config 0 is a's best, both picks are right
        for name in ("re-measurement", "min of both"):
            assert program[name]["mean"]["top1"] == pytest.approx(0.0) and program[name]["mean"]["kendall"] == pytest.approx(1.0)
        # pass 2 as the ranker of pass 1: a's pass-2 order puts config 0 first, which pass 1 calls 3x slow
        assert program["pass 2 ranks pass 1"]["mean"]["top1"] == pytest.approx(1.0)
        assert table["table"]["kernels_scored"] == 4 and table["pass_noise"]["configs"] == 12
        assert table["pass_noise"]["share_faster_2nd"] == pytest.approx(1 / 12)
        assert "| program | collection | 4 | 100.0% |" in capsys.readouterr().out


def test_kernels_not_remeasured_are_skipped_and_foreign_dumps_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = _folder(tmp_path, remeasure_b=False)
    with benchmark_script("bench_tile_relabel") as bench:
        table = bench.score(bench.load_dumps([str(_dump(tmp_path))]), bench.remeasured_labels(str(folder)))
        assert table["kernels_scored"] == 2 and table["kernels_skipped"] == 2
        with pytest.raises(ValueError, match="a.npz: the dump's labels are not this folder's"):
            bench.score(bench.load_dumps([str(_dump(tmp_path, runtime_a=[1.0] * 6))]), bench.remeasured_labels(str(folder)))
        with pytest.raises(ValueError, match="in an earlier dump too"):
            bench.load_dumps([str(_dump(tmp_path)), str(_dump(tmp_path))])
        empty = tmp_path / "empty"
        empty.mkdir()
        with pytest.raises(SystemExit):
            bench.main([str(_dump(tmp_path)), "--labels", str(empty)])  # nothing re-measured there


def test_compare_scores_either_labelling_on_the_minimum_of_both(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    folder = _folder(tmp_path)
    with benchmark_script("bench_tile_stopping") as stopping:
        relabelled = tmp_path / "b.json.gz"  # a ranker fitted on the relabelled folder: its dump holds the minimum of both
        stopping._save(str(relabelled), [{"seed": s, "split": "program", "name": n, "runtime": list(np.minimum(c, r)),
                                          "score": [5.0, 0.0, 1.0, 2.0, 3.0, 4.0]}
                                         for s in (0, 1) for n, c, r in (("a.npz", COLLECT_A, SECOND_A), ("b.npz", COLLECT_B, SECOND_B))])
    with benchmark_script("bench_tile_relabel") as bench:
        assert bench.main([str(_dump(tmp_path)), str(relabelled), "--labels", str(folder), "--compare", "--json", str(tmp_path / "c.json")]) == 0
        got = json.loads((tmp_path / "c.json").read_text())["compare"]["program"]
        first, last = got[str(tmp_path / "scores.json.gz")], got[str(relabelled)]
        assert first["mean"]["top1"] == pytest.approx(0.0)  # config 0 first: a's best once relabelled
        # the second ranker puts config 0 last: a's pick (config 1, 1.0) is 1/0.9 - 1 off; b's pick is 2x its best
        assert last["mean"]["top1"] == pytest.approx(((1.0 / 0.9 - 1) + 1.0) / 2)
        assert got["last_vs_first"]["top1_better_seeds"] == 0 and got["last_vs_first"]["seeds"] == 2
        assert "last vs first dump" in capsys.readouterr().out
        foreign = tmp_path / "f.json.gz"
        with benchmark_script("bench_tile_stopping") as stopping:
            stopping._save(str(foreign), [{"seed": 0, "split": "program", "name": "a.npz", "runtime": [7.0] * 6, "score": SCORE}])
        with pytest.raises(SystemExit):
            bench.main([str(foreign), "--labels", str(folder), "--compare"])
