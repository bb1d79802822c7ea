"""A second look at the first ranker's top candidates (twenty-sixth session): a re-ranker trained on
the pairs the tile ranker gets wrong at the top of its list.

The rank model over all pairs of a kernel's configurations orders the top 7 well (the exhaustive best
is in it on 92-94% of unseen kernels) but its first pick misses by 30-76% on a tail of kernels
(RESULTS (i)): its loss is spent mostly on easy pairs (fast against hopeless), while the first pick is
decided among a few near-equal candidates. The re-ranker is fitted on exactly those: per training
kernel, the top `top` candidates of a first ranker that did not see that kernel (cross-fitted over
`folds` folds of the kernels, so the candidates and their errors look as they will on a new kernel),
all pairs among them, XGBoost's pairwise objective. Its rows: the flat features, the first ranker's
score as a z-score over the kernel's candidates and as a position in the top, and every feature's
z-score within the top (how a candidate differs from its rivals).

    ranker = CascadeRanker(GbdtBaseline(objective="rank", rank_pairs=50, depth=10)).fit(records)
    scores = ranker.predict(record)          # lower = predicted faster; only the top's order changes

`TopReranker` is the second stage alone (fit on records + out-of-fold first-stage scores, `order`).
Measured (RESULTS (i), twenty-sixth session, pre-registered): on the suite's splits it lowers top-5
(1.0% -> 0.8%) but not top-1 (8.3% -> 8.5%), and on unseen models' real timings it changes nothing that
matters, so no shipped file carries one; `costmodel train --rerank-top K` fits one on request.
"""

from __future__ import annotations

import base64
import copy
import zlib
from typing import Any, Callable, Sequence

import numpy as np

from cost_model.learned.baselines import flat_features
from cost_model.learned.tile_code_features import kernel_zscores
from cost_model.learned.tile_rankers import zscore
from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["CascadeRanker", "TopReranker", "cross_fitted_scores", "reranked_scores", "top_rows"]

TOP = 10
FOLDS = 4
MAX_BYTES = 1 << 28  # a compressed re-ranker that inflates past this is refused


def top_rows(rows: np.ndarray, first_scores: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the `top` best-scored candidates, best first; their re-ranker rows)."""
    first_scores = np.asarray(first_scores, dtype=np.float64)
    picked = np.argsort(first_scores, kind="stable")[: min(top, len(first_scores))]
    chosen = rows[picked].astype(np.float64)
    within = kernel_zscores(chosen)  # each column over the top's candidates (a constant column is 0)
    first = np.stack([zscore(first_scores)[picked], np.arange(len(picked), dtype=np.float64)], axis=1)
    return picked, np.concatenate([first, chosen, within], axis=1).astype(np.float32)


def reranked_scores(first_scores: np.ndarray, picked: np.ndarray, second_scores: np.ndarray) -> np.ndarray:
    """Lower = faster: the picked candidates in the second stage's order, all before the rest, which
    keep the first stage's order."""
    first_scores = np.asarray(first_scores, dtype=np.float64)
    z = zscore(first_scores)
    out = len(picked) + z - z.min() + 1.0  # everything after the top
    out[picked] = np.argsort(np.argsort(np.asarray(second_scores, dtype=np.float64), kind="stable"), kind="stable")
    return out


