"""A tile ranker on CatBoost (thirtieth session, bench form): the same flat rows the XGBoost rank
model reads (`baselines.flat_features`, with the compiled-code block when the records carry it),
one query per kernel, CatBoost's ranking losses (YetiRank by default, or PairLogit).

Why beside XGBoost: the diagnosis of the tile ranker's miss is generalisation, not capacity (in
sample tau 0.98, held out 0.76-0.78; deeper trees and more pairs moved nothing). CatBoost grows
oblivious trees (one split per level, shared by the whole level), a much stronger constraint than
XGBoost's leaf-wise splits, and orders its boosting to reduce the fit's bias on its own training
rows. Whether that carries to unseen kernels is what `bench_tile_more_kernels.py --ranker
cat-yeti` measures. `catboost` is not a dependency of the package: this module is for benchmarks.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cost_model.learned.baselines import flat_features
from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["CatBoostTileRanker"]


class CatBoostTileRanker:
    """`fit(records)`, then `predict(record)`: lower = predicted faster (minus the ranking score)."""

    def __init__(self, *, loss: str = "YetiRank", iterations: int = 1000, depth: int = 6, learning_rate: float = 0.1,
                 seed: int = 0, threads: int = 1) -> None:
        self.loss, self.iterations, self.depth, self.learning_rate = loss, iterations, depth, learning_rate
        self.seed, self.threads = seed, threads
        self.model: Any = None
        self.width = 0

    def fit(self, records: Sequence[KernelRecord]) -> CatBoostTileRanker:
        from catboost import CatBoostRanker, Pool

        rows = [flat_features(r) for r in records]
        self.width = max(x.shape[1] for x in rows)
        x = np.concatenate([self._pad(r) for r in rows])
        y = np.concatenate([-np.log(r.config_runtime) for r in records])  # relevance: faster is higher, within a kernel only
        group = np.concatenate([np.full(r.num_configs, i) for i, r in enumerate(records)])
        self.model = CatBoostRanker(loss_function=self.loss, iterations=self.iterations, depth=self.depth, learning_rate=self.learning_rate,
                                    random_seed=self.seed, thread_count=self.threads, verbose=False, allow_writing_files=False)
        self.model.fit(Pool(x, label=y, group_id=group))
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("fit() first")
        return -np.asarray(self.model.predict(self._pad(flat_features(record))), dtype=np.float64)

    def _pad(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] >= self.width:
            return x[:, : self.width]
        return np.pad(x, ((0, 0), (0, self.width - x.shape[1])))
