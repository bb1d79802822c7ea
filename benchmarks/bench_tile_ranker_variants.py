"""XGBoost tile-ranker variants over several split seeds: 3-seed (or more) means of top-1 / top-5
slowdown and Kendall tau on both splits, for settings `bench_costmodel.py --tile-rankers` does not
name (the fourteenth session's scratch grid; its rows reproduce bench_costmodel.py's "XGBoost rank"
and `--tile-rankers` rows to the digit on the same seeds).

    PYTHONPATH=. python benchmarks/bench_tile_ranker_variants.py out/tile_s13 VARIANTS.json [--seeds 0,1,2] [--json OUT.json]

VARIANTS.json maps a name to a variant: {"obj": OBJ, ...} with OBJ one of
- "pairwise": rank:pairwise on -log runtime (GbdtBaseline(objective="rank"));
- "ndcg" / "map" / "pairwise_graded": LambdaMART on `tile_rankers.relevance_grades` ("levels", "cap");
- "relative": regression of log(runtime / the kernel's median); "minrel_clip": of min(log(runtime / best), log "cap");
- "bad": P(runtime >= "cap" x the kernel's best) (logistic);
optional "params" (XGBoost parameters over depth 8, eta 0.05, subsample / colsample 0.8, 400
rounds), "depth", "rounds", "rel": true (flat features + per loop split factor over extent and
per-kernel centred config features); or {"combo": [variant, ...], "weights": [...]}: the per-kernel
z-scored sum (tile_rankers.ZScoreEnsemble).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("variants", help="JSON file or JSON text: name -> variant")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--json", help="write {name: {split: [[top1, top5, tau] per seed]}} here")
    args = parser.parse_args(argv)

    import xgboost as xgb

    from cost_model.learned.baselines import flat_features
    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from cost_model.learned.tile_rankers import relevance_grades, zscore
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(args.data)
    flat = [flat_features(r) for r in records]
    width = max(x.shape[1] for x in flat)
    flat = [np.pad(x, ((0, 0), (0, width - x.shape[1]))) for x in flat]
    log_runtime = [np.log(np.asarray(r.config_runtime, dtype=np.float64)) for r in records]

    def relative_features(record) -> np.ndarray:  # type: ignore[no-untyped-def]
        configs = np.asarray(record.config_feat, dtype=np.float32)
        factors = configs[:, :21].reshape(len(configs), 7, 3)  # log2 split factors, 3 slots x 7 loops (space.config_features)
        extents = configs[:, 32:53].reshape(len(configs), 7, 3)[:, :, :1]  # per loop slot: log2 extent first
        return np.concatenate([(factors - extents).reshape(len(configs), -1), configs - configs.mean(0, keepdims=True)], 1)

    with_relative = None

    def labels(variant: dict, i: int) -> tuple[np.ndarray, str]:
        obj, lr = variant["obj"], log_runtime[i]
        if obj == "pairwise":
            return -lr, "rank:pairwise"
        if obj in ("ndcg", "map", "pairwise_graded"):
            grades = relevance_grades(np.exp(lr), levels=int(variant["levels"]), cap=float(variant["cap"]))
            return grades, {"ndcg": "rank:ndcg", "map": "rank:map", "pairwise_graded": "rank:pairwise"}[obj]
        if obj == "relative":
            return lr - np.median(lr), "reg:squarederror"
        if obj == "minrel_clip":
            return np.minimum(lr - lr.min(), np.log(float(variant["cap"]))), "reg:squarederror"
        if obj == "bad":
            return (lr - lr.min() >= np.log(float(variant["cap"]))).astype(np.float64), "binary:logistic"
        raise SystemExit(f"unknown obj {obj!r}")

    def fit_predict(variant: dict, train: list[int], test: list[int], seed: int) -> list[np.ndarray]:
        nonlocal with_relative
        feats = flat
        if variant.get("rel"):
            if with_relative is None:
                with_relative = [np.concatenate([x, relative_features(r)], 1) for x, r in zip(flat, records)]
            feats = with_relative
        ys = [labels(variant, i) for i in train]
        objective = ys[0][1]
        params = {"max_depth": variant.get("depth", 8), "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": seed, "nthread": 1,
                  "objective": objective} | variant.get("params", {})
        x = np.concatenate([feats[i] for i in train])
        y = np.concatenate([y for y, _ in ys])
        if objective.startswith("rank:"):
            matrix = xgb.DMatrix(x, label=y, qid=np.concatenate([np.full(len(log_runtime[i]), k) for k, i in enumerate(train)]))
        else:
            matrix = xgb.DMatrix(x, label=y)
        booster = xgb.train(params, matrix, num_boost_round=variant.get("rounds", 400))
        out = [booster.predict(xgb.DMatrix(feats[i])).astype(np.float64) for i in test]
        return [-o for o in out] if objective.startswith("rank:") else out

    text = Path(args.variants).read_text(encoding="utf-8") if Path(args.variants).is_file() else args.variants
    variants = json.loads(text)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[str, dict[str, list[list[float]]]] = {}
    for name, variant in variants.items():
        began, per_split = time.perf_counter(), {}
        for split in ("random", "program"):
            values = []
            for seed in seeds:
                train, test = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
                if "combo" in variant:
                    parts = [fit_predict(v, train, test, seed) for v in variant["combo"]]
                    weights = variant.get("weights", [1.0] * len(parts))
                    preds = [sum(w * zscore(p[k]) for w, p in zip(weights, parts)) for k in range(len(test))]
                else:
                    preds = fit_predict(variant, train, test, seed)
                m = mean_metrics([kernel_metrics(p, records[i].config_runtime) for p, i in zip(preds, test)])
                values.append([m["top1"], m["top5"], m["kendall"]])
            per_split[split] = values
            mean = np.mean(values, 0)
            print(f"{name:28s} {split:7s} top1 {mean[0]:.1%} top5 {mean[1]:.1%} tau {mean[2]:.3f}   per seed top1 "
                  + ", ".join(f"{v[0]:.1%}" for v in values) + "  tau " + ", ".join(f"{v[2]:.3f}" for v in values), flush=True)
        results[name] = per_split
        print(f"  ({time.perf_counter() - began:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
