"""Two XGBoost rankers for the tile task's within-kernel order (WORKSPACE "What next", ninth
session), scored beside `GbdtBaseline` by `benchmarks/bench_costmodel.py --gbdt-variants`:

- `PerKindGbdt`: one `GbdtBaseline` per kernel kind (`meta["kind"]`: matmul, conv2d_nhwc, ...),
  so the trees never share splits between kinds whose knobs mean different things; a kernel of a
  kind no training kernel has falls back to a model of all kinds.
- `PairwiseGbdt`: a per-kernel normalised target on pairwise configuration differences: rows
  (graph summary, config_i - config_j, config_i) of two configurations of one kernel, target
  log(runtime_i / runtime_j) (no kernel scale left to learn); `partners` random j per i in
  training. A configuration's score is the mean over every j of (f(i, j) - f(j, i)) / 2, an
  estimate of its log runtime over the kernel's mean.

Both return "lower = faster" scores per configuration (`predict(record)`), not seconds.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from cost_model.learned.baselines import GbdtBaseline, flat_rows
from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["PairwiseGbdt", "PerKindGbdt"]

logger = logging.getLogger(__name__)


def _kind(record: KernelRecord) -> str:
    return str(record.meta.get("kind", "?"))


class PerKindGbdt:
    """A `GbdtBaseline` (same objective and settings) per kernel kind."""

    def __init__(self, *, seed: int = 0, objective: str = "rank", depth: int = 8, rounds: int = 400, threads: int = 1) -> None:
        self.options = {"seed": seed, "objective": objective, "depth": depth, "rounds": rounds, "threads": threads}
        self.models: dict[str, GbdtBaseline] = {}
        self.fallback: GbdtBaseline | None = None

    def fit(self, records: Sequence[KernelRecord]) -> PerKindGbdt:
        kinds = sorted({_kind(r) for r in records})
        for kind in kinds:
            self.models[kind] = GbdtBaseline(**self.options).fit([r for r in records if _kind(r) == kind])
        self.fallback = GbdtBaseline(**self.options).fit(records)
        logger.info("per-kind XGBoost: %s", {k: sum(_kind(r) == k for r in records) for k in kinds})
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        if self.fallback is None:
            raise RuntimeError("fit() first")
        return self.models.get(_kind(record), self.fallback).predict(record)


class PairwiseGbdt:
    """XGBoost regression of log(runtime_i / runtime_j) on pairwise configuration differences."""

    def __init__(self, *, seed: int = 0, partners: int = 8, depth: int = 6, rounds: int = 400, threads: int = 1) -> None:
        if partners < 1:
            raise ValueError(f"partners must be >= 1, got {partners}")
        self.seed, self.partners, self.depth, self.rounds, self.threads = seed, partners, depth, rounds, threads
        self.booster = None
        self.width = 0

    @staticmethod
    def _parts(record: KernelRecord) -> tuple[np.ndarray, np.ndarray]:
        configs = record.node_config_feat if record.layout_form else record.config_feat
        configs = np.asarray(configs, dtype=np.float32).reshape(record.num_configs, -1)
        graph = flat_rows(record.node_feat, record.node_opcode, np.zeros((1, 0), dtype=np.float32))[0]
        return graph, configs

    def _pairs(self, graph: np.ndarray, configs: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        rows = np.concatenate([np.repeat(graph[None], len(i), 0), configs[i] - configs[j], configs[i]], axis=1)
        if rows.shape[1] >= self.width:
            return rows[:, : self.width]
        return np.pad(rows, ((0, 0), (0, self.width - rows.shape[1])))

    def fit(self, records: Sequence[KernelRecord]) -> PairwiseGbdt:
        import xgboost as xgb

        rng = np.random.default_rng(self.seed)
        parts = [self._parts(r) for r in records]
        self.width = max(len(g) + 2 * c.shape[1] for g, c in parts)
        x, y = [], []
        for record, (graph, configs) in zip(records, parts):
            count = record.num_configs
            if count < 2:
                continue
            i = np.repeat(np.arange(count), self.partners)
            j = (i + rng.integers(1, count, size=i.size)) % count  # never i itself
            log_runtime = np.log(np.asarray(record.config_runtime, dtype=np.float64))
            x.append(self._pairs(graph, configs, i, j))
            y.append(log_runtime[i] - log_runtime[j])
        params = {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": self.seed, "nthread": self.threads,
                  "objective": "reg:squarederror"}
        self.booster = xgb.train(params, xgb.DMatrix(np.concatenate(x), label=np.concatenate(y)), num_boost_round=self.rounds)
        return self

    def predict(self, record: KernelRecord) -> np.ndarray:
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        graph, configs = self._parts(record)
        count = record.num_configs
        i, j = np.repeat(np.arange(count), count), np.tile(np.arange(count), count)
        scores = self.booster.predict(xgb.DMatrix(self._pairs(graph, configs, i, j))).astype(np.float64).reshape(count, count)
        return ((scores - scores.T) / 2).mean(axis=1)
