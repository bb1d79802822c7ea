"""Tile rankers aimed at the top of each kernel's list (fourteenth session), scored beside
`GbdtBaseline(objective="rank")` by `benchmarks/bench_costmodel.py --tile-rankers`:

- `GradedRankGbdt`: XGBoost's LambdaMART objectives (`rank:ndcg`, `rank:map`) with qid = kernel
  and a graded relevance from the per-kernel runtime ratio (`relevance_grades`: `levels` at the
  kernel's best, 0 at `cap` x the best and beyond), so the loss weighs the top of a kernel's list
  and ignores the order among its slow configurations;
- `CatastropheGbdt`: XGBoost's logistic loss for "this configuration is at least `threshold` x
  its kernel's best" (the diagnosis: most of the held-out top-1 mean comes from a few picks 2-12x
  off the best); its score is that probability;
- `ZScoreEnsemble`: several of those (and `GbdtBaseline`s) at once: each member's scores are
  centred and scaled per kernel (z-scores, so a rank score and a log-runtime regression can be
  added) and summed with weights. "Reject the catastrophes, then rank" is the ensemble of the
  rank model and `CatastropheGbdt`; the rank model over all pairs plus the relative regression is
  what `gbdt_ensemble.GbdtEnsembleTilePredictor` ships (`autotune --ranker gbdt-ens`).

`make_tile_ranker(name)` builds the named ones (`TILE_RANKER_NAMES`). Every model answers
`predict(record)` with "lower = predicted faster" scores of the record's configurations (not
seconds).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from cost_model.learned.baselines import GbdtBaseline, flat_features
from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["CatastropheGbdt", "GradedRankGbdt", "ShippedRecipe", "TILE_RANKER_NAMES", "ZScoreEnsemble", "make_tile_ranker", "relevance_grades", "zscore"]

logger = logging.getLogger(__name__)


def relevance_grades(runtime: np.ndarray, *, levels: int = 20, cap: float = 8.0) -> np.ndarray:
    """Integer relevance per configuration: `levels` at the kernel's best runtime, falling linearly
    in log(runtime / best) to 0 at `cap` x the best (and beyond)."""
    if levels < 1 or cap <= 1.0:
        raise ValueError(f"levels must be >= 1 and cap > 1, got {levels}, {cap}")
    log_runtime = np.log(np.asarray(runtime, dtype=np.float64))
    distance = (log_runtime - log_runtime.min()) / np.log(cap)
    return np.clip(np.round(levels * (1.0 - distance)), 0, levels)


def zscore(scores: np.ndarray) -> np.ndarray:
    """Scores centred and scaled within one kernel (a constant vector becomes zeros)."""
    scores = np.asarray(scores, dtype=np.float64)
    spread = scores.std()
    return (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)


class _FlatGbdt:
    """One booster on `flat_features` rows; subclasses say what the label is."""

    objective = ""

    def __init__(self, *, seed: int = 0, depth: int = 8, rounds: int = 400, threads: int = 1, params: dict[str, Any] | None = None) -> None:
        self.seed, self.depth, self.rounds, self.threads = seed, depth, rounds, threads
        self.params = dict(params or {})
        self.booster = None
        self.width = 0

    def _labels(self, record: KernelRecord) -> np.ndarray:
        raise NotImplementedError

    def _pad(self, rows: np.ndarray) -> np.ndarray:
        if rows.shape[1] >= self.width:
            return rows[:, : self.width]
        return np.pad(rows, ((0, 0), (0, self.width - rows.shape[1])))

    def fit(self, records: Sequence[KernelRecord]) -> _FlatGbdt:
        import xgboost as xgb

        rows = [flat_features(r) for r in records]
        self.width = max(x.shape[1] for x in rows)
        x = np.concatenate([self._pad(x) for x in rows])
        y = np.concatenate([self._labels(r) for r in records])
        qid = np.concatenate([np.full(r.num_configs, i) for i, r in enumerate(records)])
        params = {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": self.seed,
                  "nthread": self.threads, "objective": self.objective} | self.params
        matrix = xgb.DMatrix(x, label=y, qid=qid) if self.objective.startswith("rank:") else xgb.DMatrix(x, label=y)
        self.booster = xgb.train(params, matrix, num_boost_round=self.rounds)
        return self

    def raw(self, record: KernelRecord) -> np.ndarray:
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        return self.booster.predict(xgb.DMatrix(self._pad(flat_features(record)))).astype(np.float64)


class GradedRankGbdt(_FlatGbdt):
    """LambdaMART (`rank:ndcg` or `rank:map`) on `relevance_grades`, qid = kernel. NDCG's gain is
    linear in the grade by default (`exp_gain=False`): with 2^grade the loss sees only each
    kernel's best few configurations, which scored far worse held out (RESULTS (i), fourteenth
    session)."""

    def __init__(self, *, objective: str = "ndcg", levels: int = 20, cap: float = 8.0, exp_gain: bool = False, **options: Any) -> None:
        if objective not in ("ndcg", "map"):
            raise ValueError(f"objective must be 'ndcg' or 'map', got {objective!r}")
        super().__init__(**options)
        self.objective = f"rank:{objective}"
        self.levels, self.cap = (1, cap) if objective == "map" else (levels, cap)  # MAP: binary relevance, within `cap` of the best
        if objective == "ndcg":
            self.params.setdefault("ndcg_exp_gain", exp_gain)

    def _labels(self, record: KernelRecord) -> np.ndarray:
        if self.objective == "rank:map":
            log_runtime = np.log(np.asarray(record.config_runtime, dtype=np.float64))
            return (log_runtime - log_runtime.min() <= np.log(self.cap)).astype(np.float64)
        return relevance_grades(record.config_runtime, levels=self.levels, cap=self.cap)

    def predict(self, record: KernelRecord) -> np.ndarray:
        return -self.raw(record)  # higher relevance = faster


class CatastropheGbdt(_FlatGbdt):
    """P(runtime >= `threshold` x the kernel's best) by XGBoost's logistic loss; `predict` returns
    that probability (lower = less likely a catastrophe)."""

    objective = "binary:logistic"

    def __init__(self, *, threshold: float = 1.5, **options: Any) -> None:
        if threshold <= 1.0:
            raise ValueError(f"threshold must be > 1, got {threshold}")
        super().__init__(**options)
        self.threshold = threshold

    def _labels(self, record: KernelRecord) -> np.ndarray:
        runtime = np.asarray(record.config_runtime, dtype=np.float64)
        return (runtime >= self.threshold * runtime.min()).astype(np.float64)

    def predict(self, record: KernelRecord) -> np.ndarray:
        return self.raw(record)


class ZScoreEnsemble:
    """Weighted sum of its members' per-kernel z-scored predictions (lower = faster)."""

    def __init__(self, members: Sequence[Any], weights: Sequence[float] | None = None) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        weights = [1.0] * len(members) if weights is None else list(weights)
        if len(weights) != len(members):
            raise ValueError(f"{len(members)} members but {len(weights)} weights")
        self.members, self.weights = list(members), [float(w) for w in weights]

    def fit(self, records: Sequence[KernelRecord]) -> ZScoreEnsemble:
        for member in self.members:
            member.fit(records)
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        return sum(w * zscore(m.predict(record)) for w, m in zip(self.weights, self.members))


class ShippedRecipe:
    """The shipped gbdt-ens file's recipe as a bench ranker: `GbdtEnsembleTilePredictor.train` with its default
    members and weights (`gbdt_ensemble.MEMBERS`, `MEMBER_WEIGHTS`). `fit(records, init=ensemble)` continues each
    member's boosting from a fitted ensemble of any member count (a shipped file, as `costmodel train --warm-from`
    does), which a single-model ranker's `init` cannot (forty-seventh session)."""

    def __init__(self, *, seed: int = 0, threads: int = 1, rounds: int | None = None, depth: int | None = None,
                 code_feature_set: str | None = None) -> None:
        self.seed, self.threads, self.rounds, self.depth = seed, threads, rounds, depth
        # the compiled-code block the records' config features end with (tile_code_features), None: none
        self.code_feature_set = code_feature_set
        self.model: Any = None

    def fit(self, records: Sequence[KernelRecord], *, init: Any = None) -> ShippedRecipe:
        from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor

        sizes = {k: v for k, v in (("rounds", self.rounds), ("depth", self.depth)) if v is not None}
        code = {"code_features": True, "code_feature_set": self.code_feature_set} if self.code_feature_set else {}
        self.model = GbdtEnsembleTilePredictor.train(records, seed=self.seed, threads=self.threads, init=init, **sizes, **code)
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("fit the ranker before predicting")
        return self.model.predict(record)


TILE_RANKER_NAMES = {
    "ndcg": "XGBoost rank:ndcg, graded relevance (20 levels to 8x the best)",
    "map": "XGBoost rank:map, relevant = within 10% of the best",
    "reject": "XGBoost rank + P(>= 1.5x best) (reject the catastrophes, then rank)",
    "rank+relative": "ensemble: XGBoost rank + regression of log(runtime / kernel median)",
    "rank+relative+ndcg": "ensemble: XGBoost rank + relative regression + rank:ndcg graded",
    "rank-all+relative": "ensemble: XGBoost rank over all pairs + relative regression (autotune --ranker gbdt-ens, at depth 8)",
    "rank-bag3": "ensemble: XGBoost rank, 3 model seeds",
    "gbdt-ens": "ensemble: XGBoost rank over all pairs + relative regression at depth 6 (the gbdt-ens file shipped in sessions 14-18)",
    "rank-all-d10": "XGBoost rank over all pairs at depth 10, no regression member (what the gbdt-ens file holds since the nineteenth session)",
    "cascade-d10": "rank-all-d10, then a pairwise re-ranker of its top 10 fitted on cross-fitted top-10s (tile_cascade, twenty-sixth session)",
    "shipped-recipe": "the shipped gbdt-ens recipe: its default members and weights (rank + ndcg:0.5 at depth 10 since the forty-first session)",
}


def make_tile_ranker(name: str, *, seed: int = 0, threads: int = 1, code_feature_set: str | None = None) -> Any:
    """An unfitted ranker of `TILE_RANKER_NAMES` (`fit(records)`, then `predict(record)`); XGBoost
    settings of `GbdtBaseline` (depth 8, 400 rounds, eta 0.05) throughout, but `gbdt-ens` at depth 6.
    `code_feature_set`: the compiled-code block the records' config features end with (None: none); the
    rankers that check their input's width (`shipped-recipe`) need it, the others read every column alike."""
    common = {"seed": seed, "threads": threads}
    if name == "ndcg":
        return GradedRankGbdt(objective="ndcg", **common)
    if name == "map":
        return GradedRankGbdt(objective="map", cap=1.1, **common)
    if name == "reject":
        return ZScoreEnsemble([GbdtBaseline(objective="rank", **common), CatastropheGbdt(threshold=1.5, **common)])
    if name == "rank+relative":
        return ZScoreEnsemble([GbdtBaseline(objective="rank", **common), GbdtBaseline(objective="relative", **common)])
    if name == "rank+relative+ndcg":
        return ZScoreEnsemble([GbdtBaseline(objective="rank", **common), GbdtBaseline(objective="relative", **common),
                               GradedRankGbdt(objective="ndcg", **common)])
    if name == "rank-all+relative":  # 50: every pair of a dataset kernel's configurations (XGBoost's default: the model's top 32)
        return ZScoreEnsemble([GbdtBaseline(objective="rank", rank_pairs=50, **common), GbdtBaseline(objective="relative", **common)])
    if name == "gbdt-ens":  # gbdt_ensemble.MEMBERS_S14 at depth 6, 400 rounds (the shipped file, sessions 14-18)
        return ZScoreEnsemble([GbdtBaseline(objective="rank", rank_pairs=50, depth=6, **common), GbdtBaseline(objective="relative", depth=6, **common)])
    if name == "rank-all-d10":
        return GbdtBaseline(objective="rank", rank_pairs=50, depth=10, **common)
    if name == "cascade-d10":
        from cost_model.learned.tile_cascade import CascadeRanker

        return CascadeRanker(GbdtBaseline(objective="rank", rank_pairs=50, depth=10, **common), seed=seed, threads=threads)
    if name == "shipped-recipe":
        return ShippedRecipe(**common, code_feature_set=code_feature_set)
    if name == "rank-bag3":
        return ZScoreEnsemble([GbdtBaseline(objective="rank", seed=seed + 1000 * k, threads=threads) for k in range(3)])
    raise ValueError(f"unknown tile ranker {name!r} (one of {', '.join(TILE_RANKER_NAMES)})")
