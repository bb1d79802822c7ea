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
  dataset reports beside its metrics;
- raw samples go to the SQLite `ProfileCache` (keyed by kernel signature + config, backend and
  machine), so collection resumes where it stopped and nothing is timed twice.

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

__all__ = ["Harness", "KernelMeasurement", "Timer", "config_key", "noise_floor", "per_call_timer", "wall_timer"]

logger = logging.getLogger(__name__)

Timer = Callable[[Any], float]
RETEST_SUFFIX = "/retest"


def wall_timer(runner: Callable[[], object]) -> float:
    """Seconds one blocking call of `runner` takes (time.perf_counter)."""
    began = time.perf_counter()
    runner()
    return time.perf_counter() - began


def per_call_timer(runner: Callable[[], object]) -> float:
    """`wall_timer` divided by the runner's `number` of calls per sample (1 when it has none)."""
    return wall_timer(runner) / max(int(getattr(runner, "number", 1)), 1)


def config_key(kernel_signature: str, config: str) -> str:
    """Cache key of one (kernel, config) pair."""
    return signature_key(kernel_signature + "\n#config " + config)


@dataclass
class KernelMeasurement:
    """One kernel's configurations: measurements, and the test-retest pairs (min1, min2)."""

    measurements: dict[str, Measurement] = field(default_factory=dict)
    retest: dict[str, tuple[float, float]] = field(default_factory=dict)
    measured: int = 0  # configurations timed in this call (the rest came from the cache)

    def best(self) -> str:
        return min(self.measurements, key=lambda c: self.measurements[c].min_s)


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

    def cached(self, kernel_signature: str, config: str) -> Measurement | None:
        if self.cache is None:
            return None
        return self.cache.get(config_key(kernel_signature, config), self.backend, self.machine)

    def cached_retest(self, kernel_signature: str, config: str) -> Measurement | None:
        if self.cache is None:
            return None
        return self.cache.get(config_key(kernel_signature, config), self.backend + RETEST_SUFFIX, self.machine)

    def _rounds(self, runners: Mapping[str, Any], rounds: int) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {c: [] for c in runners}
        names = list(runners)
        for _ in range(rounds):
            for index in self.rng.permutation(len(names)).tolist():
                samples[names[index]].append(float(self.timer(runners[names[index]])))
        return samples

    def measure(self, kernel_signature: str, runners: Mapping[str, Any]) -> KernelMeasurement:
        """Measure every config in `runners` (config text -> runner) that the cache lacks."""
        result = KernelMeasurement()
        todo: dict[str, Any] = {}
        for config, runner in runners.items():
            hit = self.cached(kernel_signature, config)
            if hit is not None:
                result.measurements[config] = hit
                again = self.cached_retest(kernel_signature, config)
                if again is not None:
                    result.retest[config] = (hit.min_s, again.min_s)
            else:
                todo[config] = runner
        if not todo:
            return result
        for runner in todo.values():
            for _ in range(self.warmup):
                self.timer(runner)
        samples = self._rounds(todo, self.repeats)
        if self.remeasure_top > 0 and len(todo) > 1:
            winners = sorted(todo, key=lambda c: min(samples[c]))[: self.remeasure_top]
            extra = self._rounds({c: todo[c] for c in winners}, self.repeats)
            for config in winners:
                samples[config].extend(extra[config])
        retest_count = int(round(self.retest_fraction * len(todo)))
        retested: dict[str, list[float]] = {}
        if retest_count:
            chosen = self.rng.choice(list(todo), size=retest_count, replace=False).tolist()
            retested = self._rounds({c: todo[c] for c in chosen}, self.repeats)
        for config in todo:
            measurement = Measurement.from_samples(samples[config])
            result.measurements[config] = measurement
            key = config_key(kernel_signature, config)
            text = kernel_signature + "\n#config " + config
            if self.cache is not None:
                self.cache.put(key, self.backend, self.machine, measurement, signature=text)
            if config in retested:
                again = Measurement.from_samples(retested[config])
                result.retest[config] = (measurement.min_s, again.min_s)
                if self.cache is not None:
                    self.cache.put(key, self.backend + RETEST_SUFFIX, self.machine, again, signature=text)
        result.measured = len(todo)
        return result
