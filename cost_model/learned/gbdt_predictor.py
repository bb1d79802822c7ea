"""The gradient-boosted rank model (XGBoost on flat features) as a tile ranker for the autotuner.

    compiler-opt costmodel train out/tile -o tile_gbdt.ubj --model gbdt --split program --test-fraction 0.25
    ranker = GbdtTilePredictor.train(records)              # GbdtBaseline(objective="rank") underneath
    ranker.save("tile_gbdt.ubj"); ranker = GbdtTilePredictor.load("tile_gbdt.ubj")
    scores = ranker.rank(space, configs)                   # lower = predicted faster

Depth 6 (not `GbdtBaseline`'s 8): the same held-out ranking over three seeds
(benchmarks/bench_autotune_ranker.py) in a quarter of the file (about 1 MB shipped).
Why beside the GraphSAGE `TilePredictor`: on the held-out-program split XGBoost's pairwise rank
objective on flat features is the best ranker measured here (benchmarks/RESULTS.md (i)). Its
scores order configurations within a kernel only; they are not seconds, so it can rank for the
autotuner but cannot be the simulator's kernel cost source (`LearnedCosts` keeps GraphSAGE).

File format: XGBoost's own UBJSON model (no pickle), with what the ranker needs to rebuild its
input (objective, feature width, tile config feature count, training record) as booster
attributes; written atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cost_model.learned.baselines import GbdtBaseline, flat_rows
from cost_model.learned.tpugraphs import DatasetError, KernelRecord

__all__ = ["FORMAT", "PACKAGED_GBDT_MODEL", "GbdtTilePredictor", "baseline_from_meta", "baseline_meta", "code_feature_set_read", "ranked_last_if_uncompiled", "ranker_metrics", "train_gbdt_and_save",
           "training_hosts"]

FORMAT = "compiler-opt-gbdt-tile/1"
PACKAGED_GBDT_MODEL = Path(__file__).with_name("tile_gbdt.ubj")


class GbdtTilePredictor:
    """Ranks tile configurations of a kernel with a fitted `GbdtBaseline`."""

    def __init__(self, gbdt: GbdtBaseline, extra: dict[str, Any] | None = None) -> None:
        from cost_model.learned.tile_code_features import code_feature_set_width
        from cost_model.measure.tile.space import CONFIG_FEATURES

        if gbdt.booster is None:
            raise ValueError("the GBDT model is not fitted")
        # sixteenth session: a model trained with the compiled-code features (tile_code_features) reads them after the config features;
        # seventeenth: which ones is extra["code_feature_set"] (absent: "s16", the 35 columns the sixteenth session shipped)
        extra = dict(extra or {})
        expected = CONFIG_FEATURES + (code_feature_set_width(extra.get("code_feature_set", "s16")) if extra.get("code_features") else 0)
        config_features = int((extra or {}).get("config_features", expected))
        if config_features != expected:
            raise ValueError(f"this GBDT tile model reads {config_features} config features, the tile space now makes {expected}: "
                             "retrain it (GbdtTilePredictor.train on a tile dataset)")
        self.gbdt = gbdt
        self.extra = dict(extra or {}) | {"config_features": config_features}

    @classmethod
    def train(cls, records: Sequence[KernelRecord], *, seed: int = 0, rounds: int = 400, depth: int = 6, threads: int = 1,
              objective: str = "rank", rank_pairs: int | None = None, extra: dict[str, Any] | None = None,
              init: GbdtTilePredictor | None = None) -> GbdtTilePredictor:
        """`init`: a fitted ranker whose trees the boosting continues from (`GbdtBaseline.fit(init=)`)."""
        if not records or any(r.layout_form for r in records):
            raise DatasetError("a GBDT tile ranker trains on tile-form records (config_feat), got none or layout-form ones")
        gbdt = GbdtBaseline(seed=seed, rounds=rounds, depth=depth, threads=threads, objective=objective, rank_pairs=rank_pairs).fit(
            records, init=None if init is None else init.gbdt)
        info = {"seed": seed, "rounds": rounds, "depth": depth, "train_kernels": len(records)}
        return cls(gbdt, (extra or {}) | {"train": info, "config_features": int(records[0].config_feat.shape[1])})

    # -- ranking ---------------------------------------------------------------------------------
    def rank_rows(self, node_feat: np.ndarray, node_opcode: np.ndarray, config_feat: np.ndarray, kind: str | None = None) -> np.ndarray:
        """Scores (lower = predicted faster) of the configurations `config_feat` (C, Fc) of one kernel
        (`kind`, the kernel's kind, is the ensemble's interface; one model ranks every kind alike)."""
        return self.gbdt.predict_rows(flat_rows(node_feat, node_opcode, config_feat))

    def config_rows(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        """(C, Fc) config features of `configs`: `space.features`, and when the model was trained with
        them the compiled-code features (each configuration compiled for this host here)."""
        rows = np.stack([space.features(c) for c in configs])
        if not self.extra.get("code_features"):
            return rows
        from cost_model.learned.tile_code_features import configs_code_block

        block = configs_code_block(space, configs, self.extra.get("code_feature_set", "s16"))
        return np.concatenate([rows, block], axis=1).astype(np.float32)

    def rank(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        """Scores (lower = predicted faster) of `configs` of the kernel behind `space` (a TileSpace)."""
        from cost_model.measure.tile.dataset import kernel_graph

        feats, opcodes, _ = kernel_graph(space.kernel)
        rows = self.config_rows(space, configs)
        return ranked_last_if_uncompiled(self.rank_rows(feats, opcodes, rows), rows)

    def finetune(self, space: Any, configs: Sequence[Any], seconds: Sequence[float], *, steps: int = 20, **_: Any) -> float:
        """`steps` more boosting rounds on one kernel's new measurements (the autotuner's online
        update, as `TilePredictor.finetune`); returns the fitted rows' Kendall tau afterwards."""
        from scipy.stats import kendalltau

        from cost_model.measure.tile.dataset import kernel_graph

        if len(configs) < 2 or steps <= 0:
            return float("nan")
        feats, opcodes, _ = kernel_graph(space.kernel)
        rows = flat_rows(feats, opcodes, self.config_rows(space, configs))
        self.gbdt.update(rows, np.asarray(seconds, dtype=np.float64), steps)
        self.extra["finetune_rounds"] = int(self.extra.get("finetune_rounds", 0)) + steps
        return float(kendalltau(self.gbdt.predict_rows(rows), np.asarray(seconds)).statistic)

    # -- files -----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
        from graph_ir.io.atomic import atomic_path

        booster = self.gbdt.booster if self.gbdt.start is None else self.gbdt.flat_booster()  # one file: every tree in it
        booster.set_attr(compiler_opt=json.dumps(self.meta(extra)))
        target = Path(path)
        with atomic_path(target) as tmp:
            tmp.write_bytes(bytes(booster.save_raw(raw_format="ubj")))
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GbdtTilePredictor:
        import xgboost as xgb

        name = os.fspath(path)
        try:
            raw = Path(name).read_bytes()
        except OSError as error:
            raise DatasetError(f"cannot read the GBDT tile model: {error}", file=name) from error
        try:
            booster = xgb.Booster(model_file=bytearray(raw))
        except xgb.core.XGBoostError as error:
            raise DatasetError(f"not an XGBoost model: {str(error).splitlines()[0]}", file=name) from error
        try:
            meta = json.loads(booster.attr("compiler_opt") or "{}")
        except json.JSONDecodeError:
            meta = {}
        if meta.get("format") != FORMAT:
            raise DatasetError(f"an XGBoost model but not a compiler-opt GBDT tile ranker (attribute compiler_opt.format != {FORMAT})", file=name)
        return cls.from_meta(booster, meta)

    def meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """What a file stores beside the booster: the settings `from_meta` rebuilds it with."""
        return {"format": FORMAT} | baseline_meta(self.gbdt) | {"extra": self.extra | (extra or {})}

    @classmethod
    def from_meta(cls, booster: Any, meta: dict[str, Any]) -> GbdtTilePredictor:
        """The ranker of a loaded `booster` and its `meta` (KeyError / TypeError / ValueError when
        the meta lacks a field or holds a bad one)."""
        return cls(baseline_from_meta(booster, meta), dict(meta.get("extra", {})))

    @classmethod
    def packaged(cls) -> GbdtTilePredictor:
        if not PACKAGED_GBDT_MODEL.is_file():
            raise DatasetError("no GBDT tile ranker ships with this installation; pass one (GbdtTilePredictor.train(...).save(path))",
                               file=str(PACKAGED_GBDT_MODEL))
        return cls.load(PACKAGED_GBDT_MODEL)


