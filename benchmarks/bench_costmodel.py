"""The learned tile cost model beside its baselines, on a dataset collected on this machine.

    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile [--epochs 60] [--seed 0] [--losses listmle,hinge,logistic,mse]
    PYTHONPATH=. python benchmarks/bench_costmodel.py out/fusion --losses mse,listmle   # layout-form (fusion) files
    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile --splits-only             # the splits, for bench_metaschedule.py
    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile --metaschedule benchmarks/results/metaschedule_preds.json
    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile_s13 --losses "" --tile-rankers gbdt-ens --code-features out/t11/code   # + compiled-code features

For both splits (random kernels; whole programs held out) it trains the GraphSAGE model once
per loss (the rank-loss ablation), fits the XGBoost flat-feature baseline (regression on log
runtime, and XGBoost's pairwise rank objective within kernels), adds MetaSchedule's XGBModel on
its PerStoreFeature features when `--metaschedule` names its predictions (bench_metaschedule.py,
run in its own venv on the splits this script writes to benchmarks/results/costmodel_splits.json),
and scores the configuration-blind roofline, all on the same test kernels: top-1 / top-5 slowdown, mean
per-kernel Kendall tau, MAPE (configs of 5 us or more), and the autotuner view: measurements the
model-guided tuner needs to land within 2% of the kernel's best measured config (the rank of the
first such config in the model's order) against random search's expected count. Prints a
markdown table and writes JSON to benchmarks/results/bench_costmodel.json.
The dataset comes from `compiler-opt costmodel collect --task tile` (seed and sizes in its
dataset.json); it is not committed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_costmodel.json"


def tuner_measurements(pred: np.ndarray, runtime: np.ndarray, tolerance: float = 0.02) -> int:
    """How many configs, taken in the model's order, until one is within `tolerance` of the best."""
    good = runtime <= runtime.min() * (1 + tolerance)
    return int(np.flatnonzero(good[np.argsort(pred, kind="stable")])[0]) + 1


def level_metrics(pred_log: np.ndarray, runtime: np.ndarray, min_runtime: float = 5e-6) -> dict[str, float]:
    """How much of a kernel's MAPE is one constant factor: `level_error` = |median(pred / runtime) - 1|,
    `mape_level_removed` = the MAPE of pred / that median (what is left when the level is right)."""
    keep = runtime >= min_runtime
    if not keep.any():
        return {"level_error": float("nan"), "mape_level_removed": float("nan")}
    ratio = np.exp(np.asarray(pred_log, dtype=np.float64))[keep] / runtime[keep]
    level = float(np.median(ratio))
    return {"level_error": abs(level - 1.0), "mape_level_removed": float(np.mean(np.abs(ratio / level - 1.0)))}


def score(name: str, predictions: list[np.ndarray], records: list, random_needs: list[float], floor: float | None = None) -> dict:
    """Mean metrics over `records`; with `floor` (the dataset's median retest noise) also the
    Kendall tau over the kernels whose label spread exceeds it ("kendall_spread": flat kernels,
    whose configurations time within noise of each other, left out; reported beside the metric)."""
    from cost_model.learned.metrics import kernel_metrics, label_spread, mean_metrics

    rows = [kernel_metrics(p, r.config_runtime) | level_metrics(p, r.config_runtime) for p, r in zip(predictions, records)]
    out = mean_metrics(rows)
    if floor is not None:
        kept = [row["kendall"] for row, r in zip(rows, records) if label_spread(r.config_runtime) > floor]
        out["kendall_spread"] = float(np.mean(kept)) if kept else float("nan")
        out["spread_kernels"] = len(kept)
    tuner = [tuner_measurements(p, r.config_runtime) for p, r in zip(predictions, records)]
    out["tuner_measurements"] = float(np.mean(tuner))
    out["random_measurements"] = float(np.mean(random_needs))
    out["method"] = name
    # per test kernel, so a later comparison on a subset (e.g. kernels a shipped model never saw) needs no retraining
    out["per_kernel"] = {Path(r.path).name: row | {"tuner_measurements": t} for r, row, t in zip(records, rows, tuner)}
    return out


