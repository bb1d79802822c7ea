"""Wall-clock timing: warm-up, interleaved repetitions, min and median of the raw samples.

Interleaving (every repetition visits all candidates in a fresh random order) spreads slow
phases of a shared machine (another process waking up, frequency changes) over all candidates
instead of charging them to whichever ran at that moment; the minimum is the least disturbed run
and the estimate we rank by, the median says how noisy it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["Measurement", "time_interleaved"]


@dataclass(frozen=True)
class Measurement:
    """Raw samples (seconds) of one candidate, with their min and median."""

    min_s: float
    median_s: float
    samples: tuple[float, ...]
    cached: bool = False

    @classmethod
    def from_samples(cls, samples: Sequence[float], *, cached: bool = False) -> Measurement:
        values = tuple(float(s) for s in samples)
        if not values:
            raise ValueError("a measurement needs at least one sample")
        return cls(min(values), float(np.median(values)), values, cached)

    @property
    def spread(self) -> float:
        """median / min - 1: 0 on a quiet machine."""
        return self.median_s / self.min_s - 1.0 if self.min_s > 0 else 0.0


def time_interleaved(
    runners: Sequence[Callable[[], object]],
    *,
    repeats: int = 20,
    warmup: int = 3,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Measurement]:
    """Time each runner `repeats` times, in a new random order each round, after `warmup` calls.

    A runner must block until its work is finished (the caller's job: XLA dispatch is async).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for runner in runners:
        for _ in range(warmup):
            runner()
    samples: list[list[float]] = [[] for _ in runners]
    rng = np.random.default_rng(seed)
    for _ in range(repeats):
        for index in rng.permutation(len(runners)).tolist():
            began = clock()
            runners[index]()
            samples[index].append(clock() - began)
    return [Measurement.from_samples(s) for s in samples]