def baseline_meta(gbdt: GbdtBaseline) -> dict[str, Any]:
    """The settings a file stores beside a `GbdtBaseline`'s booster (`baseline_from_meta` rebuilds it)."""
    return {"objective": gbdt.objective, "width": gbdt.width, "seed": gbdt.seed, "rounds": gbdt.rounds, "depth": gbdt.depth,
            "rank_pairs": gbdt.rank_pairs}


def baseline_from_meta(booster: Any, meta: dict[str, Any]) -> GbdtBaseline:
    """The `GbdtBaseline` of a loaded `booster` and its `baseline_meta` (KeyError / TypeError / ValueError on a bad field)."""
    pairs = meta.get("rank_pairs")  # files before the fourteenth session: XGBoost's default
    gbdt = GbdtBaseline(seed=int(meta["seed"]), rounds=int(meta["rounds"]), depth=int(meta["depth"]), objective=str(meta["objective"]),
                        rank_pairs=None if pairs is None else int(pairs))
    gbdt.booster, gbdt.width = booster, int(meta["width"])
    return gbdt


def train_gbdt_and_save(data_dir: str, output: str, *, split: str = "random", test_fraction: float = 0.2, seed: int = 0,
                        rounds: int = 400, depth: int = 6, threads: int = 1, extra: Sequence[str] = ()) -> dict[str, Any]:
    """`costmodel train --model gbdt`: fit the rank model on a split's training kernels (and every
    kernel of the `extra` folders), score both sides (top-1/top-5 slowdown, Kendall tau; MAPE is
    meaningless for rank scores), save it."""
    from cost_model.learned.gbdt_ensemble import check_depth  # the ensemble's members are these models: one depth rule

    check_depth(depth)  # before any data is read or file written
    config = {"model": "gbdt", "objective": "rank", "split": split, "test_fraction": test_fraction, "seed": seed, "rounds": rounds, "depth": depth}
    return fit_and_save_tile_ranker(
        data_dir, output, lambda train: GbdtTilePredictor.train(train, seed=seed, rounds=rounds, depth=depth, threads=threads), config,
        extra=[(folder, None) for folder in extra],
    )


