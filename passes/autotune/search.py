"""The autotuning step, independent of what is tuned: rank every candidate with a cost model,
measure only the top-k for real, keep the fastest measured one.

    best = tune_candidates(candidates, rank=model_scores, measure=timer, top_k=5)
    best = tune_candidates(candidates, rank=model_scores, measure=timer, top_k=5, extra_k=5)   # the gate

The gate (twenty-first session, RESULTS (i)): when the measured top-k disagree with the ranker's
order of them (Kendall tau below `gate_tau`, or undefined), the ranker is unreliable on this
candidate set, and the next `extra_k` in its order are measured too.

`rank(candidates) -> scores` (lower = predicted faster) and `measure(candidates) -> seconds`
are parameters, so a test drives it with a synthetic kernel whose cost is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

import numpy as np

__all__ = ["GATE_TAU", "TuneOutcome", "agreement", "random_search_measurements", "tune_candidates"]

C = TypeVar("C")
GATE_TAU = 0.2  # with 5 measured: the gate opens when their tau is <= 0 (no better than a coin)


@dataclass
class TuneOutcome(Generic[C]):
    best: C
    best_seconds: float
    measured: dict[int, float]  # candidate index -> measured seconds
    predicted: np.ndarray  # the model's scores of every candidate
    agreement: float = float("nan")  # Kendall tau of the ranker's scores and the measured seconds of the top-k (gate runs only)
    extra_measured: int = 0  # candidates measured past the top-k because the gate opened

    @property
    def measurements(self) -> int:
        return len(self.measured)


def tune_candidates(
    candidates: Sequence[C],
    *,
    rank: Callable[[Sequence[C]], Any],
    measure: Callable[[Sequence[C]], Sequence[float]],
    top_k: int,
    extra_k: int = 0,
    gate_tau: float = GATE_TAU,
) -> TuneOutcome[C]:
    """`extra_k` > 0: after the top-k, measure the next `extra_k` in the ranker's order when the
    measured top-k's `agreement` with the ranker is below `gate_tau` (or undefined)."""
    if not candidates:
        raise ValueError("no candidates to tune")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if extra_k < 0:
        raise ValueError(f"extra_k must be >= 0, got {extra_k}")
    scores = np.asarray(rank(candidates), dtype=np.float64)
    if scores.shape != (len(candidates),):
        raise ValueError(f"rank returned {scores.shape} scores for {len(candidates)} candidates")
    order = np.argsort(scores, kind="stable")
    chosen = order[:top_k].tolist()
    seconds = [float(s) for s in measure([candidates[i] for i in chosen])]
    measured = dict(zip(chosen, seconds))
    tau, extra = float("nan"), 0
    if extra_k > 0:
        tau = agreement(scores[chosen], seconds)
        more = order[top_k : top_k + extra_k].tolist()
        if not tau >= gate_tau and more:  # NaN (constant scores or times) opens it too
            measured.update(zip(more, (float(s) for s in measure([candidates[i] for i in more]))))
            extra = len(more)
    best = min(measured, key=measured.__getitem__)
    return TuneOutcome(candidates[best], measured[best], measured, scores, tau, extra)


def agreement(scores: Sequence[float], seconds: Sequence[float]) -> float:
    """Kendall tau (tau-b) between the ranker's scores and the measured seconds of the same
    candidates: 1 = the ranker ordered them right; NaN when fewer than 2 or either is constant."""
    from scipy.stats import kendalltau

    if len(scores) < 2:
        return float("nan")
    return float(kendalltau(np.asarray(scores, dtype=np.float64), np.asarray(seconds, dtype=np.float64)).statistic)


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
