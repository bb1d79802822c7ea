"""Tile rankers over compiled-code feature sets (seventeenth session), on the same splits and rows
as `bench_costmodel.py --code-features`: the shipped gbdt-ens settings (`tile_rankers.make_tile_ranker
("gbdt-ens")`, what `--tile-rankers gbdt-ens` scores) per code feature set, and GraphSAGE
(`train.fit`) with a feature set's block joined to the config input, for several split seeds.

    PYTHONPATH=. python benchmarks/bench_tile_code_variants.py out/tile_s13 --cache out/tile_s13_code --sets s16,nest,s16+z,nest+z --seeds 0,1,2,3,4 --json OUT.json
    PYTHONPATH=. python benchmarks/bench_tile_code_variants.py out/tile_s13 --cache out/tile_s13_code --sets "" --gnn-sets nest+z --gnn-losses listmle,logistic --json OUT.json

Splits are drawn over every kernel (`data.split_records`, test fraction 0.25), then both sides keep
the kernels the cache covers (all of `out/tile_s13`). Rows: top-1 / top-5 slowdown, Kendall tau,
configurations measured in the model's order to reach 2% of the best (`bench_costmodel.tuner_measurements`),
and the noise-ceiling row (`quality.noise_ceiling`, labels x retest ratios^(1/sqrt 2)) of the same
test kernels. GraphSAGE reads NaN (a compile past the timeout) as 0 after normalisation; its
training is capped at `--gnn-minutes` (reported when it stopped early).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--cache", required=True, help="tile_code_features cache folder (version 4 for the nest sets; any since 2 for s16)")
    parser.add_argument("--sets", default="s16,nest,s16+z,nest+z", help="code feature sets for gbdt-ens ('' for none; 'none' = no code features)")
    parser.add_argument("--gnn-sets", default="", help="code feature sets for GraphSAGE ('none' = without code features)")
    parser.add_argument("--gnn-losses", default="listmle,logistic")
    parser.add_argument("--epochs", type=int, default=120)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--gnn-minutes", type=float, default=15.0, help="stop a GraphSAGE fit's epochs after this many minutes")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--splits", default="program,random")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--json", required=True)
    parser.add_argument("--summary", nargs="*", metavar="JSON", help="print the mean table of these result files (and --json's) and stop")
    args = parser.parse_args(argv)
    if args.summary is not None:
        return summarize([*args.summary, args.json])

    import torch

    from benchmarks.bench_costmodel import tuner_measurements
    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import kernel_metrics
    from cost_model.learned.tile_code_features import extended_records
    from cost_model.learned.tile_rankers import make_tile_ranker
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.quality import noise_ceiling

    torch.set_num_threads(1)
    records = load_dir(args.data)
    sets = [s for s in args.sets.split(",") if s]
    gnn_sets = [s for s in args.gnn_sets.split(",") if s]
    blocks = {}
    for name in dict.fromkeys(sets + gnn_sets):
        blocks[name] = list(records) if name == "none" else extended_records(records, args.cache, name)
    covered = [i for i in range(len(records)) if all(b[i] is not None for b in blocks.values())]
    print(f"{len(covered)} of {len(records)} kernels have every requested code feature set", flush=True)
    out_path = Path(args.json)
    results: list[dict] = json.loads(out_path.read_text(encoding="utf-8")) if out_path.is_file() else []
    done = {(r["method"], r["split"], r["seed"]) for r in results}

    def scored(method: str, split: str, seed: int, preds: list[np.ndarray], test: list, extra: dict) -> dict:
        rows = [kernel_metrics(p, r.config_runtime) for p, r in zip(preds, test)]
        row = {k: float(np.mean([m[k] for m in rows])) for k in ("top1", "top5", "kendall")}
        row["tuner"] = float(np.mean([tuner_measurements(p, r.config_runtime) for p, r in zip(preds, test)]))
        row |= {"method": method, "split": split, "seed": seed, "test_kernels": len(test)} | extra
        row["per_kernel"] = {Path(r.path).name: m["top1"] for r, m in zip(test, rows)}
        print(f"{method:34s} {split:7s} seed {seed}: top1 {row['top1']:.1%} top5 {row['top5']:.1%} tau {row['kendall']:.3f} "
              f"tuner {row['tuner']:.1f} ({extra.get('train_s', 0):.0f} s)", flush=True)
        results.append(row)
        out_path.write_text(json.dumps(results), encoding="utf-8")
        return row

    for seed in [int(s) for s in args.seeds.split(",")]:
        for split in [s for s in args.splits.split(",") if s]:
            train_idx, test_idx = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
            train_idx, test_idx = [i for i in train_idx if i in set(covered)], [i for i in test_idx if i in set(covered)]
            test_plain = [records[i] for i in test_idx]
            if ("noise ceiling", split, seed) not in done:
                scored("noise ceiling", split, seed, noise_ceiling(test_plain, seed=seed, log_scale=2 ** -0.5), test_plain, {})
            for name in sets:
                method = f"gbdt-ens, code {name}"
                if (method, split, seed) in done:
                    continue
                began = time.perf_counter()
                model = make_tile_ranker("gbdt-ens", seed=seed).fit([blocks[name][i] for i in train_idx])
                preds = [model.predict(blocks[name][i]) for i in test_idx]
                scored(method, split, seed, preds, test_plain, {"train_s": time.perf_counter() - began})
            for name in gnn_sets:
                for loss in [x for x in args.gnn_losses.split(",") if x]:
                    method = f"GraphSAGE ({loss}), code {name}"
                    if (method, split, seed) in done:
                        continue
                    began = time.perf_counter()
                    model, epochs = _fit_gnn([_nan_free(blocks[name][i]) for i in train_idx], loss, seed, split, args)
                    from cost_model.learned.train import predict, tensors_for

                    preds = [predict(model, tensors_for(model, _nan_free(blocks[name][i]))) for i in test_idx]
                    scored(method, split, seed, preds, test_plain, {"train_s": time.perf_counter() - began, "epochs_run": epochs,
                                                                    "epochs": args.epochs})
    return 0


def summarize(files: list[str]) -> int:
    """Markdown rows: per (split, method) the mean over seeds of top-1 / top-5 / tau / tuner, per seed in parentheses."""
    rows = [row for f in dict.fromkeys(files) if Path(f).is_file() for row in json.loads(Path(f).read_text(encoding="utf-8"))]
    rows = list({(r["method"], r["split"], r["seed"]): r for r in rows}.values())  # a row two files share (the noise ceiling) once
    print("| split | method | seeds | top-1 (per seed) | top-5 | tau (per seed) | tuner |")
    print("|---|---|---|---|---:|---|---:|")
    for split in ("program", "random"):
        for method in dict.fromkeys(r["method"] for r in rows if r["split"] == split):
            chosen = sorted((r for r in rows if r["split"] == split and r["method"] == method), key=lambda r: r["seed"])
            top1, tau = [r["top1"] for r in chosen], [r["kendall"] for r in chosen]
            epochs = {r.get("epochs_run") for r in chosen} - {None}
            note = f" [epochs {'/'.join(str(r['epochs_run']) for r in chosen)}]" if epochs and min(epochs) < chosen[0].get("epochs", 0) else ""
            print(f"| {split} | {method}{note} | {','.join(str(r['seed']) for r in chosen)} | {np.mean(top1):.1%} ({', '.join(f'{v:.1%}' for v in top1)}) | "
                  f"{np.mean([r['top5'] for r in chosen]):.1%} | {np.mean(tau):.3f} ({', '.join(f'{v:.3f}' for v in tau)}) | {np.mean([r['tuner'] for r in chosen]):.1f} |")
    return 0


def _nan_free(record):  # type: ignore[no-untyped-def]
    """NaN config features (compiles past the timeout) as the column's mean over the kernel's other candidates."""
    feats = np.asarray(record.config_feat, dtype=np.float32)
    if np.isfinite(feats).all():
        return record
    means = np.nanmean(np.where(np.isfinite(feats), feats, np.nan), axis=0)
    fixed = np.where(np.isfinite(feats), feats, np.nan_to_num(means)[None, :])
    return replace(record, config_feat=fixed.astype(np.float32))


def _fit_gnn(train: list, loss: str, seed: int, split: str, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """`train.fit` with the fifteenth session's settings (hidden 32, 2 layers, +0.05 x MSE), stopped
    after `--gnn-minutes`; returns the model and the epochs it ran."""
    from cost_model.learned.train import TrainConfig, fit

    config = TrainConfig(loss=loss, epochs=args.epochs, seed=seed, mse_weight=0.05, hidden=args.hidden, layers=args.layers,
                         split=split, test_fraction=args.test_fraction, max_seconds=60.0 * args.gnn_minutes)
    model = fit(train, config, log_every=0)
    return model, int(model.epochs_run)


if __name__ == "__main__":
    sys.exit(main())
