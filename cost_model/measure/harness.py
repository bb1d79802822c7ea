"""The measurement harness: interleaved timing of many configurations of one kernel.

    harness = Harness(cache=ProfileCache(path), backend="tvm-llvm", repeats=7)
    result = harness.measure("matmul(64,64,64)", {"cfg-a": run_a, "cfg-b": run_b})
    result.measurements["cfg-a"].min_s

What it does, and why:
- warm-up calls first (first runs fault pages in and fill caches);
- `repeats` rounds; in every round all configurations run once in a fresh random order, so a
  slow phase of this shared machine is spread over all configurations instead of charged to
  whichever ran at that moment; min (the least disturbed run, what we rank by) and median;
- the apparent winners (`remeasure_top` lowest minima) get `repeats` more interleaved samples,
  since the winner is what an autotuner keeps and a lucky sample must not decide it;
- `retest_fraction` of the configurations are measured a second time in an independent pass
  (after everything else): |min2 / min1 - 1| over those is the test-retest noise floor that every
  dataset reports beside its metrics. A round of a few configurations runs on warmer caches than a
  round of all of them (tile kernels: 1-5% faster; RESULTS (i), twenty-third session), so with
  `retest_fillers` every configuration runs in the retest rounds and only the chosen ones' samples
  are kept; the same holds for the winners' extra rounds, which the tile protocol therefore turns off;
- raw samples go to the SQLite `ProfileCache` (keyed by kernel signature + config, backend and
  machine), so collection resumes where it stopped and nothing is timed twice;
- short programs: `batched(fn, min_sample_s)` loops a runner so a sample lasts long enough to
  outlast an interrupt or scheduler tick, and `per_call_timer` divides by the calls;
- `reference=`: a reference runner timed right after every sample; the sample is stored as
  sample / reference x `reference_s`, which cancels a slowdown of the whole machine that lasts
  longer than the pair (use `statistic="median"`: the min of a ratio picks the samples whose
  reference was disturbed). The fusion collector uses it (RESULTS.md (i), eighth session).

The timer is a parameter (`timer(runner) -> seconds`) so tests drive the statistics with a fake
timer whose noise is known.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
import time
from typing import Any, Callable, Mapping

import numpy as np

from cost_model.profiling.cache import ProfileCache
from cost_model.profiling.signature import signature_key
from cost_model.profiling.timing import Measurement

__all__ = ["Batched", "Harness", "KernelMeasurement", "STATISTICS", "Timer", "batched", "config_key", "label_of", "noise_floor", "per_call_timer", "wall_timer"]

logger = logging.getLogger(__name__)

Timer = Callable[[Any], float]
RETEST_SUFFIX = "/retest"
RAW_SUFFIX = "/raw"  # seconds before the reference normalization
REFERENCE_SUFFIX = "/reference"  # the paired reference samples


def wall_timer(runner: Callable[[], object]) -> float:
    """Seconds one blocking call of `runner` takes (time.perf_counter)."""
    began = time.perf_counter()
    runner()
    return time.perf_counter() - began


def per_call_timer(runner: Callable[[], object]) -> float:
    """`wall_timer` divided by the runner's `number` of calls per sample (1 when it has none)."""
    return wall_timer(runner) / max(int(getattr(runner, "number", 1)), 1)


class Batched:
    """`fn` called `number` times per timed sample (`per_call_timer` divides by `number`): a
    sample of a ~50-500 us program is then long against the timer, the scheduler tick and one
    stray interrupt, which a single call is not."""

    def __init__(self, fn: Callable[[], object], number: int = 1) -> None:
        self.fn = fn
        self.number = max(int(number), 1)

    def __call__(self) -> None:
        fn = self.fn
        for _ in range(self.number):
            fn()


def batched(fn: Callable[[], object], min_sample_s: float, *, clock: Callable[[], float] = time.perf_counter) -> Batched:
    """A `Batched` runner whose sample lasts about `min_sample_s`: `fn` is called once to warm
    up, then timed over a few calls, and `number` = ceil(min_sample_s / fastest call)."""
    fn()
    fastest = float("inf")
    for _ in range(3):
        began = clock()
        fn()
        fastest = min(fastest, clock() - began)
    return Batched(fn, int(np.ceil(min_sample_s / max(fastest, 1e-7))))