def ranker_metrics(ranker: Any, records: Sequence[KernelRecord]) -> dict[str, float]:
    """Mean top-1 / top-5 slowdown and Kendall tau of a tile ranker (`rank_rows`) over `records`
    (no MAPE: a ranker's scores are not seconds)."""
    from cost_model.learned.metrics import kernel_metrics, mean_metrics

    rows = [kernel_metrics(ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat, kind=r.meta.get("kind")), r.config_runtime) for r in records]
    return {k: v for k, v in mean_metrics(rows).items() if k != "mape"}


def code_feature_set_read(extra: dict[str, Any]) -> str | None:
    """The compiled-code feature set a tile ranker reads, from its extra (None: code-blind)."""
    return extra.get("code_feature_set", "s16") if extra.get("code_features") else None


def training_hosts(records: Sequence[KernelRecord]) -> dict[str, list[str]]:
    """The LLVM targets (`hosts`) and tile timing protocols the training kernels were measured with, from
    their machine records: a ranker reads compiled code and ranks labels of one CPU, so `autotune` warns
    on another (`predictor.host_mismatch`). Also their `element_types`: every file written since the
    fortieth session records them, and with them that its kernels' node features carry each stage's
    element type (`features.DTYPE_COLUMNS`, written since the thirty-second session), so only such a
    file may split on those columns (tests/cost_model/learned/test_host_mismatch.py)."""
    from cost_model.measure.tile.collect import protocol_of

    machines = [r.meta.get("machine", {}) for r in records]
    return {"hosts": sorted({str(m["target"]) for m in machines if m.get("target")}),
            "timing_protocols": sorted({protocol_of(m).name for m in machines}),
            "element_types": sorted({str(r.meta.get("dtype", "float32")) for r in records})}


