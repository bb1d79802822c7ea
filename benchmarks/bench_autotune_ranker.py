"""The tile autotuner's ranker: measurements to within 2% of the best, GraphSAGE vs XGBoost rank
vs random search, on both splits and several seeds.

    PYTHONPATH=. python benchmarks/bench_autotune_ranker.py out/tile --seeds 0,1,2 [--gnn-epochs 60] [--hidden 32 --layers 2]

For every seed s and both splits (random kernels; whole programs held out; split seed s, test
fraction 0.25) it fits the rankers `autotune --ranker gnn|gbdt` can use on the training kernels
(GraphSAGE with ListMLE, `TrainConfig(seed=s)`; XGBoost's pairwise rank objective on flat
features, `GbdtTilePredictor.train(seed=s)`, the same model `GbdtBaseline(objective="rank")` fits
in bench_costmodel.py) and scores them on the test kernels, whose 50 measured configurations are
the exhaustive set: "tuner meas." = configurations measured in the ranker's order until one is
within 2% of the kernel's best (bench_costmodel.tuner_measurements), "random meas." = random
search's expected count for the same target, "hit@5" = share of kernels whose top-5 (what
`autotune` measures) holds such a configuration; top-1 / top-5 slowdown and Kendall tau beside.
On split seed 0 the shipped rankers (cost_model/learned/tile_model.pt and tile_gbdt.ubj, both
trained on seed 0's held-out-program training kernels) are scored on the held-out test kernels,
which neither saw. Prints markdown tables; writes benchmarks/results/bench_autotune_ranker.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_autotune_ranker.json"


def _row(name: str, seed: int, split: str, preds: list[np.ndarray], test: list, random_needs: list[float], train_s: float,
         floor: float | None = None) -> dict:
    from bench_costmodel import score

    out = score(name, preds, test, random_needs, floor)
    tuner = np.array([m["tuner_measurements"] for m in out.pop("per_kernel").values()])
    return out | {"seed": seed, "split": split, "hit5": float(np.mean(tuner <= 5)), "train_s": train_s, "test_kernels": len(test)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="tile dataset folder (.npz files)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--gnn-epochs", type=int, default=60, help="GraphSAGE epochs (0: no GraphSAGE rows)")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--gbdt-rounds", type=int, default=400)
    parser.add_argument("--gbdt-depth", type=int, default=6)
    parser.add_argument("--gbdt-objective", choices=("rank", "relative", "regression"), default="rank",
                        help="GbdtBaseline objective: pairwise rank (what ships), log(runtime / kernel median), or log runtime")
    parser.add_argument("--gbdt-ensemble", action="store_true",
                        help="also the two-member ensemble (GbdtEnsembleTilePredictor with MEMBERS_S14, rank + relative, the gbdt-ens kind of sessions 14-18; same depth and rounds)")
    parser.add_argument("--shipped-gbdt-ens", default="cost_model/learned/tile_gbdt_ens.json")
    parser.add_argument("--shipped-gnn", default="cost_model/learned/tile_model.pt")
    parser.add_argument("--shipped-gbdt", default="cost_model/learned/tile_gbdt.ubj")
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)

    import torch

    from cost_model.learned.data import split_records, to_tensors
    from cost_model.learned.gbdt_predictor import GbdtTilePredictor
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.learned.train import TrainConfig, fit, load_model, predict
    from passes.autotune.search import random_search_measurements

    torch.set_num_threads(1)
    from cost_model.measure.harness import noise_floor

    records = load_dir(args.data)
    floor = noise_floor([tuple(p) for r in records for p in r.meta.get("retest", [])])["median"]
    floor = floor if np.isfinite(floor) else None  # "tau above noise": over the kernels whose label spread exceeds it
    print(f"dataset {Path(args.data).name}: {len(records)} kernels, {sum(r.num_configs for r in records)} configs; "
          f"{sum('remeasure' in r.meta for r in records)} kernels re-measured", flush=True)
    rows: list[dict] = []
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)

    def add(row: dict) -> None:
        rows.append(row)
        print(f"seed {row['seed']} {row['split']:7s} {row['method']:34s} tuner {row['tuner_measurements']:5.2f}  random {row['random_measurements']:5.2f}  "
              f"hit@5 {row['hit5']:.2f}  top1 {row['top1']:.1%}  top5 {row['top5']:.1%}  tau {row['kendall']:.3f}  "
              f"tau above noise {row.get('kendall_spread', float('nan')):.3f}  ({row['train_s']:.0f} s)", flush=True)
        out.write_text(json.dumps({"data": Path(args.data).name, "kernels": len(records), "args": vars(args), "rows": rows}, indent=1), encoding="utf-8")

    for seed in [int(s) for s in args.seeds.split(",")]:
        for split in ("random", "program"):
            train_idx, test_idx = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
            train, test = [records[i] for i in train_idx], [records[i] for i in test_idx]
            random_needs = [random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=seed) for r in test]
            began = time.perf_counter()
            ranker = GbdtTilePredictor.train(train, seed=seed, rounds=args.gbdt_rounds, depth=args.gbdt_depth, objective=args.gbdt_objective)
            preds = [ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for r in test]
            add(_row(f"gbdt (XGBoost {args.gbdt_objective}, depth {args.gbdt_depth}, {args.gbdt_rounds} rounds)", seed, split, preds, test, random_needs, time.perf_counter() - began, floor))
            if args.gbdt_ensemble:
                from cost_model.learned.gbdt_ensemble import MEMBERS_S14 as MEMBERS, GbdtEnsembleTilePredictor

                began = time.perf_counter()
                ensemble = GbdtEnsembleTilePredictor.train(train, members=MEMBERS, seed=seed, rounds=args.gbdt_rounds, depth=args.gbdt_depth)
                preds = [ensemble.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for r in test]
                add(_row(f"gbdt-ens ({'+'.join(o + (' all pairs' if p else '') for o, _, p in MEMBERS)}, depth {args.gbdt_depth})", seed, split, preds, test, random_needs,
                         time.perf_counter() - began, floor))
            if args.gnn_epochs > 0:
                began = time.perf_counter()
                config = TrainConfig(loss="listmle", epochs=args.gnn_epochs, seed=seed, mse_weight=0.05, hidden=args.hidden, layers=args.layers,
                                     split=split, test_fraction=args.test_fraction)
                model = fit(train, config)
                preds = [predict(model, to_tensors(r)) for r in test]
                add(_row(f"gnn (GraphSAGE ListMLE, {args.gnn_epochs} ep)", seed, split, preds, test, random_needs, time.perf_counter() - began, floor))
            if seed == 0 and split == "program":
                shipped_files = [("shipped tile_gbdt.ubj", args.shipped_gbdt), ("shipped tile_model.pt", args.shipped_gnn)]
                for name, path in shipped_files + ([("shipped tile_gbdt_ens.json", args.shipped_gbdt_ens)] if args.gbdt_ensemble else []):
                    if not Path(path).is_file():
                        continue
                    try:
                        if path.endswith(".json"):
                            from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor

                            shipped = GbdtEnsembleTilePredictor.load(path)
                            preds = [shipped.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for r in test]
                        elif path.endswith(".ubj"):
                            shipped = GbdtTilePredictor.load(path)
                            preds = [shipped.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for r in test]
                        else:
                            model, _ = load_model(path)
                            if model.config.config_features != test[0].config_feat.shape[1]:
                                raise ValueError(f"it reads {model.config.config_features} config features, the data has {test[0].config_feat.shape[1]}")
                            preds = [predict(model, to_tensors(r)) for r in test]
                    except ValueError as error:  # a model from before a feature change: say so, score the rest
                        print(f"{name} not scored: {error}", flush=True)
                        continue
                    add(_row(name, seed, split, preds, test, random_needs, 0.0, floor))

    print("\n| split | ranker | seeds | tuner meas. to <=2% (per seed) | random meas. | tuner / random | hit@5 | top-1 | top-5 | tau | tau, kernels above noise |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for split in ("random", "program"):
        for method in dict.fromkeys(r["method"] for r in rows):
            sel = [r for r in rows if r["split"] == split and r["method"] == method]
            if not sel:
                continue
            tuner = [r["tuner_measurements"] for r in sel]
            rand = [r["random_measurements"] for r in sel]
            ratio = [t / q for t, q in zip(tuner, rand)]
            mean = {k: float(np.mean([r.get(k, float("nan")) for r in sel])) for k in ("hit5", "top1", "top5", "kendall", "kendall_spread")}
            print(f"| {split} | {method} | {len(sel)} | {np.mean(tuner):.1f} ({', '.join(f'{t:.1f}' for t in tuner)}) | {np.mean(rand):.1f} | "
                  f"{np.mean(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) | {mean['hit5']:.2f} | {mean['top1']:.1%} | {mean['top5']:.1%} | {mean['kendall']:.3f} | {mean['kendall_spread']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