def config_key(kernel_signature: str, config: str) -> str:
    """Cache key of one (kernel, config) pair."""
    return signature_key(kernel_signature + "\n#config " + config)


@dataclass
class KernelMeasurement:
    """One kernel's configurations: measurements, and the test-retest pairs (min1, min2)."""

    measurements: dict[str, Measurement] = field(default_factory=dict)
    retest: dict[str, tuple[float, float]] = field(default_factory=dict)
    measured: int = 0  # configurations timed in this call (the rest came from the cache)
    reference: dict[str, Measurement] = field(default_factory=dict)  # paired reference seconds (harness with a reference)
    statistic: str = "min"  # the harness's label statistic: `best` ranks by it

    def best(self) -> str:
        """The configuration with the lowest label (min, second or median, as the harness labels)."""
        return min(self.measurements, key=lambda c: label_of(self.measurements[c], self.statistic))


STATISTICS = ("min", "second", "median")


def label_of(measurement: Measurement, statistic: str = "min") -> float:
    """A measurement's label: its fastest sample (`min`), its second fastest (`second`: one sample far below
    the rest, a memory-bound kernel in a quiet moment or a clock artefact, does not decide), or its median."""
    if statistic == "min":
        return measurement.min_s
    if statistic == "median":
        return measurement.median_s
    if statistic == "second":
        ordered = sorted(measurement.samples)
        return float(ordered[1]) if len(ordered) > 1 else measurement.min_s
    raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")


def noise_floor(pairs: Mapping[str, tuple[float, float]] | list[tuple[float, float]]) -> dict[str, float]:
    """Median and 90th percentile of |min2 / min1 - 1| over test-retest pairs (NaN when empty)."""
    values = list(pairs.values()) if isinstance(pairs, Mapping) else list(pairs)
    rel = np.array([abs(b / a - 1.0) for a, b in values if a > 0], dtype=np.float64)
    if not rel.size:
        return {"median": float("nan"), "p90": float("nan"), "pairs": 0}
    return {"median": float(np.median(rel)), "p90": float(np.quantile(rel, 0.9)), "pairs": int(rel.size)}


