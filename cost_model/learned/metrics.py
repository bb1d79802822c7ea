"""Metrics of a cost model on the configurations of one kernel, and their means over kernels.

- top-k slowdown: runtime of the best of the k configurations the model ranks first, over the
  true best runtime, minus 1 (0 = the model's top-k contains the optimum);
- Kendall tau (scipy's tau-b) between predicted and measured runtimes; NaN-free: a constant
  prediction scores 0;
- MAPE of exp(pred) against runtime, over configurations whose runtime is at least `min_runtime`;
- best-seconds error: |exp(min pred) / min runtime - 1|, what `LearnedCosts` answers for a node
  (the fastest predicted time over candidates) against the kernel's measured best;
- `label_spread`: how far a kernel's configurations lie apart (median |runtime / median - 1|).
  Where it is below the dataset's test-retest noise floor the kernel is flat (its configurations
  time within noise of each other) and its Kendall tau is noise for any model; benchmarks report
  tau over the kernels above the floor beside (never instead of) the tau over all kernels.
- `pair_agreement_by_gap`: of the pairs of a kernel's configurations whose measured runtimes differ
  by a log ratio within each bin, how many the model orders the same way. Kendall tau over all pairs
  mixes a kind's close pairs with its far ones; per bin, kinds can be compared at equal difficulty
  (twenty-seventh session: the reductions' low tau is their many close pairs, not worse ordering).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = ["GAP_EDGES", "best_seconds_error", "kernel_metrics", "label_spread", "mean_metrics", "pair_agreement_by_gap", "top_k_slowdown", "kendall_tau", "mape"]

GAP_EDGES = (0.0, 0.01, 0.03, 0.1, 0.3, math.inf)  # |log runtime ratio| bins: within noise, 1-3%, 3-10%, 10-30%, beyond


def top_k_slowdown(pred: np.ndarray, runtime: np.ndarray, k: int) -> float:
    """Ties in `pred` are broken by the expected value over the tied candidates (no luck)."""
    pred, runtime = np.asarray(pred, dtype=np.float64), np.asarray(runtime, dtype=np.float64)
    best = runtime.min()
    order = np.argsort(pred, kind="stable")
    kth = pred[order[min(k, len(pred)) - 1]]
    sure = runtime[pred < kth]
    tied = np.sort(runtime[pred == kth])
    need = min(k, len(pred)) - sure.size
    if need >= tied.size:
        chosen = min(sure.min() if sure.size else math.inf, tied.min())
        return float(chosen / best - 1.0)
    # Expected minimum of `need` draws without replacement from the tied runtimes, combined with `sure`.
    n = tied.size
    floor = sure.min() if sure.size else math.inf
    expected = 0.0
    for i, value in enumerate(tied):  # P(min of the draw is the i-th smallest)
        p = math.comb(n - i - 1, need - 1) / math.comb(n, need) if n - i - 1 >= need - 1 else 0.0
        expected += p * min(value, floor)
    return float(expected / best - 1.0)


def label_spread(runtime: np.ndarray) -> float:
    """Median over configurations of |runtime / the kernel's median runtime - 1|."""
    runtime = np.asarray(runtime, dtype=np.float64)
    return float(np.median(np.abs(runtime / np.median(runtime) - 1.0)))


def kendall_tau(pred: np.ndarray, runtime: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if np.ptp(pred) == 0 or np.ptp(runtime) == 0:
        return 0.0
    return float(kendalltau(pred, runtime).statistic)


def pair_agreement_by_gap(pred: np.ndarray, runtime: np.ndarray, edges: Iterable[float] = GAP_EDGES) -> tuple[np.ndarray, np.ndarray]:
    """Per bin [edges[i], edges[i+1]) of |log(runtime_a / runtime_b)|: (pairs the prediction orders
    as the runtimes do, pairs in the bin). A tie in `pred` counts half; pairs of equal runtime are left out."""
    pred, runtime = np.asarray(pred, dtype=np.float64), np.asarray(runtime, dtype=np.float64)
    if pred.shape != runtime.shape or pred.ndim != 1:
        raise ValueError(f"pred and runtime must be 1-D of one length, got {pred.shape} and {runtime.shape}")
    if np.any(runtime <= 0):
        raise ValueError("runtimes must be positive")
    edges = np.asarray(list(edges), dtype=np.float64)
    i, j = np.triu_indices(len(runtime), 1)
    gap = np.log(runtime[i]) - np.log(runtime[j])
    keep = gap != 0
    gap, dp = gap[keep], pred[i][keep] - pred[j][keep]
    agree = np.where(dp == 0, 0.5, (np.sign(dp) == np.sign(gap)).astype(np.float64))
    which = np.digitize(np.abs(gap), edges[1:-1])
    bins = len(edges) - 1
    return np.bincount(which, weights=agree, minlength=bins)[:bins], np.bincount(which, minlength=bins)[:bins].astype(np.int64)


def mape(pred_seconds: np.ndarray, runtime: np.ndarray, min_runtime: float = 0.0) -> float:
    runtime = np.asarray(runtime, dtype=np.float64)
    keep = runtime >= min_runtime
    if not keep.any():
        return float("nan")
    return float(np.mean(np.abs(np.asarray(pred_seconds)[keep] - runtime[keep]) / runtime[keep]))


def best_seconds_error(pred_log: np.ndarray, runtime: np.ndarray) -> float:
    """|exp(min pred_log) / min runtime - 1|: the predicted time of the kernel's fastest
    configuration against the measured fastest (the model's seconds, not its order)."""
    return float(abs(math.exp(float(np.min(pred_log))) / float(np.min(runtime)) - 1.0))


def kernel_metrics(pred_log: np.ndarray, runtime: np.ndarray, *, min_runtime: float = 5e-6) -> dict[str, float]:
    return {
        "top1": top_k_slowdown(pred_log, runtime, 1),
        "top5": top_k_slowdown(pred_log, runtime, 5),
        "kendall": kendall_tau(pred_log, runtime),
        "mape": mape(np.exp(pred_log), runtime, min_runtime),
    }


def mean_metrics(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    if not rows:
        return {}
    out: dict[str, float] = {}
    for key in rows[0]:
        values = np.array([r[key] for r in rows], dtype=np.float64)
        out[key] = float(values[np.isfinite(values)].mean()) if np.isfinite(values).any() else float("nan")
    return out | {"kernels": len(rows)}
