"""Label quality of a tile dataset (per-kernel noise scores, the noise ceiling) and the
re-measurement of the noisiest kernels: statistics on hand-made records, and one real TVM kernel
measured twice into the same cache."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cost_model.learned.metrics import kernel_metrics
from cost_model.learned.tpugraphs import KernelRecord, load_npz, save_npz
from cost_model.measure.quality import kernel_noise, noise_ceiling, noisiest, retest_ratios
from cost_model.measure.tile.remeasure import merge_remeasurement, wait_for_quiet
from cost_model.profiling.timing import Measurement


def _record(runtime: list[float], median: list[float], retest: list[list[float]], name: str = "k", **meta: object) -> KernelRecord:
    rt = np.asarray(runtime, dtype=np.float64)
    return KernelRecord(np.zeros((1, 2), np.float32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64), rt, np.full_like(rt, rt.min()),
                        config_feat=np.zeros((rt.size, 3), np.float32), config_text=[f"c{i}" for i in range(rt.size)],
                        meta={"kernel": name, "config_runtime_median": median, "retest": retest} | meta, path=f"{name}.npz")


def test_kernel_noise_matches_hand_computed_values() -> None:
    # spreads median/min - 1: 0.1, 0.5, 0.0, 1.0 -> median 0.3; retest |b/a - 1|: 0.1, 0.5, 0.375 -> median 0.375
    record = _record([1.0, 2.0, 4.0, 8.0], [1.1, 3.0, 4.0, 16.0], [[1.0, 1.1], [2.0, 3.0], [4.0, 2.5]])
    row = kernel_noise(record)
    assert row.spread_median == pytest.approx(0.3)
    assert row.spread_p90 == pytest.approx(np.quantile([0.1, 0.5, 0.0, 1.0], 0.9))
    assert row.retest_median == pytest.approx(0.375) and row.retest_pairs == 3
    # pairs (1, 1.1), (2, 3), (4, 2.5): one discordant pair of three -> tau 1/3
    assert row.retest_tau == pytest.approx(1 / 3)
    assert row.score == pytest.approx(0.375) and not row.remeasured  # the larger median
    bare = kernel_noise(_record([1.0, 2.0], [], []))  # a file without medians or retests
    assert math.isnan(bare.spread_median) and math.isnan(bare.retest_median) and bare.score == 0.0


def test_noisiest_orders_filters_and_skips_remeasured() -> None:
    quiet = _record([1.0, 2.0], [1.01, 2.02], [], name="quiet")
    loud = _record([1.0, 2.0], [2.0, 4.0], [], name="loud")
    mid = _record([1.0, 2.0], [1.2, 2.4], [], name="mid")
    done = _record([1.0, 2.0], [3.0, 6.0], [], name="done", remeasure={"pairs": [[1.0, 1.0]]})
    rows = [kernel_noise(r) for r in (quiet, loud, mid, done)]
    assert [r.name for r in noisiest(rows)] == ["loud", "mid", "quiet"]
    assert [r.name for r in noisiest(rows, 1)] == ["loud"]
    assert [r.name for r in noisiest(rows, min_score=0.1)] == ["loud", "mid"]
    assert [r.name for r in noisiest(rows, skip_remeasured=False)][0] == "done"


def test_noise_ceiling_is_exact_without_noise_and_below_one_with_it() -> None:
    rng = np.random.default_rng(0)
    records = [_record(list(np.exp(rng.normal(size=40))), [], [[1.0, 1.3], [2.0, 1.8]], name=f"k{i}") for i in range(5)]
    ratios = retest_ratios(records)
    assert sorted(ratios.tolist()) == pytest.approx(sorted([1.3, 0.9, 1 / 1.3, 1 / 0.9] * 5))
    exact = noise_ceiling(records, ratios=np.ones(1))
    assert all(kernel_metrics(p, r.config_runtime)["kendall"] == pytest.approx(1.0) for p, r in zip(exact, records))
    noisy = noise_ceiling(records, seed=1)
    taus = [kernel_metrics(p, r.config_runtime)["kendall"] for p, r in zip(noisy, records)]
    assert 0.3 < float(np.mean(taus)) < 1.0  # log-normal(1) labels, +-30% noise: most pairs keep their order
    again = noise_ceiling(records, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(noisy, again))


def test_merge_takes_the_minimum_of_both_passes_and_keeps_the_pairs() -> None:
    record = _record([1.0, 2.0, 4.0], [1.5, 2.5, 4.5], [[1.0, 1.2]])
    new = {"c0": Measurement.from_samples([1.1, 1.3]), "c1": Measurement.from_samples([1.5, 1.7, 2.0])}
    merged = merge_remeasurement(record, new, old_samples={"c0": (1.0, 1.4, 2.0)}, info={"load1_before": 0.5})
    assert merged.config_runtime.tolist() == [1.0, 1.5, 4.0]  # c2 was not re-measured
    assert merged.config_runtime_normalizers.tolist() == [1.0, 1.0, 1.0]
    assert merged.meta["config_runtime_median"] == pytest.approx([float(np.median([1.0, 1.4, 2.0, 1.1, 1.3])), 1.7, 4.5])
    extra = merged.meta["remeasure"]
    assert extra["pairs"] == [[1.0, 1.1], [2.0, 1.5]] and extra["runtime_collect"] == [1.0, 2.0, 4.0]
    assert extra["load1_before"] == 0.5 and extra["noise_floor"]["pairs"] == 2
    assert record.config_runtime.tolist() == [1.0, 2.0, 4.0]  # the input is left alone
    row = kernel_noise(merged)
    assert row.remeasured and row.retest_pairs == 3  # the collection's retest and both re-measurements


def test_merge_under_the_second_fastest_statistic() -> None:
    """The long protocol's label: the second-fastest sample over both passes when the collection's samples
    are known (c0), else the lower of the two passes' labels (c1)."""
    record = _record([1.4, 2.0, 4.0], [1.5, 2.5, 4.5], [])
    new = {"c0": Measurement.from_samples([1.3, 1.35, 2.0]), "c1": Measurement.from_samples([0.5, 1.8, 1.9])}
    merged = merge_remeasurement(record, new, old_samples={"c0": (1.0, 1.4, 2.0)}, statistic="second")
    assert merged.config_runtime.tolist() == [1.3, 1.8, 4.0]  # c0: second of (1.0, 1.4, 2.0, 1.3, 1.35, 2.0); c1: min(2.0, 1.8)
    assert merged.meta["remeasure"]["pairs"] == [[1.4, 1.35], [2.0, 1.8]]
    assert merged.meta["runtime_statistic"].startswith("second")