def shipped_training_kernels(model_path: str, data_dir: str) -> set[str]:
    """File names of the kernels a saved model was trained on: its checkpoint records the split,
    seed and test fraction it was trained with (`costmodel train`), applied here to `data_dir`."""
    from cost_model.learned.data import split_records
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.learned.train import load_model

    _, extra = load_model(model_path)
    config = extra["train_config"]
    records = load_dir(data_dir)
    if len(records) != extra.get("kernels", len(records)):
        raise SystemExit(f"{data_dir} holds {len(records)} kernels, the checkpoint was trained on a folder of {extra['kernels']}")
    train, _ = split_records(records, config["split"], test_fraction=config["test_fraction"], seed=config["seed"])
    return {Path(records[i].path).name for i in train}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="tile dataset folder (.npz files)")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--losses", default="listmle,hinge,logistic,mse")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--json", default=str(RESULTS))
    parser.add_argument("--splits-only", action="store_true", help="write the splits JSON and stop")
    parser.add_argument("--metaschedule", metavar="PREDS.json", help="predictions of bench_metaschedule.py to score beside the others")
    parser.add_argument("--only-split", choices=("random", "program"), help="run one split (e.g. the two in two processes)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--configs-per-step", type=int, default=16, help="configurations of a kernel per loss term (TrainConfig)")
    parser.add_argument("--label", default="", help="appended to the GraphSAGE rows' names (e.g. a variant's settings)")
    parser.add_argument("--shipped", metavar="MODEL.pt", help="also score this saved model on the same test kernels")
    parser.add_argument("--shipped-train-data", metavar="DIR",
                        help="the dataset the --shipped model was trained on: its training kernels (rebuilt from the checkpoint's split, "
                             "seed and test fraction) are left out of a second table that scores every method on the unseen test kernels")
    parser.add_argument("--save-models", metavar="DIR", help="save every GraphSAGE model here (<split>_<loss>.pt, with its train config and split)")
    parser.add_argument("--gbdt-variants", default="", help="comma list of extra XGBoost rankers: kind (one rank model per kernel kind), "
                                                           "pair (pairwise config differences, target log(y_i/y_j))")
    parser.add_argument("--tile-rankers", default="", help="comma list of the fourteenth session's tile rankers (cost_model.learned.tile_rankers."
                                                           "TILE_RANKER_NAMES: ndcg, map, reject, rank+relative, rank+relative+ndcg, rank-all+relative, rank-bag3)")
    parser.add_argument("--residual", action="store_true", help="fusion: GraphSAGE in the residual form (log runtime / roofline_s, fusion terms before the MLP)")
    parser.add_argument("--additive-signed", action="store_true", help="fusion: also the additive model with signed weights (ridge least squares), without the op-class node counts, and fitted on l1")
    parser.add_argument("--residual-depth", type=int, default=4, help="fusion: tree depth of the XGBoost residual model")
    parser.add_argument("--no-baselines", action="store_true", help="GraphSAGE rows only (baselines run once in another process)")
    parser.add_argument("--code-features", metavar="CACHE", help="tiles: the compiled-code feature cache (benchmarks/bench_tile_code_features.py); "
                                                                 "splits are drawn over all kernels, then every method is scored on the kernels the "
                                                                 "cache covers, and the XGBoost rank model and --tile-rankers are fitted a second "
                                                                 "time with the code features appended")
    args = parser.parse_args(argv)

    import torch

    from cost_model.learned.baselines import GbdtBaseline, roofline_predictions
    from cost_model.learned.data import split_records
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.learned.train import TrainConfig, fit, predict, tensors_for
    from cost_model.measure.harness import noise_floor
    from cost_model.measure.quality import kernel_noise, noise_ceiling, retest_pairs
    from passes.autotune.search import random_search_measurements

    torch.set_num_threads(1)
    records = load_dir(args.data)
    retest = [tuple(p) for r in records for p in r.meta.get("retest", [])]
    floor = noise_floor(retest)
    remeasured = [tuple(p) for r in records for p in r.meta.get("remeasure", {}).get("pairs", [])]
    configs = [r.num_configs for r in records]
    scores = [kernel_noise(r).score for r in records if not r.layout_form]
    summary = {"data": Path(args.data).name, "kernels": len(records), "programs": len({r.program for r in records}),
               "configs_mean": float(np.mean(configs)), "configs_total": int(np.sum(configs)), "noise_floor": floor,
               "remeasured_kernels": sum("remeasure" in r.meta for r in records), "remeasure_noise_floor": noise_floor(remeasured),
               "all_pairs_noise_floor": noise_floor([p for r in records for p in retest_pairs(r)]),
               "kernel_noise_score_median": float(np.median(scores)) if scores else float("nan"),
               "seed": args.seed, "epochs": args.epochs, "kinds": sorted({r.meta.get("kind", "?") for r in records})}
    print(f"dataset {summary['data']}: {summary['kernels']} kernels from {summary['programs']} programs, "
          f"{summary['configs_total']} measured configs ({summary['configs_mean']:.1f}/kernel); "
          f"test-retest noise floor |min2/min1-1|: median {floor['median']:.3f}, p90 {floor['p90']:.3f} ({floor['pairs']} pairs); "
          f"{summary['remeasured_kernels']} kernels re-measured (collection vs re-measurement: median "
          f"{summary['remeasure_noise_floor']['median']:.3f}, p90 {summary['remeasure_noise_floor']['p90']:.3f}, {summary['remeasure_noise_floor']['pairs']} pairs)")
    from cost_model.profiling.host import measure_host_device

    host = measure_host_device()
    splits = {split: split_records(records, split, test_fraction=args.test_fraction, seed=args.seed) for split in ("random", "program")}
    split_file = Path(args.json).with_name("costmodel_splits.json")
    split_file.parent.mkdir(parents=True, exist_ok=True)
    split_file.write_text(json.dumps({"data": summary["data"], "seed": args.seed, "test_fraction": args.test_fraction, "splits": {
        s: {"train": [Path(records[i].path).name for i in tr], "test": [Path(records[i].path).name for i in te]} for s, (tr, te) in splits.items()}}), encoding="utf-8")
    if args.splits_only:
        print(f"splits written to {split_file}")
        return 0
    code_records: dict[int, object] = {}
    if args.code_features:
        # the same test programs as a run without the option (splits drawn over every kernel), restricted to the kernels compiled
        from cost_model.learned.tile_code_features import extended_records

        code_records = {i: e for i, e in enumerate(extended_records(records, args.code_features)) if e is not None}
        splits = {s: ([i for i in tr if i in code_records], [i for i in te if i in code_records]) for s, (tr, te) in splits.items()}
        summary["code_features"] = {"cache": Path(args.code_features).name, "kernels": len(code_records),
                                    "splits": {s: [len(tr), len(te)] for s, (tr, te) in splits.items()}}
        print(f"compiled-code features cached for {len(code_records)} of {len(records)} kernels; every row below is scored on those "
              f"(train/test: {summary['code_features']['splits']})")
    metaschedule = json.loads(Path(args.metaschedule).read_text(encoding="utf-8")) if args.metaschedule else None
    spread = floor["median"] if np.isfinite(floor.get("median", float("nan"))) else None  # tau beside, over kernels above the noise floor
    results = []
    for split in [args.only_split] if args.only_split else ["random", "program"]:
        train_idx, test_idx = splits[split]
        train = [records[i] for i in train_idx]
        test = [records[i] for i in test_idx]
        random_needs = [random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=args.seed) for r in test]
        rows = []
        for loss in [x for x in args.losses.split(",") if x]:
            began = time.perf_counter()
            config = TrainConfig(loss=loss, epochs=args.epochs, seed=args.seed, mse_weight=0.0 if loss == "mse" else 0.05,
                                 hidden=args.hidden, layers=args.layers, configs_per_step=args.configs_per_step,
                                 split=split, test_fraction=args.test_fraction, residual=args.residual)
            model = fit(train, config)
            preds = [predict(model, tensors_for(model, r)) for r in test]
            rows.append(score(f"GraphSAGE ({loss}){args.label}", preds, test, random_needs, spread) | {"train_s": time.perf_counter() - began})
            if args.save_models:
                from dataclasses import asdict

                from cost_model.learned.train import save_model

                metrics = {k: rows[-1][k] for k in ("top1", "top5", "kendall", "mape", "kernels")}
                save_model(model, Path(args.save_models) / f"{split}_{loss}.pt",
                           extra={"metrics": {"test": metrics}, "train_config": asdict(config), "kernels": len(records),
                                  "train_kernels": len(train), "test_kernels": len(test), "data": summary["data"]})
        if args.shipped:
            from cost_model.learned.train import load_model

            shipped, _ = load_model(args.shipped)
            rows.append(score(f"shipped {Path(args.shipped).name}", [predict(shipped, tensors_for(shipped, r)) for r in test], test, random_needs, spread) | {"train_s": 0.0})
        # the ceiling the label noise puts on every method: a second measurement of the same configurations as the
        # predictor, and (log ratios / sqrt 2) an estimate for a perfect model of the true runtime (quality.noise_ceiling)
        rows.append(score("retest agreement (labels x retest ratios)", noise_ceiling(test, seed=args.seed), test, random_needs, spread) | {"train_s": 0.0})
        rows.append(score("noise ceiling (labels x retest ratios^(1/sqrt 2))", noise_ceiling(test, seed=args.seed, log_scale=2 ** -0.5), test, random_needs, spread)
                    | {"train_s": 0.0})
        if args.no_baselines:
            for row in rows:
                row.update(split=split, train_kernels=len(train), test_kernels=len(test))
            results += rows
            continue
        began = time.perf_counter()
        gbdt = GbdtBaseline(seed=args.seed).fit(train)
        rows.append(score("XGBoost, flat features", [gbdt.predict(r) for r in test], test, random_needs, spread) | {"train_s": time.perf_counter() - began})
        began = time.perf_counter()
        ranker = GbdtBaseline(seed=args.seed, objective="rank").fit(train)
        rows.append(score("XGBoost rank, flat features", [ranker.predict(r) for r in test], test, random_needs, spread) | {"train_s": time.perf_counter() - began})
        if code_records:
            train_code, test_code = [code_records[i] for i in train_idx], [code_records[i] for i in test_idx]
            began = time.perf_counter()
            ranker = GbdtBaseline(seed=args.seed, objective="rank").fit(train_code)
            rows.append(score("XGBoost rank, flat + compiled-code features", [ranker.predict(r) for r in test_code], test, random_needs, spread)
                        | {"train_s": time.perf_counter() - began})
        for variant in [v for v in args.gbdt_variants.split(",") if v]:  # tile rankers of the ninth session (cost_model.learned.gbdt_variants)
            from cost_model.learned.gbdt_variants import PairwiseGbdt, PerKindGbdt

            began = time.perf_counter()
            if variant == "kind":
                model, name = PerKindGbdt(seed=args.seed).fit(train), "XGBoost rank per kernel kind, flat features"
            elif variant == "pair":
                model, name = PairwiseGbdt(seed=args.seed).fit(train), "XGBoost on pairwise config differences, log(y_i/y_j)"
            else:
                raise SystemExit(f"unknown --gbdt-variants entry {variant!r} (kind, pair)")
            rows.append(score(name, [model.predict(r) for r in test], test, random_needs, spread) | {"train_s": time.perf_counter() - began})
        for name in [v for v in args.tile_rankers.split(",") if v]:  # rankers aimed at the top of each kernel's list (fourteenth session)
            from cost_model.learned.tile_rankers import TILE_RANKER_NAMES, make_tile_ranker

            if name not in TILE_RANKER_NAMES:
                raise SystemExit(f"unknown --tile-rankers entry {name!r} ({', '.join(TILE_RANKER_NAMES)})")
            began = time.perf_counter()
            model = make_tile_ranker(name, seed=args.seed).fit(train)
            rows.append(score(TILE_RANKER_NAMES[name], [model.predict(r) for r in test], test, random_needs, spread) | {"train_s": time.perf_counter() - began})
            if code_records:
                began = time.perf_counter()
                model = make_tile_ranker(name, seed=args.seed, code_feature_set="s16").fit(train_code)  # extended_records' default block
                rows.append(score(TILE_RANKER_NAMES[name] + ", + compiled-code features", [model.predict(r) for r in test_code], test, random_needs, spread)
                            | {"train_s": time.perf_counter() - began})
        if metaschedule is not None:
            preds = metaschedule["predictions"][split]
            rows.append(score(f"MetaSchedule XGBModel (PerStoreFeature, TVM {metaschedule['tvm']})",
                              [np.asarray(preds[Path(r.path).name]) for r in test], test, random_needs, spread) | {"train_s": metaschedule["train_s"][split]})
        if test[0].layout_form and all("roofline_s" in r.meta for r in records):
            # fusion: learned corrections of the roofline simulator (ninth session)
            from cost_model.learned.fusion_additive import AdditiveFusionModel

            from cost_model.learned.fusion_terms import BASE_TERMS, S9_TERMS, S10_TERMS, S11_TERMS, TERM_NAMES, record_terms

            from cost_model.learned.fusion_additive import CONV_OFFSET

            # twelfth session, part 2: the shipped form frees the sign of the per-conv count (CONV_OFFSET); the form before, every weight >= 0
            variants = [("", {"signed_terms": CONV_OFFSET}), (", every weight >= 0 (twelfth session)", {}), (", conv offset, l1 fit", {"signed_terms": CONV_OFFSET, "loss": "l1"})] + ([(", signed weights", {"nonnegative": False}), (", without op-class node counts", {"terms": BASE_TERMS}),
                                      (", l1 fit", {"loss": "l1"})] if args.additive_signed else [])
            variants += [(", ninth-session terms", {"terms": S9_TERMS}), (", ninth-session terms, l1 fit", {"terms": S9_TERMS, "loss": "l1"})]
            # eleventh session: the tenth session's terms (no grouped / strided / dilated conv terms), the shipped form until then
            variants += [(", tenth-session terms", {"terms": S10_TERMS}), (", tenth-session terms, l1 fit", {"terms": S10_TERMS, "loss": "l1"})]
            # twelfth session: the eleventh session's terms (no measured conv seconds), the shipped form until then
            variants += [(", eleventh-session terms", {"terms": S11_TERMS})]
            # roofline x c, c minimising the relative error on the training graphs: c = sum(r) / sum(r^2), r = roofline / label
            roof = TERM_NAMES.index("roofline_s")
            ratio = np.concatenate([record_terms(r)[:, roof] / r.config_runtime for r in train])
            c = float(ratio.sum() / (ratio**2).sum())
            rows.append(score("roofline x constant (fitted on the training graphs)", [np.log(c * record_terms(r)[:, roof]) for r in test], test,
                              random_needs, spread) | {"train_s": 0.0})
            for suffix, options in variants:
                began = time.perf_counter()
                additive = AdditiveFusionModel(**options).fit(train)
                rows.append(score("additive (calls + roofline terms)" + suffix, [additive.predict(r) for r in test], test,
                                  random_needs, spread) | {"train_s": time.perf_counter() - began, "weights": dict(zip(additive.terms, additive.weights.tolist()))})
            began = time.perf_counter()
            residual = GbdtBaseline(seed=args.seed, objective="residual", depth=args.residual_depth).fit(train)
            rows.append(score("XGBoost residual log(y/roofline), flat + terms", [residual.predict(r) for r in test], test, random_needs, spread)
                        | {"train_s": time.perf_counter() - began})
        label = "roofline simulator" if test[0].layout_form else "roofline (config-blind)"
        rows.append(score(label, [roofline_predictions(r, host) for r in test], test, random_needs, spread) | {"train_s": 0.0})
        for row in rows:
            row.update(split=split, train_kernels=len(train), test_kernels=len(test))
        results += rows
    print()
    print("| split | method | top-1 slowdown | top-5 slowdown | Kendall tau | tau, kernels above noise (n) | MAPE (>=5us) | tuner meas. to <=2% | random meas. to <=2% | train s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        above = f"{r['kendall_spread']:.3f} ({r['spread_kernels']})" if "kendall_spread" in r else "-"
        print(f"| {r['split']} ({r['train_kernels']}/{r['test_kernels']}) | {r['method']} | {r['top1']:.1%} | {r['top5']:.1%} | {r['kendall']:.3f} | {above} | "
              f"{r['mape']:.1%} | {r['tuner_measurements']:.1f} | {r['random_measurements']:.1f} | {r['train_s']:.0f} |")
    if args.shipped and args.shipped_train_data:
        seen = shipped_training_kernels(args.shipped, args.shipped_train_data)
        print(f"\nOn the test kernels the shipped model never trained on ({len(seen)} training kernels of {args.shipped_train_data} left out):")
        print("| split | method | unseen test kernels | top-1 slowdown | top-5 slowdown | Kendall tau |")
        print("|---|---|---:|---:|---:|---:|")
        for r in results:
            kept = [m for name, m in r["per_kernel"].items() if name not in seen]
            r["unseen_by_shipped"] = {k: float(np.mean([m[k] for m in kept])) for k in ("top1", "top5", "kendall")} | {"kernels": len(kept)}
            u = r["unseen_by_shipped"]
            print(f"| {r['split']} | {r['method']} | {u['kernels']} | {u['top1']:.1%} | {u['top5']:.1%} | {u['kendall']:.3f} |")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"summary": summary, "results": results}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
