"""XGBoost rank-objective variants for the tile ranker (held-out and random splits, seeds 0-2).

    PYTHONPATH=. python benchmarks/bench_gbdt_rank_variants.py out/tile

Depth 6, 400 rounds, flat features (as `GbdtTilePredictor`); variants of the pairwise objective:
XGBoost's default (one pair per sample, "mean" pair method), 8 pairs per sample, the "topk" pair
method with 8 pairs, and `rank:ndcg` on relevance = log(slowest / runtime) within a kernel.
Prints per split the measurements to 2% of the best per seed, their ratio to random search's,
and mean top-1 / top-5 slowdown and Kendall tau.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

VARIANTS = {
    "mean1": {},
    "mean8": {"lambdarank_num_pair_per_sample": 8},
    "topk8": {"lambdarank_pair_method": "topk", "lambdarank_num_pair_per_sample": 8},
    "ndcg": {"objective": "rank:ndcg", "ndcg_exp_gain": False},
}


def main(argv: list[str]) -> int:
    import xgboost as xgb

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import tuner_measurements
    from cost_model.learned.baselines import flat_features
    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from cost_model.learned.tpugraphs import load_dir
    from passes.autotune.search import random_search_measurements

    recs = load_dir(argv[0])
    for name, extra in VARIANTS.items():
        out: dict[str, list[tuple[float, ...]]] = {}
        for seed in (0, 1, 2):
            for split in ("random", "program"):
                tr, te = split_records(recs, split, test_fraction=0.25, seed=seed)
                train, test = [recs[i] for i in tr], [recs[i] for i in te]
                x = np.concatenate([flat_features(r) for r in train])
                y = np.concatenate([np.log(r.config_runtime) for r in train])
                qid = np.concatenate([np.full(r.num_configs, i) for i, r in enumerate(train)])
                label = -y
                if name == "ndcg":  # relevance >= 0 within each kernel: the best config highest
                    label = np.concatenate([np.log(r.config_runtime.max()) - np.log(r.config_runtime) for r in train])
                params = {"max_depth": 6, "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.8, "seed": seed, "nthread": 1,
                          "objective": "rank:pairwise"} | extra
                booster = xgb.train(params, xgb.DMatrix(x, label=label, qid=qid), num_boost_round=400)
                preds = [-booster.predict(xgb.DMatrix(flat_features(r))) for r in test]
                tuner = np.mean([tuner_measurements(p, r.config_runtime) for p, r in zip(preds, test)])
                rand = np.mean([random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=seed) for r in test])
                m = mean_metrics(kernel_metrics(p, r.config_runtime) for p, r in zip(preds, test))
                out.setdefault(split, []).append((tuner, rand, m["top1"], m["top5"], m["kendall"]))
        for split, rows in out.items():
            v = np.array(rows)
            print(f"{name} {split} tuner {np.round(v[:, 0], 2)} ratio {np.mean(v[:, 0] / v[:, 1]):.2f} "
                  f"top1 {v[:, 2].mean():.1%} top5 {v[:, 3].mean():.1%} tau {v[:, 4].mean():.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