def test_wait_for_quiet_polls_the_load_until_it_drops_or_time_runs_out() -> None:
    loads = iter([5.0, 4.0, 1.0])
    slept: list[float] = []
    assert wait_for_quiet(2.0, 100.0, poll=10.0, load=lambda: next(loads), sleep=slept.append)
    assert slept == [10.0, 10.0]
    slept.clear()
    assert not wait_for_quiet(2.0, 25.0, poll=10.0, load=lambda: 9.0, sleep=slept.append)
    assert slept == [10.0, 10.0, 10.0]
    assert wait_for_quiet(None, 0.0, load=lambda: 99.0, sleep=slept.append)  # no limit: never waits


@pytest.mark.parametrize("protocol_name", ["long", "short"])
def test_remeasure_a_real_tvm_kernel_into_the_same_cache(tmp_path, protocol_name) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    from cost_model.measure.tile.collect import protocol_named
    from cost_model.measure.tile.dataset import collect_tile_dataset
    from cost_model.measure.tile.kernels import KernelSpec
    from cost_model.measure.tile.remeasure import REMEASURE_SUFFIX, remeasure_tile_dataset
    from cost_model.profiling.cache import ProfileCache

    protocol = protocol_named(protocol_name)
    specs = [KernelSpec("matmul", (16, 32, 16), "toy/train"), KernelSpec("ew_reduce", (8, 64), "toy/train")]
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        collect_tile_dataset(specs, tmp_path, cache=cache, configs=4, repeats=2, progress=False, protocol=protocol)
        files = sorted(tmp_path.glob("*.npz"))
        before = {f.name: load_npz(f) for f in files}
        assert all(len(r.meta["load1"]) == 2 for r in before.values())  # the load average is stored with the labels
        assert all(r.meta["machine"]["timing_protocol"] == protocol_name and r.meta["machine"]["sample_s"] == protocol.sample_s for r in before.values())
        summary = remeasure_tile_dataset(tmp_path, cache=cache, count=1, repeats=2, progress=False)
        assert summary["chosen"] == 1 and summary["remeasured_total"] == 1 and not summary["stopped"]
        after = {f.name: load_npz(f) for f in files}
        changed = [n for n in after if "remeasure" in after[n].meta]
        assert len(changed) == 1
        old, new = before[changed[0]], after[changed[0]]
        assert new.config_text == old.config_text
        assert (new.config_runtime <= old.config_runtime).all()
        pairs = new.meta["remeasure"]["pairs"]
        assert len(pairs) == old.num_configs and [p[0] for p in pairs] == old.config_runtime.tolist()
        if protocol.statistic == "min":
            assert np.allclose(new.config_runtime, np.minimum(old.config_runtime, [p[1] for p in pairs]))
        else:  # over the union of both passes' samples: never above either pass's label
            assert (new.config_runtime <= np.minimum(old.config_runtime, [p[1] for p in pairs]) + 1e-15).all()
        # the collection's labels are the protocol's statistic of the samples in the cache
        from cost_model.measure.harness import config_key, label_of
        from cost_model.measure.machine import machine_key
        from cost_model.measure.tile.runner import host_target_text

        for text, label in zip(old.config_text, old.config_runtime):
            cached = cache.get(config_key(old.meta["kernel"], text), protocol.backend, machine_key(host_target_text(), 1))
            assert label == pytest.approx(label_of(cached, protocol.statistic))
        assert old.meta["runtime_statistic"] == protocol.statistic
        rows = cache._db.execute("SELECT backend, COUNT(*) FROM measurements GROUP BY backend").fetchall()  # noqa: SLF001
        counts = dict(rows)
        # re-timed under the protocol it was collected with, beside the collection's rows (untouched)
        assert counts == {protocol.backend + REMEASURE_SUFFIX: old.num_configs, protocol.backend: 2 * 4}
        assert new.meta["remeasure"]["timing_protocol"] == protocol_name
        # resumable: the re-measured kernel is skipped, the other one is next
        summary = remeasure_tile_dataset(tmp_path, cache=cache, count=1, repeats=2, progress=False)
        assert summary["remeasured_total"] == 2
        log = json.loads((tmp_path / "remeasure.json").read_text(encoding="utf-8"))
        assert set(log["kernels"]) == {f.name for f in files}
        assert all(math.isfinite(e["load1_before"]) for e in log["kernels"].values())
        # a re-measured file written again (its cache rows kept) measures nothing new
        save_npz(old, tmp_path / changed[0])
        rows_before = len(cache)
        remeasure_tile_dataset(tmp_path, cache=cache, count=5, repeats=2, progress=False)
        assert len(cache) == rows_before