class TopReranker:
    """XGBoost pairwise rank model over the first stage's top candidates of each kernel."""

    def __init__(self, *, top: int = TOP, depth: int = 6, rounds: int = 300, seed: int = 0, threads: int = 1) -> None:
        if top < 2:
            raise ValueError(f"the re-ranker needs a top of at least 2 candidates, got {top}")
        self.top, self.depth, self.rounds, self.seed, self.threads = top, depth, rounds, seed, threads
        self.booster: Any = None
        self.width = 0

    def params(self) -> dict[str, Any]:
        return {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": self.seed, "nthread": self.threads,
                "objective": "rank:pairwise", "lambdarank_pair_method": "topk", "lambdarank_num_pair_per_sample": self.top}

    def fit(self, rows: Sequence[np.ndarray], first_scores: Sequence[np.ndarray], runtimes: Sequence[np.ndarray]) -> TopReranker:
        """`rows[i]`: kernel i's flat feature rows, `first_scores[i]` a first ranker's scores of them made
        without kernel i (lower = faster), `runtimes[i]` their measured runtimes."""
        import xgboost as xgb

        self.width = max(r.shape[1] for r in rows)
        xs, ys, qids = [], [], []
        for q, (x, s, t) in enumerate(zip(rows, first_scores, runtimes)):
            picked, chosen = top_rows(self._pad(x), s, self.top)
            xs.append(chosen)
            ys.append(-np.log(np.asarray(t, dtype=np.float64)[picked]))
            qids.append(np.full(len(picked), q))
        matrix = xgb.DMatrix(np.concatenate(xs), label=np.concatenate(ys), qid=np.concatenate(qids))
        self.booster = xgb.train(self.params(), matrix, num_boost_round=self.rounds)
        return self

    def to_doc(self) -> dict[str, Any]:
        """JSON-able: settings + the booster's UBJSON, zlib'd, in base64 (no pickle)."""
        if self.booster is None:
            raise RuntimeError("fit() first")
        raw = zlib.compress(bytes(self.booster.save_raw(raw_format="ubj")), 9)
        return {"top": self.top, "depth": self.depth, "rounds": self.rounds, "seed": self.seed, "width": self.width,
                "ubj_zlib": base64.b64encode(raw).decode("ascii")}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> TopReranker:
        import xgboost as xgb

        reranker = cls(top=int(doc["top"]), depth=int(doc["depth"]), rounds=int(doc["rounds"]), seed=int(doc["seed"]))
        reranker.width = int(doc["width"])
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(doc["ubj_zlib"], validate=True), MAX_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError("the compressed re-ranker is truncated or inflates past its limit")
        reranker.booster = xgb.Booster(model_file=bytearray(raw))
        return reranker

    def _pad(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] >= self.width:
            return x[:, : self.width]
        return np.pad(x, ((0, 0), (0, self.width - x.shape[1])))

    def order(self, rows: np.ndarray, first_scores: np.ndarray) -> np.ndarray:
        """Final scores (lower = faster) of one kernel's candidates: `reranked_scores`."""
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        picked, chosen = top_rows(self._pad(rows), first_scores, self.top)
        second = -self.booster.predict(xgb.DMatrix(chosen)).astype(np.float64)
        return reranked_scores(first_scores, picked, second)


def cross_fitted_scores(records: Sequence[KernelRecord], fit: Callable[[list[KernelRecord]], Any], *, folds: int = FOLDS,
                        seed: int = 0) -> list[np.ndarray]:
    """Every record's first-stage scores from `fit(the other folds' records)` (a fresh model with
    `predict(record)`; kernels to folds at random)."""
    if folds < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {folds}")
    fold_of = np.random.default_rng(seed).permutation(len(records)) % folds
    scores: list[np.ndarray | None] = [None] * len(records)
    for k in range(folds):
        model = fit([r for r, f in zip(records, fold_of) if f != k])
        for i in np.flatnonzero(fold_of == k):
            scores[i] = np.asarray(model.predict(records[i]), dtype=np.float64)
    return scores  # type: ignore[return-value]


class CascadeRanker:
    """A first tile ranker (`fit(records[, init=])`, `predict(record)`), then `TopReranker` on its top
    `top` candidates; the same `fit` / `predict` interface (`bench_tile_more_kernels.py --ranker`)."""

    def __init__(self, first: Any, *, top: int = TOP, folds: int = FOLDS, seed: int = 0, depth: int = 6, rounds: int = 300, threads: int = 1) -> None:
        self.first, self.folds, self.seed = first, folds, seed
        self.second = TopReranker(top=top, depth=depth, rounds=rounds, seed=seed, threads=threads)

    def fit(self, records: Sequence[KernelRecord], *, init: Any = None) -> CascadeRanker:
        records = list(records)
        template = copy.deepcopy(self.first)

        def fit(train: list[KernelRecord]) -> Any:
            model = copy.deepcopy(template)
            return model.fit(train, init=init) if init is not None else model.fit(train)

        oof = cross_fitted_scores(records, fit, folds=self.folds, seed=self.seed)
        self.first = self.first.fit(records, init=init) if init is not None else self.first.fit(records)
        self.second.fit([flat_features(r) for r in records], oof, [r.config_runtime for r in records])
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        return self.second.order(flat_features(record), self.first.predict(record))
