"""Label quality of a measured dataset: how much timing noise each kernel's labels carry, and the
ceiling that noise puts on any ranking metric.

    rows = [kernel_noise(r) for r in load_dir("out/tile")]
    worst = noisiest(rows, count=80)                   # what `costmodel remeasure` does first
    ceiling = noise_ceiling(records, seed=0)           # per-kernel predictions = labels x retest noise

Two signals per kernel, both from what collection already stores:
- spread: median / min - 1 of every configuration's own samples (all configurations have it; a
  disturbed round drags the median up while the min may survive);
- retest: |min2 / min1 - 1| of the configurations measured again in an independent pass (about
  one in ten per kernel; after `remeasure`, every configuration: old vs new minimum).
A kernel's score is the larger of the two medians, since either one alone says the kernel was
measured while the machine was busy. Ranking metrics are capped by the noise: two measurements of
the same configurations disagree on some pairs, so `noise_ceiling` builds "predictions" that are
the labels times retest ratios drawn from the dataset's own pairs, which a model cannot beat on
average (a perfect model of the true runtime scores about that against noisy labels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["KernelNoise", "kernel_noise", "noise_ceiling", "noisiest", "retest_pairs", "retest_ratios"]


@dataclass(frozen=True)
class KernelNoise:
    """One kernel's label-quality numbers (NaN where the data has none)."""

    name: str
    path: str
    configs: int
    spread_median: float  # median over configs of median_s / min_s - 1
    spread_p90: float
    retest_median: float  # median over retest pairs of |min2 / min1 - 1|
    retest_pairs: int
    retest_tau: float  # Kendall tau of min1 vs min2 over the retest pairs (>= 3 pairs)
    remeasured: bool

    @property
    def score(self) -> float:
        """The larger of the two medians (NaN ones ignored; 0 when neither exists)."""
        values = [v for v in (self.spread_median, self.retest_median) if np.isfinite(v)]
        return float(max(values)) if values else 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"score": self.score}


def retest_pairs(record: KernelRecord) -> list[tuple[float, float]]:
    """(min1, min2) pairs of a kernel: the collection's retests, and every configuration's
    (collection, re-measurement) pair once `remeasure` has run."""
    pairs = [(float(a), float(b)) for a, b in record.meta.get("retest", [])]
    pairs += [(float(a), float(b)) for a, b in record.meta.get("remeasure", {}).get("pairs", [])]
    return pairs


def kernel_noise(record: KernelRecord) -> KernelNoise:
    """Label-quality numbers of one kernel file."""
    runtime = np.asarray(record.config_runtime, dtype=np.float64)
    median = np.asarray(record.meta.get("config_runtime_median", []), dtype=np.float64)
    if median.shape == runtime.shape and runtime.size and (runtime > 0).all():
        # >= 0: a label that is not the minimum (the long protocol's second-fastest sample) can sit above
        # the median of very few samples
        spread = np.maximum(median / runtime - 1.0, 0.0)
        spread_median, spread_p90 = float(np.median(spread)), float(np.quantile(spread, 0.9))
    else:
        spread_median = spread_p90 = float("nan")
    pairs = [(a, b) for a, b in retest_pairs(record) if a > 0 and b > 0]
    rel = np.array([abs(b / a - 1.0) for a, b in pairs])
    tau = float("nan")
    if len(pairs) >= 3:
        from scipy.stats import kendalltau

        first, second = zip(*pairs)
        tau = float(kendalltau(first, second).statistic)
    return KernelNoise(record.name, record.path, record.num_configs, spread_median, spread_p90,
                       float(np.median(rel)) if rel.size else float("nan"), len(pairs), tau, "remeasure" in record.meta)


def noisiest(rows: Sequence[KernelNoise], count: int | None = None, *, min_score: float = 0.0,
             skip_remeasured: bool = True) -> list[KernelNoise]:
    """Kernels by descending score, at least `min_score`, at most `count`."""
    chosen = [r for r in rows if r.score >= min_score and not (skip_remeasured and r.remeasured)]
    chosen.sort(key=lambda r: (-r.score, r.name))
    return chosen[:count] if count is not None else chosen


def retest_ratios(records: Sequence[KernelRecord]) -> np.ndarray:
    """min2 / min1 of every retest pair of `records`, both ways round (the noise is symmetric in
    which pass is called the first)."""
    ratios = [b / a for r in records for a, b in retest_pairs(r) if a > 0 and b > 0]
    if not ratios:
        return np.ones(1)
    ratios_arr = np.asarray(ratios, dtype=np.float64)
    return np.concatenate([ratios_arr, 1.0 / ratios_arr])


def noise_ceiling(records: Sequence[KernelRecord], *, seed: int = 0, ratios: np.ndarray | None = None,
                  log_scale: float = 1.0) -> list[np.ndarray]:
    """Per kernel, log(label) + log_scale x log(r) with r drawn from `ratios` (default: the
    records' own retest ratios).

    With `log_scale` 1 this is a second measurement of the same configurations used as the
    predictor (test-retest agreement: both sides noisy). A perfect model of the true runtime has
    only the label's noise against it; if the log-noise of one measurement has variance s^2, a
    retest ratio has 2 s^2, so `log_scale` 1/sqrt(2) approximates that ceiling (Gaussian
    log-noise assumed; timing noise is one-sided, so this is an estimate, not a bound)."""
    pool = retest_ratios(records) if ratios is None else np.asarray(ratios, dtype=np.float64)
    rng = np.random.default_rng(seed)
    out = []
    for record in records:
        runtime = np.asarray(record.config_runtime, dtype=np.float64)
        out.append(np.log(runtime) + log_scale * np.log(rng.choice(pool, size=runtime.shape[0])))
    return out