def test_timing_protocols_and_batching() -> None:
    """A dataset whose machine record names no protocol was timed with the short one (all before the
    twenty-third session); `batch_to` batches calls until one sample lasts the protocol's sample."""
    import time

    from cost_model.measure.tile.collect import LONG_PROTOCOL, SHORT_PROTOCOL, TILE_PROTOCOL, batch_to, protocol_named, protocol_of

    assert protocol_of({}) is SHORT_PROTOCOL and protocol_of({"timing_protocol": "long"}) is LONG_PROTOCOL
    assert (SHORT_PROTOCOL.statistic, LONG_PROTOCOL.statistic) == ("min", "second")
    # the long protocol: no winners' extra rounds, a retest among all configurations (both biased labels low)
    assert (LONG_PROTOCOL.remeasure_top, LONG_PROTOCOL.retest_fillers) == (0, True) and SHORT_PROTOCOL.remeasure_top == 3
    from cost_model.measure.tile.collect import tile_harness

    harness = tile_harness(None)
    assert (harness.remeasure_top, harness.retest_fillers, harness.statistic, harness.repeats) == (0, True, "second", 15)
    assert tile_harness(None, protocol=SHORT_PROTOCOL, remeasure_top=1).remeasure_top == 1  # the caller's settings win
    assert TILE_PROTOCOL is LONG_PROTOCOL and LONG_PROTOCOL.backend != SHORT_PROTOCOL.backend  # the two never share cache rows
    with pytest.raises(ValueError, match="unknown tile timing protocol 'medium'"):
        protocol_named("medium")

    class Sleeper:
        number = 1

        def __call__(self) -> None:
            for _ in range(self.number):
                time.sleep(1e-4)

    run = batch_to(Sleeper(), 0.05)
    assert 2 <= run.number <= 500  # ceil(50 ms / one call of >= 0.1 ms; under 25 ms even on a busy machine)
    assert batch_to(Sleeper(), 1e-6).number == 1