class Harness:
    """Times configurations of a kernel (see the module docstring)."""

    def __init__(
        self,
        *,
        cache: ProfileCache | None = None,
        backend: str = "unknown",
        machine: str = "",
        timer: Timer = wall_timer,
        repeats: int = 7,
        warmup: int = 2,
        remeasure_top: int = 3,
        retest_fraction: float = 0.1,
        seed: int = 0,
        reference: Any | None = None,
        reference_s: float | None = None,
        statistic: str = "min",
        retest_fillers: bool = False,
    ) -> None:
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        if not 0.0 <= retest_fraction <= 1.0:
            raise ValueError(f"retest_fraction must lie in [0, 1], got {retest_fraction}")
        self.cache = cache
        self.backend = backend
        self.machine = machine
        self.timer = timer
        self.repeats = repeats
        self.warmup = warmup
        self.remeasure_top = remeasure_top
        self.retest_fraction = retest_fraction
        self.rng = np.random.default_rng(seed)
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
        self.statistic = statistic
        self.retest_fillers = retest_fillers
        # A reference runner timed right after every sample: the sample is stored as
        # sample / reference x reference_s, which cancels a slowdown of the whole machine that lasts
        # longer than a pair (frequency, a neighbour's load on the shared cache), not one that hits
        # only the sample.
        self.reference = reference
        self.reference_s = reference_s

    def value(self, measurement: Measurement) -> float:
        """The label of a measurement under this harness's statistic."""
        return label_of(measurement, self.statistic)

    def calibrate_reference(self, samples: int = 31) -> float:
        """`reference_s`: the median of `samples` timings of the reference (once per harness)."""
        if self.reference is None:
            raise ValueError("the harness has no reference runner")
        if self.reference_s is None:
            self.timer(self.reference)
            self.reference_s = float(np.median([self.timer(self.reference) for _ in range(samples)]))
        return self.reference_s

    def cached(self, kernel_signature: str, config: str) -> Measurement | None:
        if self.cache is None:
            return None
        return self.cache.get(config_key(kernel_signature, config), self.backend, self.machine)

    def cached_retest(self, kernel_signature: str, config: str) -> Measurement | None:
        if self.cache is None:
            return None
        return self.cache.get(config_key(kernel_signature, config), self.backend + RETEST_SUFFIX, self.machine)

    def _rounds(self, runners: Mapping[str, Any], rounds: int, raw: dict[str, list[float]] | None = None,
                ref: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
        """`rounds` interleaved samples of every runner (normalized by the paired reference when
        the harness has one; the raw and reference seconds are appended to `raw` / `ref`)."""
        samples: dict[str, list[float]] = {c: [] for c in runners}
        names = list(runners)
        scale = self.calibrate_reference() if self.reference is not None else 1.0
        for _ in range(rounds):
            for index in self.rng.permutation(len(names)).tolist():
                name = names[index]
                value = float(self.timer(runners[name]))
                if raw is not None:
                    raw.setdefault(name, []).append(value)
                if self.reference is not None:
                    paired = float(self.timer(self.reference))
                    if ref is not None:
                        ref.setdefault(name, []).append(paired)
                    value = value / paired * scale
                samples[name].append(value)
        return samples

    def measure(self, kernel_signature: str, runners: Mapping[str, Any]) -> KernelMeasurement:
        """Measure every config in `runners` (config text -> runner) that the cache lacks."""
        result = KernelMeasurement(statistic=self.statistic)
        todo: dict[str, Any] = {}
        for config, runner in runners.items():
            hit = self.cached(kernel_signature, config)
            if hit is not None:
                result.measurements[config] = hit
                again = self.cached_retest(kernel_signature, config)
                if again is not None:
                    result.retest[config] = (self.value(hit), self.value(again))
                if self.reference is not None and self.cache is not None:
                    paired = self.cache.get(config_key(kernel_signature, config), self.backend + REFERENCE_SUFFIX, self.machine)
                    if paired is not None:
                        result.reference[config] = paired
            else:
                todo[config] = runner
        if not todo:
            return result
        for runner in todo.values():
            for _ in range(self.warmup):
                self.timer(runner)
        raw: dict[str, list[float]] = {}
        ref: dict[str, list[float]] = {}
        samples = self._rounds(todo, self.repeats, raw, ref)
        if self.remeasure_top > 0 and len(todo) > 1:
            winners = sorted(todo, key=lambda c: self.value(Measurement.from_samples(samples[c])))[: self.remeasure_top]
            extra = self._rounds({c: todo[c] for c in winners}, self.repeats, raw, ref)
            for config in winners:
                samples[config].extend(extra[config])
        retest_count = int(round(self.retest_fraction * len(todo)))
        retested: dict[str, list[float]] = {}
        if retest_count:
            chosen = self.rng.choice(list(todo), size=retest_count, replace=False).tolist()
            if self.retest_fillers:  # every configuration runs again, so the retested ones see the main pass's cache pressure
                keep = set(chosen)
                retested = {c: v for c, v in self._rounds(todo, self.repeats).items() if c in keep}
            else:
                retested = self._rounds({c: todo[c] for c in chosen}, self.repeats)
        for config in todo:
            measurement = Measurement.from_samples(samples[config])
            result.measurements[config] = measurement
            if self.reference is not None:
                result.reference[config] = Measurement.from_samples(ref[config])
            key = config_key(kernel_signature, config)
            text = kernel_signature + "\n#config " + config
            if self.cache is not None:
                self.cache.put(key, self.backend, self.machine, measurement, signature=text)
                if self.reference is not None:  # the seconds behind the normalized samples
                    self.cache.put(key, self.backend + RAW_SUFFIX, self.machine, Measurement.from_samples(raw[config]), signature=text)
                    self.cache.put(key, self.backend + REFERENCE_SUFFIX, self.machine, Measurement.from_samples(ref[config]), signature=text)
            if config in retested:
                again = Measurement.from_samples(retested[config])
                result.retest[config] = (self.value(measurement), self.value(again))
                if self.cache is not None:
                    self.cache.put(key, self.backend + RETEST_SUFFIX, self.machine, again, signature=text)
        result.measured = len(todo)
        return result
