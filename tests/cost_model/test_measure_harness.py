"""The measurement harness's statistics, driven by a fake timer whose noise is known."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from cost_model.measure.harness import RAW_SUFFIX, REFERENCE_SUFFIX, Batched, Harness, batched, config_key, noise_floor, per_call_timer
from cost_model.profiling.cache import ProfileCache
from cost_model.profiling.timing import Measurement


class FakeTimer:
    """sample = true_cost * (1 + e), e ~ Exponential(scale): timing noise only ever slows a run."""

    def __init__(self, scale: float, seed: int = 0) -> None:
        self.scale = scale
        self.rng = np.random.default_rng(seed)
        self.calls: list[str] = []

    def __call__(self, runner: tuple[str, float]) -> float:
        name, cost = runner
        self.calls.append(name)
        return cost * (1.0 + self.rng.exponential(self.scale))


def _runners(count: int) -> dict[str, tuple[str, float]]:
    return {f"c{i}": (f"c{i}", 1e-3 * (1.0 + 0.1 * i)) for i in range(count)}


def test_min_and_median_match_the_known_noise() -> None:
    timer = FakeTimer(scale=0.05)
    harness = Harness(timer=timer, repeats=301, warmup=0, remeasure_top=0, retest_fraction=0.0)
    result = harness.measure("k", _runners(3))
    for name, (_, cost) in _runners(3).items():
        m = result.measurements[name]
        assert cost <= m.min_s <= cost * 1.002  # min of 301 draws: within ~0.05/301 of the true cost
        # median of cost*(1+Exp(s)) is cost*(1 + s ln 2)
        assert m.median_s == pytest.approx(cost * (1 + 0.05 * math.log(2)), rel=0.01)
        assert len(m.samples) == 301


def test_rounds_are_interleaved_in_random_order_and_winners_remeasured() -> None:
    timer = FakeTimer(scale=0.01)
    harness = Harness(timer=timer, repeats=4, warmup=1, remeasure_top=2, retest_fraction=0.0, seed=3)
    runners = _runners(6)
    result = harness.measure("k", runners)
    rounds = timer.calls[6:]  # after one warm-up call each
    first, second = rounds[:6], rounds[6:12]
    assert sorted(first) == sorted(runners) and sorted(second) == sorted(runners)
    assert first != second  # a fresh order every round
    counts = {name: len(m.samples) for name, m in result.measurements.items()}
    assert counts["c0"] == counts["c1"] == 8  # the two apparent winners: repeats more samples
    assert all(counts[f"c{i}"] == 4 for i in range(2, 6))
    assert result.best() == "c0"


def test_best_ranks_by_the_harness_statistic() -> None:
    """A median-labelled harness (the referenced fusion collection) picks its winner by median too:
    here "a" has the lower min (one lucky sample), "b" the lower median."""
    from cost_model.measure.harness import KernelMeasurement
    from cost_model.profiling.timing import Measurement

    measurements = {"a": Measurement.from_samples([1.0, 3.0, 3.0]), "b": Measurement.from_samples([1.5, 1.6, 1.7])}
    assert KernelMeasurement(measurements).best() == "a"
    assert KernelMeasurement(measurements, statistic="median").best() == "b"
    harness = Harness(timer=FakeTimer(scale=0.01), repeats=3, warmup=0, remeasure_top=0, retest_fraction=0.0, statistic="median")
    assert harness.measure("k", _runners(3)).statistic == "median"


def test_noise_floor_estimates_the_known_test_retest_spread() -> None:
    # min of r draws of cost*(1+Exp(s)) is cost*(1+Exp(s/r)); |X-Y| of two such is Exp(s/r): median s ln2 / r.
    scale, repeats = 0.2, 4
    harness = Harness(timer=FakeTimer(scale, seed=1), repeats=repeats, warmup=0, remeasure_top=0, retest_fraction=1.0, seed=1)
    result = harness.measure("k", _runners(400))
    floor = noise_floor(result.retest)
    assert floor["pairs"] == 400
    assert floor["median"] == pytest.approx(scale * math.log(2) / repeats, rel=0.25)
    assert floor["p90"] > floor["median"]


def test_cache_makes_collection_resumable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        timer = FakeTimer(scale=0.01)
        harness = Harness(cache=cache, backend="fake", machine="m", timer=timer, repeats=3, warmup=1, retest_fraction=0.5)
        first = harness.measure("kernel", _runners(4))
        calls = len(timer.calls)
        again = harness.measure("kernel", _runners(5))  # one new config
        assert again.measured == 1
        assert len(timer.calls) - calls == 1 + 3  # warm-up and rounds; a lone fresh config has no rival to re-measure against
        for name, m in first.measurements.items():
            assert again.measurements[name].samples == m.samples and again.measurements[name].cached
        assert len(again.retest) >= len(first.retest)  # retest pairs come back from the cache too
        other = Harness(cache=cache, backend="fake", machine="other", timer=timer, repeats=1, warmup=0)
        assert other.measure("kernel", _runners(1)).measured == 1  # another machine measures anew


def test_retest_fillers_run_every_configuration_but_keep_the_chosen() -> None:
    calls: list[str] = []

    def timer(runner: str) -> float:
        calls.append(runner)
        return 1.0

    runners = {f"c{i}": f"c{i}" for i in range(10)}
    plain = Harness(timer=timer, repeats=2, warmup=0, remeasure_top=0, retest_fraction=0.2, seed=4)
    result = plain.measure("k", runners)
    assert len(result.retest) == 2 and len(calls) == 10 * 2 + 2 * 2  # the retest rounds time the chosen two alone
    calls.clear()
    filled = Harness(timer=timer, repeats=2, warmup=0, remeasure_top=0, retest_fraction=0.2, seed=4, retest_fillers=True)
    result = filled.measure("k", runners)
    assert len(result.retest) == 2 and len(calls) == 10 * 2 + 10 * 2  # every configuration runs in them
    assert all(len(m.samples) == 2 for m in result.measurements.values())  # remeasure_top=0: no extra rounds


def test_label_statistics() -> None:
    from cost_model.measure.harness import label_of

    m = Measurement.from_samples([3.0, 1.0, 2.0, 10.0])
    assert (label_of(m), label_of(m, "second"), label_of(m, "median")) == (1.0, 2.0, 2.5)
    assert label_of(Measurement.from_samples([4.0]), "second") == 4.0  # one sample: it is the label
    assert Harness(statistic="second").value(m) == 2.0
    with pytest.raises(ValueError, match="statistic"):
        label_of(m, "mean")


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="repeats"):
        Harness(repeats=0)
    with pytest.raises(ValueError, match="retest_fraction"):
        Harness(retest_fraction=1.5)
    with pytest.raises(ValueError, match="statistic"):
        Harness(statistic="mean")


def test_batched_runner_sizes_its_sample_from_the_fastest_call() -> None:
    calls: list[int] = []
    ticks = iter([0.0, 1e-4, 1.0, 1.0 + 2e-4, 2.0, 2.0 + 1.5e-4])  # three timed calls: 100, 200, 150 us

    runner = batched(lambda: calls.append(1), 2e-3, clock=lambda: next(ticks))
    assert isinstance(runner, Batched) and runner.number == 20  # ceil(2 ms / fastest 100 us)
    assert len(calls) == 4  # one warm-up call and three timed ones
    runner()
    assert len(calls) == 24
    assert Batched(lambda: None, 0).number == 1


def test_per_call_timer_divides_a_batched_sample_by_its_calls() -> None:
    spent = {"s": 0.0}

    def slow() -> None:  # ~0.2 ms of real work per call
        began = time.perf_counter()
        while time.perf_counter() - began < 2e-4:
            pass
        spent["s"] += 1

    # The fastest of three samples: one preemption on a loaded machine (CI) can stretch a single
    # 2 ms sample several-fold, but not every one. Undivided, a sample of ten calls is >= 2 ms.
    many = min(per_call_timer(Batched(slow, 10)) for _ in range(3))
    assert spent["s"] == 30
    assert 2e-4 <= many < 1e-3  # per call, not per sample of ten calls


class LevelTimer:
    """A machine whose speed changes between sample pairs: every sample of a pair (a config, then
    the reference right after it) is slowed by the same factor, drawn from {1, 1.6} after each
    reference sample. Raw minima and medians then depend on which rounds a config got; the ratio
    to the paired reference does not."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.level = 1.0

    def __call__(self, runner: tuple[str, float]) -> float:
        name, cost = runner
        value = cost * self.level
        if name == "ref":
            self.level = float(self.rng.choice([1.0, 1.6]))
        return value