def test_cli_noise_lists_the_noisiest_kernel_first(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    save_npz(_record([1.0, 2.0], [1.01, 2.02], [[1.0, 1.01]], name="quiet", program="p"), tmp_path / "quiet.npz")
    save_npz(_record([1.0, 2.0], [2.0, 4.0], [[1.0, 1.5]], name="loud", program="p"), tmp_path / "loud.npz")
    assert main(["costmodel", "noise", str(tmp_path), "--top", "5", "--json", str(tmp_path / "q.json")]) == 0
    out = capsys.readouterr().out
    assert out.index("| loud |") < out.index("| quiet |")
    written = json.loads((tmp_path / "q.json").read_text(encoding="utf-8"))
    assert [k["name"] for k in written["kernels"]] == ["loud", "quiet"] and written["kernels"][0]["score"] == pytest.approx(1.0)
    assert written["noise_floor"]["pairs"] == 2
    assert main(["costmodel", "remeasure", "--help"]) == 0
    assert "--max-load" in capsys.readouterr().out


def test_copy_dataset_resolves_a_symlinked_folder_resumes_and_refuses_others(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.measure.tile.remeasure import copy_dataset

    src = tmp_path / "data"
    src.mkdir()
    save_npz(_record([1.0, 2.0], [1.1, 2.2], [], name="k"), src / "k.npz")
    (src / "dataset.json").write_text("{}", encoding="utf-8")
    link = tmp_path / "link"
    link.symlink_to(src, target_is_directory=True)
    out = copy_dataset(link, tmp_path / "new")
    assert not out.is_symlink() and not (out / "k.npz").is_symlink() and (out / "dataset.json").is_file()
    assert not (tmp_path / "new.partial").exists()
    save_npz(_record([0.5, 2.0], [0.6, 2.2], [], name="k"), out / "k.npz")  # relabelled in the copy
    assert copy_dataset(link, out) == out and load_npz(out / "k.npz").config_runtime.tolist() == [0.5, 2.0]  # resumed, not copied again
    assert load_npz(src / "k.npz").config_runtime.tolist() == [1.0, 2.0]  # the original is untouched
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(FileExistsError, match="other: exists and is not a copy"):
        copy_dataset(src, tmp_path / "other")
    with pytest.raises(ValueError, match="is the dataset folder itself"):
        copy_dataset(src, link)
    with pytest.raises(FileNotFoundError, match="not a dataset folder"):
        copy_dataset(tmp_path / "other", tmp_path / "x")


def test_cli_remeasure_out_relabels_a_copy_and_leaves_the_original(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    import hashlib

    from compiler_opt.cli.main import main
    from cost_model.measure.tile.dataset import collect_tile_dataset
    from cost_model.measure.tile.kernels import KernelSpec
    from cost_model.profiling.cache import ProfileCache

    src = tmp_path / "data"
    src.mkdir()
    with ProfileCache(src / "measurements.sqlite") as cache:
        collect_tile_dataset([KernelSpec("matmul", (16, 32, 16), "toy/train")], src, cache=cache, configs=3, repeats=2, progress=False)
    digest = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in src.iterdir()}
    (tmp_path / "link").symlink_to(src, target_is_directory=True)
    assert main(["costmodel", "remeasure", str(tmp_path / "link"), "--out", str(tmp_path / "new"), "--repeats", "2", "--no-progress"]) == 0
    assert "the original folder is left as it is" in capsys.readouterr().out
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in src.iterdir()} == digest  # nothing written to the original
    (relabelled,) = sorted((tmp_path / "new").glob("*.npz"))
    assert "remeasure" in load_npz(relabelled).meta
    assert main(["costmodel", "remeasure", str(src), "--out", str(src)]) == 2
    assert "is the dataset folder itself" in capsys.readouterr().err


def test_a_folder_is_never_resumed_under_another_timing_protocol(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A tile folder timed with one protocol refuses the other (library and CLI), naming the file; the folder is left as it was."""
    from compiler_opt.cli.main import main
    from cost_model.measure.tile.collect import LONG_PROTOCOL, SHORT_PROTOCOL
    from cost_model.measure.tile.dataset import collect_tile_dataset, protocol_mismatch

    record = _record([1.0, 2.0], [1.0, 2.0], [], name="old", program="p", machine={"repeats": 5})  # no protocol named: short
    save_npz(record, tmp_path / "old.npz")
    before = (tmp_path / "old.npz").read_bytes()
    assert protocol_mismatch(tmp_path, SHORT_PROTOCOL) is None
    message = protocol_mismatch(tmp_path, LONG_PROTOCOL)
    assert message is not None and "old.npz" in message and "--timing-protocol short" in message
    with pytest.raises(ValueError, match="old.npz: timed with the short tile timing protocol"):
        collect_tile_dataset([], tmp_path, cache=None, progress=False)  # the default (long) protocol
    assert main(["costmodel", "collect", "--task", "tile", "--out", str(tmp_path), "--synthetic", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "costmodel collect:" in err and "old.npz" in err and "long one" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.npz"] and (tmp_path / "old.npz").read_bytes() == before
