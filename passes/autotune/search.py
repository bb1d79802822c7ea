"""The autotuning step, independent of what is tuned: rank every candidate with a cost model,
measure only the top-k for real, keep the fastest measured one.

    best = tune_candidates(candidates, rank=model_scores, measure=timer, top_k=5)

`rank(candidates) -> scores` (lower = predicted faster) and `measure(candidates) -> seconds`
are parameters, so a test drives it with a synthetic kernel whose cost is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

import numpy as np

__all__ = ["TuneOutcome", "random_search_measurements", "tune_candidates"]

C = TypeVar("C")


@dataclass
class TuneOutcome(Generic[C]):
    best: C
    best_seconds: float
    measured: dict[int, float]  # candidate index -> measured seconds
    predicted: np.ndarray  # the model's scores of every candidate

    @property
    def measurements(self) -> int:
        return len(self.measured)


def tune_candidates(
    candidates: Sequence[C],
    *,
    rank: Callable[[Sequence[C]], Any],
    measure: Callable[[Sequence[C]], Sequence[float]],
    top_k: int,
) -> TuneOutcome[C]:
    if not candidates:
        raise ValueError("no candidates to tune")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    scores = np.asarray(rank(candidates), dtype=np.float64)
    if scores.shape != (len(candidates),):
        raise ValueError(f"rank returned {scores.shape} scores for {len(candidates)} candidates")
    chosen = np.argsort(scores, kind="stable")[:top_k].tolist()
    seconds = [float(s) for s in measure([candidates[i] for i in chosen])]
    measured = dict(zip(chosen, seconds))
    best = min(measured, key=measured.__getitem__)
    return TuneOutcome(candidates[best], measured[best], measured, scores)


def random_search_measurements(true_seconds: Sequence[float], target: float, *, seed: int = 0, trials: int = 200) -> float:
    """Mean number of measurements random search (sampling without replacement) needs to find a
    candidate within `target` seconds: what the autotuner's measurement count is compared with."""
    values = np.asarray(true_seconds, dtype=np.float64)
    good = values <= target
    if not good.any():
        return float("inf")
    rng = np.random.default_rng(seed)
    counts = []
    for _ in range(trials):
        order = rng.permutation(values.size)
        counts.append(int(np.flatnonzero(good[order])[0]) + 1)
    return float(np.mean(counts))
