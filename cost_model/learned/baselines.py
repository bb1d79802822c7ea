"""Baselines beside the learned model, on the same splits and metrics (predicted log runtimes):

- `roofline_predictions`: tile kernels: max(FLOPs / peak, bytes / bandwidth) + launch on this
  host as `measure_host_device` measures it; one number per kernel, blind to the configuration
  (which is the point: it cannot rank tiles; ties are scored at their expected value). Fusion
  configurations: the simulator's step time with roofline kernels of this host, per config;
- `GbdtBaseline`: gradient-boosted trees (XGBoost) on flat features: mean and max of the node
  features, the last (output) node's features and opcode, and the configuration's knob vector;
  `objective="regression"` fits log runtime, `objective="relative"` the per-kernel target
  log(runtime / the kernel's median runtime) (what ranking within a kernel needs, without the
  across-kernel scale), `objective="rank"` XGBoost's pairwise rank loss within each kernel (what
  MetaSchedule's XGBModel does with its own features); `objective="ndcg"` (forty-first session) LambdaMART
  within each kernel, relevance (t_best / t)^`NDCG_SHARPNESS`, so the pairs at the top of a kernel's list
  weigh most (a second member beside `rank`; its scores compare as rank's do); `objective="residual"` (fusion files
  only) the simulator's error: target log(runtime / roofline_s), features the flat ones plus
  log roofline_s and the configuration's `fusion_terms` (log, and per kernel), prediction
  log roofline_s + the fitted residual;
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

__all__ = ["NDCG_SHARPNESS", "RANK_FAMILY", "GbdtBaseline", "booster_json", "can_continue", "concat_boosters", "flat_features", "flat_rows", "ndcg_relevance",
           "roofline_predictions"]

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


def flat_rows(node_feat: np.ndarray, node_opcode: np.ndarray, configs: np.ndarray) -> np.ndarray:
    """(C, F) rows: a graph summary (mean and max of the node features, the output node's features
    and one-hot opcode, the node count; the same for every configuration) + each configuration's
    features (`configs`: (C, Fc), or (C, M, Fn) flattened per configuration)."""
    opcode = np.zeros(64, dtype=np.float32)
    opcode[min(int(node_opcode[-1]), 63)] = 1.0
    graph = np.concatenate([node_feat.mean(0), node_feat.max(0), node_feat[-1], opcode, [len(node_feat)]])
    configs = np.asarray(configs).reshape(len(configs), -1)
    return np.concatenate([np.repeat(graph[None], len(configs), 0), configs], axis=1).astype(np.float32)


def flat_features(record: KernelRecord) -> np.ndarray:
    """`flat_rows` of a record (tile or layout form)."""
    configs = record.node_config_feat if record.layout_form else record.config_feat
    return flat_rows(record.node_feat, record.node_opcode, configs)


# ndcg: a configuration's relevance is (t_best / t) ** NDCG_SHARPNESS within its kernel: 1 for the best, 0.61 at 5%
# slower, 0.39 at 10%, 0.16 at 20% (forty-first session, RESULTS (i)).
NDCG_SHARPNESS = 10.0
# Objectives whose scores order a kernel's configurations (higher = faster): a warm start may continue one with another.
RANK_FAMILY = ("rank", "ndcg")


class GbdtBaseline:
    """XGBoost regression of log runtime on `flat_features`."""

    def __init__(self, *, seed: int = 0, rounds: int = 400, depth: int = 8, threads: int = 1, objective: str = "regression",
                 rank_pairs: int | None = None) -> None:
        if objective not in ("regression", "relative", "rank", "ndcg", "residual"):
            raise ValueError(f"objective must be 'regression', 'relative', 'rank', 'ndcg' or 'residual', got {objective!r}")
        if rank_pairs is not None and (objective not in RANK_FAMILY or rank_pairs < 1):
            raise ValueError(f"rank_pairs (>= 1) is for the rank and ndcg objectives, got {rank_pairs} with {objective!r}")
        self.seed, self.rounds, self.depth, self.threads, self.objective = seed, rounds, depth, threads, objective
        # rank: XGBoost pairs each configuration with the model's top `rank_pairs` of its kernel (None: XGBoost's default, 32)
        self.rank_pairs = rank_pairs
        self.booster = None
        # forty-second session: a warm start's model, kept apart: `booster` holds only the trees fitted on top of it, whose
        # raw scores add to its margin (`margin`). Members started from one model share it, and a file stores it once.
        self.start: GbdtBaseline | None = None
        # where a loaded model's trees are stored (file, member, checksum), so a file fitted on top of it can refer to them
        self.origin: tuple[str, int, str] | None = None

    def fit(self, records: Sequence[KernelRecord], *, init: GbdtBaseline | None = None) -> GbdtBaseline:
        """`init`: a fitted model of the same objective (or another of `RANK_FAMILY`: both score higher = faster) whose
        trees this one's boosting continues from (e.g. a ranker fitted on another CPU's kernels), its feature width kept.
        The boosting continues one booster of all of `init`'s trees (as XGBoost's own warm start, so a seeded fit gives
        the trees it gave before the forty-second session); the new trees are then kept apart, `init` as `start`."""
        import xgboost as xgb

        width = max(flat_features(r).shape[1] for r in records)
        if init is not None:
            if init.booster is None or not can_continue(init.objective, self.objective):
                raise ValueError(f"a warm start needs a fitted {self.objective} model, got a {'fitted ' if init.booster is not None else 'unfitted '}{init.objective} one")
            if width > init.width:
                raise ValueError(f"the records have {width} flat feature columns, the warm start's model {init.width}")
            width = init.width
        self.width = width
        terms = [self._terms(r) for r in records]
        x = np.concatenate([self._rows(r, t) for r, t in zip(records, terms)])
        y = np.concatenate([np.log(r.config_runtime) - self._offset(t) for r, t in zip(records, terms)])
        qid = np.concatenate([np.full(r.num_configs, i) for i, r in enumerate(records)])
        booster = xgb.train(self.params(), self._matrix(x, y, qid), num_boost_round=self.rounds,
                            xgb_model=None if init is None else init.flat_booster())
        # the same trees as one booster, split at the start's last round (exact: the start's margin is the sum's first part)
        self.booster, self.start = (booster, None) if init is None else (booster[init.num_rounds():], init)
        return self

    def num_rounds(self) -> int:
        """Boosting rounds of this model, its start's included."""
        if self.booster is None:
            raise RuntimeError("fit() first")
        return self.booster.num_boosted_rounds() + (0 if self.start is None else self.start.num_rounds())

    def boosters(self) -> list[object]:
        """The boosters whose margins add up to this model's scores, the first start's first."""
        if self.booster is None:
            raise RuntimeError("fit() first")
        return ([] if self.start is None else self.start.boosters()) + [self.booster]

    def flat_booster(self) -> object:
        """One XGBoost booster of all this model's trees (a copy; what a warm start continues and a one-file save writes)."""
        boosters = self.boosters()
        flat = boosters[0].copy()
        for booster in boosters[1:]:
            flat = concat_boosters(flat, booster)
        return flat

    def margin(self, x: np.ndarray) -> np.ndarray:
        """Raw scores (float64) of this model's input rows `x` (`_pad` / `_rows`): the start's margin plus this model's trees."""
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        base = None if self.start is None else self.start.margin(x)
        return self.booster.predict(xgb.DMatrix(x, base_margin=base), output_margin=True).astype(np.float64)

    def params(self) -> dict[str, object]:
        objective = {"rank": "rank:pairwise", "ndcg": "rank:ndcg"}.get(self.objective, "reg:squarederror")
        params = {"max_depth": self.depth, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": self.seed, "nthread": self.threads,
                  "objective": objective}
        if self.objective == "ndcg":  # relevance is continuous in (0, 1]: NDCG's gain is the relevance itself, not 2^relevance - 1
            params["ndcg_exp_gain"] = False
        if self.rank_pairs is not None:
            params |= {"lambdarank_pair_method": "topk", "lambdarank_num_pair_per_sample": self.rank_pairs}
        return params

    def _matrix(self, x: np.ndarray, log_runtime: np.ndarray, qid: np.ndarray) -> object:
        import xgboost as xgb

        if self.objective == "rank":  # relevance = minus log runtime, compared only within a kernel (qid)
            return xgb.DMatrix(x, label=-log_runtime, qid=qid)
        if self.objective == "ndcg":
            return xgb.DMatrix(x, label=ndcg_relevance(log_runtime, qid), qid=qid)
        if self.objective == "relative":  # log(runtime / the kernel's median runtime)
            medians = {q: np.median(log_runtime[qid == q]) for q in np.unique(qid)}
            return xgb.DMatrix(x, label=log_runtime - np.array([medians[q] for q in qid]))
        return xgb.DMatrix(x, label=log_runtime)

    def update(self, rows: np.ndarray, seconds: np.ndarray, rounds: int) -> None:
        """`rounds` more boosting rounds on new measurements of one kernel (`flat_rows`, seconds):
        the autotuner's online update; earlier trees are kept."""
        import xgboost as xgb

        if self.booster is None:
            raise RuntimeError("fit() first")
        if self.objective == "residual":
            raise RuntimeError("the residual model updates from whole fusion records, not flat rows (refit it)")
        matrix = self._matrix(self._pad(rows), np.log(np.asarray(seconds, dtype=np.float64)), np.zeros(len(rows), dtype=np.int64))
        self.origin = None  # no longer the stored trees
        if self.start is not None:  # the new trees fit on top of the start's margin, which stays as it is
            matrix.set_base_margin(self.start.margin(self._pad(rows)))
        self.booster = xgb.train(self.params(), matrix, num_boost_round=rounds, xgb_model=self.booster)

    def _terms(self, record: KernelRecord) -> np.ndarray | None:
        """The record's `fusion_terms` (residual), else None: computed once for `_rows` and `_offset`."""
        if self.objective != "residual":
            return None
        from cost_model.learned.fusion_terms import record_terms

        return record_terms(record)

    @staticmethod
    def _offset(terms: np.ndarray | None) -> np.ndarray | float:
        """What the trees add to: log roofline_s (residual), else 0."""
        if terms is None:
            return 0.0
        from cost_model.learned.fusion_terms import TERM_NAMES

        return np.log(terms[:, TERM_NAMES.index("roofline_s")])

    def _rows(self, record: KernelRecord, terms: np.ndarray | None) -> np.ndarray:
        rows = self._pad(flat_features(record))
        if terms is None:
            return rows
        from cost_model.learned.fusion_terms import SHIPPED_TERMS, TERM_NAMES

        terms = terms[:, [TERM_NAMES.index(name) for name in SHIPPED_TERMS]]  # not the buffer size terms (sixteenth session, off by default)
        # kernels first: per-kernel ratios of the others
        return np.concatenate([np.log(terms + 1e-9), terms[:, 1:-1] / terms[:, :1], rows], axis=1).astype(np.float32)

    def _pad(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] >= self.width:
            return x[:, : self.width]
        return np.pad(x, ((0, 0), (0, self.width - x.shape[1])))

    def predict(self, record: KernelRecord) -> np.ndarray:
        """Lower = predicted faster: log seconds (regression, residual), log of the runtime over the
        kernel's median (relative) or minus the rank score (rank)."""
        if self.objective == "residual":
            terms = self._terms(record)
            return self._offset(terms) + self.margin(self._rows(record, terms))
        return self.predict_rows(flat_features(record))

    def predict_rows(self, rows: np.ndarray) -> np.ndarray:
        """`predict` on `flat_rows` output (what the autotuner's ranker calls for unmeasured configs)."""
        out = self.margin(self._pad(rows))  # the objectives here predict their raw margin
        return -out if self.objective in RANK_FAMILY else out  # rank scores: higher = faster