def test_reference_pairing_cancels_a_level_shift_and_keeps_the_raw_seconds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    runners = _runners(6)
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        harness = Harness(cache=cache, backend="fake", machine="m", timer=LevelTimer(seed=2), repeats=5, warmup=1, remeasure_top=2,
                          retest_fraction=0.5, reference=("ref", 2e-3), reference_s=1.0, statistic="median")
        result = harness.measure("k", runners)
        for name, (_, cost) in runners.items():
            m = result.measurements[name]
            assert m.min_s == pytest.approx(cost / 2e-3) and m.median_s == pytest.approx(cost / 2e-3)  # the exact ratio, every sample
            assert harness.value(m) == m.median_s
            seconds = cache.get(config_key("k", name), "fake" + RAW_SUFFIX, "m")
            paired = cache.get(config_key("k", name), "fake" + REFERENCE_SUFFIX, "m")
            assert seconds is not None and paired is not None and len(seconds.samples) == len(paired.samples) == len(m.samples)
            assert {round(s / cost, 6) for s in seconds.samples} <= {1.0, 1.6}  # the raw seconds kept their level shifts
            assert result.reference[name].samples == paired.samples
        assert all(a == pytest.approx(b) for a, b in result.retest.values())  # the retest agrees exactly too
        again = harness.measure("k", runners)  # from the cache: the reference samples come back with it
        assert again.measured == 0 and set(again.reference) == set(runners)
    calibrated = Harness(timer=LevelTimer(seed=3), repeats=3, warmup=0, remeasure_top=0, retest_fraction=0.0, reference=("ref", 2e-3))
    result = calibrated.measure("k", _runners(2))
    assert calibrated.reference_s is not None and 2e-3 <= calibrated.reference_s <= 3.2e-3  # median of the reference's own samples
    assert result.measurements["c0"].samples[0] == pytest.approx(1e-3 / 2e-3 * calibrated.reference_s)
    with pytest.raises(ValueError, match="no reference"):
        Harness().calibrate_reference()