def ranked_last_if_uncompiled(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`scores` (lower = faster) with every candidate whose row has NaN features (its compile ran past
    the limit: `code_feature_pool.COMPILE_TIMEOUT_S`) moved after all the others, so the tuner never
    compiles it again to measure it."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    missing = np.isnan(np.asarray(rows, dtype=np.float64)).any(axis=1)
    if missing.any() and not missing.all():
        scores[missing] = scores[~missing].max() + 1.0 + np.arange(int(missing.sum()))
    return scores


def fit_and_save_tile_ranker(data_dir: str, output: str, fit: Callable[[list[KernelRecord]], Any], config: dict[str, Any],
                             code_features: str | None = None, code_feature_set: str = "s16",
                             extra: Sequence[tuple[str, str | None]] = (), save_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Split `data_dir`'s kernels by `config`'s split / test_fraction / seed (split `all`: every kernel trains), `fit` a ranker (with
    `rank_rows` and `save(path, extra=)`) on the training side, score both sides (top-1/top-5
    slowdown, Kendall tau), save it with that report as its extra, and return the report.
    `code_features` (a tile_code_features cache folder): the split is drawn over every kernel, then
    both sides keep the kernels the cache covers, their config features extended by the code block.
    `extra`: (folder, code feature cache) pairs whose every kernel joins the training side only
    (e.g. synthetic shapes, `cost_model/measure/tile/synthetic.py`); with `code_features` each
    needs its cache. `save_options`: more keywords for the ranker's `save`."""
    from cost_model.learned.data import split_records
    from cost_model.learned.tpugraphs import load_dir

    from cost_model.learned.tile_code_features import extended_records

    records = load_dir(data_dir)
    if config["split"] == "all":  # every kernel trains (a ranker to ship); the report has no test side
        train_idx, test_idx = list(range(len(records))), []
    else:
        train_idx, test_idx = split_records(records, config["split"], test_fraction=config["test_fraction"], seed=config["seed"])
    if code_features:
        extended = extended_records(records, code_features, code_feature_set)
        records = [r if e is None else e for r, e in zip(records, extended)]
        train_idx, test_idx = [i for i in train_idx if extended[i] is not None], [i for i in test_idx if extended[i] is not None]
        if not train_idx:
            raise DatasetError(f"no training kernel has cached code features in {code_features}", file=data_dir)
    added: list[KernelRecord] = []
    for folder, cache in extra:
        more = load_dir(folder)
        if code_features:
            if not cache:
                raise DatasetError("an extra training folder needs its own code feature cache when the model reads code features", file=folder)
            more = [e for e in extended_records(more, cache, code_feature_set) if e is not None]
        added += more
    ranker = fit([records[i] for i in train_idx] + added)

    def metrics(indices: list[int]) -> dict[str, float]:
        return ranker_metrics(ranker, [records[i] for i in indices])

    report = {"metrics": {"train": metrics(train_idx), "test": metrics(test_idx) if test_idx else {}}, "train_config": config,
              "kernels": len(records), "train_kernels": len(train_idx) + len(added), "test_kernels": len(test_idx),
              "extra_kernels": len(added), "extra_data": [os.path.basename(os.path.normpath(folder)) for folder, _ in extra],
              "data": os.path.basename(os.path.normpath(data_dir))} | training_hosts([records[i] for i in train_idx] + added)
    ranker.save(output, extra=report, **(save_options or {}))
    return report