def can_continue(start: str, objective: str) -> bool:
    """Whether a fitted `start` model's trees may be continued under `objective` (a warm start)."""
    return start == objective or (start in RANK_FAMILY and objective in RANK_FAMILY)


def booster_json(booster: object) -> dict:
    """XGBoost's JSON model of `booster`, parsed (its trees under ["learner"]["gradient_booster"]["model"]["trees"])."""
    import json

    return json.loads(bytes(booster.save_raw(raw_format="json")))  # type: ignore[attr-defined]


def concat_boosters(first: object, second: object) -> object:
    """One XGBoost booster of `first`'s trees then `second`'s (for `second` fitted on top of `first`'s margin: the sum
    of their margins), with `second`'s learner settings. Through XGBoost's JSON model (about 3 s for 1,200 deep trees),
    since XGBoost can slice a booster but not join two."""
    import json

    import xgboost as xgb

    head, tail = booster_json(first), booster_json(second)
    head_model, tail_model = (doc["learner"]["gradient_booster"]["model"] for doc in (head, tail))
    if head_model["gbtree_model_param"]["num_parallel_tree"] != tail_model["gbtree_model_param"]["num_parallel_tree"]:
        raise ValueError("the boosters grow different numbers of trees a round")
    trees = head_model["trees"] + tail_model["trees"]
    for i, tree in enumerate(trees):
        tree["id"] = i
    offset = head_model["iteration_indptr"][-1]
    tail_model["iteration_indptr"] = head_model["iteration_indptr"] + [offset + n for n in tail_model["iteration_indptr"][1:]]
    tail_model["tree_info"] = head_model["tree_info"] + tail_model["tree_info"]
    tail_model["trees"] = trees
    tail_model["gbtree_model_param"]["num_trees"] = str(len(trees))
    # the sum starts from the first's intercept (the second's is not used: its margin starts from the first's)
    tail["learner"]["learner_model_param"]["base_score"] = head["learner"]["learner_model_param"]["base_score"]
    return xgb.Booster(model_file=bytearray(json.dumps(tail).encode("utf-8")))


def ndcg_relevance(log_runtime: np.ndarray, qid: np.ndarray) -> np.ndarray:
    """(t_best / t) ** NDCG_SHARPNESS per configuration, t_best the fastest of its kernel (`qid`)."""
    log_runtime = np.asarray(log_runtime, dtype=np.float64)
    kernels, index = np.unique(np.asarray(qid), return_inverse=True)
    fastest = np.full(kernels.size, np.inf)
    np.minimum.at(fastest, index, log_runtime)
    return np.exp(-NDCG_SHARPNESS * (log_runtime - fastest[index]))
