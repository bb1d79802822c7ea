"""Baselines beside the learned model, on the same splits and metrics (predicted log runtimes):

- `roofline_predictions`: tile kernels: max(FLOPs / peak, bytes / bandwidth) + launch on this
  host as `measure_host_device` measures it; one number per kernel, blind to the configuration
  (which is the point: it cannot rank tiles; ties are scored at their expected value). Fusion
  configurations: the simulator's step time with roofline kernels of this host, per config;
- `GbdtBaseline`: gradient-boosted trees (XGBoost) on flat features: mean and max of the node
  features, the last (output) node's features and opcode, and the configuration's knob vector;
  `objective="regression"` fits log runtime, `objective="rank"` XGBoost's pairwise rank loss
  within each kernel (what MetaSchedule's XGBModel does with its own features);
MetaSchedule's own XGBModel on its PerStoreFeature features runs out of process
(`benchmarks/bench_metaschedule.py`, in a venv with apache-tvm 0.26.0 + apache-tvm-ffi
0.1.13.post2: with apache-tvm-ffi 0.1.15.post2, `tvm.ir.save_json` of any object segfaults in
`tvm::ffi::ToJSONGraph`, and PerStoreFeature deep-copies every module through it).
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from cost_model.learned.tpugraphs import KernelRecord

__all__ = ["GbdtBaseline", "flat_features", "roofline_predictions"]

logger = logging.getLogger(__name__)


def roofline_predictions(record: KernelRecord, device: object | None = None) -> np.ndarray:
    """Log seconds; fusion files carry the simulator's roofline step time per config (`roofline_s`)."""
    from cost_model.roofline import roofline_time

    if "roofline_s" in record.meta:
        return np.log(np.asarray(record.meta["roofline_s"], dtype=np.float64))

    if device is None:
        from cost_model.profiling.host import measure_host_device

        device = measure_host_device()
    flops = float(record.meta.get("flops", 0.0))
    nbytes = 4.0 * sum(2.0 ** float(row[6]) for row, op in zip(record.node_feat, record.node_opcode) if op == 0)  # inputs
    nbytes += 4.0 * 2.0 ** float(record.node_feat[-1][6])  # output
    seconds = roofline_time(flops, nbytes, device) + float(getattr(device, "launch_overhead_s", 0.0))
    return np.full(record.num_configs, math.log(max(seconds, 1e-12)))


def flat_features(record: KernelRecord) -> np.ndarray:
    """(C, F) rows: graph summary (same for every configuration) + the configuration."""
    nodes = record.node_feat
    opcode = np.zeros(64, dtype=np.float32)
    opcode[min(int(record.node_opcode[-1]), 63)] = 1.0
    graph = np.concatenate([nodes.mean(0), nodes.max(0), nodes[-1], opcode, [len(nodes)]])
    if record.layout_form:
        configs = record.node_config_feat.reshape(record.num_configs, -1)
    else:
        configs = record.config_feat
    return np.concatenate([np.repeat(graph[None], record.num_configs, 0), configs], axis=1).astype(np.float32)


class GbdtBaseline:
    """XGBoost regression of log runtime on `flat_features`."""

    def __init__(self, *, seed: int = 0, rounds: int = 400, depth: int = 8, threads: int = 1, objective: str = "regression") -> None:
        if objective not in ("regression", "rank"):
            raise ValueError(f"objective must be 'regression' or 'rank', got {objective!r}")
        self.seed, self.rounds, self.depth, self.threads, self.objective = seed, rounds, depth, threads, objective
        self.booster = None

    def fit(self, records: Sequence[KernelRecord]) -> GbdtBaseline:
        import xgboost as xgb

        width = max(flat_features(r).shape[1] for r in records)
        self.width = width
        x = np.concatenate([self._pad(flat_features(r)) for r in records])
        y = np.concatenate([np.log(r.config_runtime) for r in records])
        params = {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": self.seed, "nthread": self.threads}
        if self.objective == "rank":  # relevance = minus log runtime, compared only within a kernel
            qid = np.concatenate([np.full(r.num_configs, i) for i, r in enumerate(records)])
            matrix = xgb.DMatrix(x, label=-y, qid=qid)
            params["objective"] = "rank:pairwise"
        else:
            matrix = xgb.DMatrix(x, label=y)
            params["objective"] = "reg:squarederror"
        self.booster = xgb.train(params, matrix, num_boost_round=self.rounds)
        return self

    def _pad(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] >= self.width:
            return x[:, : self.width]
        return np.pad(x, ((0, 0), (0, self.width - x.shape[1])))

    def predict(self, record: KernelRecord) -> np.ndarray:
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        out = self.booster.predict(xgb.DMatrix(self._pad(flat_features(record)))).astype(np.float64)
        return -out if self.objective == "rank" else out  # rank scores: higher = faster
