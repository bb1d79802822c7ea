"""Does a tile ranker generalise better to unseen programs when it also trains on more kernels?
The dataset's random and program splits (`split_records`, as `bench_costmodel.py` draws them), a
ranker fitted on the training kernels alone and on the training kernels plus every kernel of
`--extra` (a second collection, e.g. synthetic shapes: never in a test set), both scored on the
same test kernels; several split seeds.

    PYTHONPATH=. python benchmarks/bench_tile_more_kernels.py out/tile_s13 --extra out/tile_syn \
        --code-features out/tile_s13_code --extra-code-features out/tile_syn_code --seeds 0,1,2,3,4 --json more.json

With no `--extra`, the one fitted row is the training kernels alone (for `--fixed` / `--warm-from` on a new host's
folder, thirty-seventh session). `--prefixes 0,2,5` fits one row per prefix of the `--extra` folders (the training kernels plus the first
k folders: a data-size curve on the same test kernels); `--by-kind` adds the per-kind means of top-1 and tau;
`--by-gap` the share of test pairs each row orders right, per kind and per bin of the pair's measured
runtime gap (`metrics.pair_agreement_by_gap`), summed over the seeds.
`--train-configs 12,25` adds rows fitted on a seeded random subset of that many configurations of every training
kernel (the test kernels keep all of theirs): a data-size curve in configurations per kernel beside the one in
kernels (thirty-second session); `--train-kernels 0.5` a row fitted on a seeded random half of the training kernels
with all their configurations (the same rows as 25 configurations of every kernel: which of the two buys more).
`--fixed FILE` (repeatable) adds a row for a ranker file fitted elsewhere (e.g. the shipped one, fitted on
another host's kernels), scored as is on the same test kernels: with `--code-features` its feature set
must be `--code-feature-set`. `--warm-from FILE` adds, for each fit, the same fit whose boosting continues
from that file's trees (a one-member gbdt-ens or gbdt file of the same objective, e.g. fitted on another CPU; with
`--ranker shipped-recipe`, the shipped file's recipe, any gbdt-ens file: each member continues the file's member at
its place, or its only one, as `costmodel train --warm-from` does).

Rows: the `bench_costmodel.py` metrics (top-1 / top-5 slowdown of the predicted best, mean per-kernel
Kendall tau, tuner measurements to within 2% of the best) per split, mean over the seeds (per seed
in the JSON). With `--code-features` both fits use the compiled-code block (`tile_code_features`);
kernels the caches lack are dropped from every row alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="the dataset whose splits are scored (TpuGraphs-style tile .npz folder)")
    parser.add_argument("--extra", action="append", default=[],
                        help="another tile dataset folder (repeatable): every kernel joins the training set (none: the training kernels alone, "
                             "beside --fixed and --warm-from rows)")
    parser.add_argument("--code-features", metavar="CACHE", help="compiled-code feature cache of DATA (tile_code_features)")
    parser.add_argument("--extra-code-features", metavar="CACHE", action="append", default=[], help="compiled-code feature cache of each --extra, in order")
    parser.add_argument("--code-feature-set", default="s16", help="which compiled-code block (tile_code_features feature sets; default s16)")
    parser.add_argument("--ranker", default="gbdt-ens",
                        help="a tile_rankers.TILE_RANKER_NAMES entry (default gbdt-ens, the shipped kind); several, comma-separated, fit one row each")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--prefixes", help="rows fitted with the first k --extra folders, for each k (default 0,<all>)")
    parser.add_argument("--only-extra", action="store_true", help="fit only the training kernels + every --extra row (= --prefixes <all>; for comparing feature sets)")
    parser.add_argument("--splits", default="random,program", help="which splits (default random,program)")
    parser.add_argument("--by-kind", action="store_true", help="also print per-kind means of top-1 and Kendall tau (the test kernels' kinds)")
    parser.add_argument("--by-gap", action="store_true",
                        help="also print, per kind, the share of test pairs ordered right in bins of their runtime gap (<1%%, 1-3%%, 3-10%%, 10-30%%, more)")
    parser.add_argument("--fixed", action="append", default=[], metavar="FILE",
                        help="a fitted tile ranker file (.json gbdt-ens, .ubj gbdt) scored as is on the same test kernels (repeatable)")
    parser.add_argument("--warm-from", metavar="FILE", help="also fit each row with boosting continued from this ranker file's trees")
    parser.add_argument("--train-configs", default="",
                        help="comma list: also fit each row on this many configurations of every training kernel (a seeded subset; default: all only)")
    parser.add_argument("--train-kernels", type=float, default=None, metavar="F",
                        help="also fit each row on a seeded random fraction F (0 < F < 1) of the training kernels, all their configurations")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if args.train_kernels is not None and not 0 < args.train_kernels < 1:
        parser.error(f"--train-kernels takes a fraction between 0 and 1, got {args.train_kernels}")
    try:
        config_counts = [int(n) for n in args.train_configs.split(",") if n]
    except ValueError:
        parser.error(f"--train-configs takes integers, got {args.train_configs!r}")
    if any(n < 2 for n in config_counts):
        parser.error(f"--train-configs: a ranker needs at least 2 configurations of a kernel, got {args.train_configs}")
    try:
        prefixes = [int(k) for k in args.prefixes.split(",")] if args.prefixes else [len(args.extra)] if args.only_extra else sorted({0, len(args.extra)})
    except ValueError:
        parser.error(f"--prefixes takes integers, got {args.prefixes!r}")
    if any(not 0 <= k <= len(args.extra) for k in prefixes):
        parser.error(f"--prefixes must lie in 0..{len(args.extra)} (the number of --extra folders), got {args.prefixes}")
    splits = [s for s in args.splits.split(",") if s]
    if not splits or set(splits) - {"random", "program"}:
        parser.error(f"--splits takes random and/or program, got {args.splits!r}")
    if args.extra_code_features and not args.code_features:
        parser.error("--extra-code-features needs --code-features (every fit reads the same columns)")
    if args.code_features and len(args.extra_code_features) != len(args.extra):
        parser.error("--code-features takes one --extra-code-features per --extra (both fits need the same columns)")

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import score

    from cost_model.learned.data import split_records
    from cost_model.learned.tile_rankers import ShippedRecipe, make_tile_ranker
    from cost_model.learned.tpugraphs import load_dir
    from passes.autotune.search import random_search_measurements

    rankers = [name for name in args.ranker.split(",") if name]
    for name in rankers:  # an unknown name fails here, before any data is read
        try:
            make_tile_ranker(name)
        except ValueError as error:
            parser.error(f"--ranker: {error}")
    fixed = [(f"fixed {Path(path).name}", load_fixed_ranker(path, args.code_feature_set if args.code_features else None)) for path in args.fixed]
    warm = None
    if args.warm_from:
        from cost_model.learned.baselines import GbdtBaseline

        start = load_fixed_ranker(args.warm_from, args.code_feature_set if args.code_features else None)
        members = getattr(start, "members", None)
        if all(isinstance(make_tile_ranker(name), ShippedRecipe) for name in rankers):
            if members is None:  # forty-seventh session: the recipe continues a gbdt-ens file of any member count
                raise SystemExit(f"{args.warm_from}: --ranker shipped-recipe continues a gbdt-ens file's members")
            warm = start
        else:
            for name in rankers:
                model = make_tile_ranker(name)
                if not isinstance(getattr(model, "first", model), GbdtBaseline):
                    parser.error(f"--warm-from needs a single XGBoost model (or a cascade over one) or shipped-recipe alone as --ranker "
                                 f"(e.g. rank-all-d10), got {name}")
            if members is None or len(members) != 1:
                raise SystemExit(f"{args.warm_from}: --warm-from takes a one-member gbdt-ens file (or --ranker shipped-recipe)")
            warm = members[0].gbdt
    records = load_dir(args.data)
    extras = [load_dir(folder) for folder in args.extra]
    if args.code_features:
        from cost_model.learned.tile_code_features import extended_records

        base = extended_records(records, args.code_features, args.code_feature_set)
        keep = [i for i, e in enumerate(base) if e is not None]
        per_folder = [[e for e in extended_records(folder, cache, args.code_feature_set) if e is not None]
                      for folder, cache in zip(extras, args.extra_code_features)]
    else:
        base, keep = records, list(range(len(records)))
        per_folder = [list(folder) for folder in extras]
    fits = []  # (row name, ranker, extra kernels, warm, configurations per training kernel or None for all, fraction of the kernels)
    for k in prefixes:
        base_name = "training kernels" if k == 0 else "+ " + "+".join(Path(folder).name for folder in args.extra[:k])
        kernels = [r for folder in per_folder[:k] for r in folder]
        for ranker in rankers:
            name = base_name if len(rankers) == 1 else f"{base_name} [{ranker}]"
            fits.append((name, ranker, kernels, False, None, 1.0))
            if warm is not None:
                fits.append((f"{name}, warm", ranker, kernels, True, None, 1.0))
            fits.extend((f"{name}, {n} configs a kernel", ranker, kernels, False, n, 1.0) for n in config_counts)
            if args.train_kernels is not None:
                fits.append((f"{name}, {args.train_kernels:g} of the kernels", ranker, kernels, False, None, args.train_kernels))
    for folder, kernels in zip(args.extra, per_folder):
        print(f"--extra {Path(folder).name}: {len(kernels)} kernels ({', '.join(sorted({r.meta.get('kind', '?') for r in kernels}))})")
    print(f"{Path(args.data).name}: {len(keep)} kernels")
    kept = set(keep)
    rows: dict[str, dict[str, list[dict]]] = {}
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        for split in splits:
            train_idx, test_idx = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
            train = [base[i] for i in train_idx if i in kept]
            test = [base[i] for i in test_idx if i in kept]
            random_needs = [random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=seed) for r in test]
            for name, ranker, extra, warm_start, configs, fraction in fits:
                fitted_on = train + extra if configs is None else [fewer_configs(r, configs, seed) for r in train + extra]
                if fraction < 1:
                    fitted_on = [fitted_on[i] for i in np.sort(np.random.default_rng(seed).permutation(len(fitted_on))[: round(fraction * len(fitted_on))])]
                began = time.perf_counter()
                model = make_tile_ranker(ranker, seed=seed, code_feature_set=args.code_feature_set if args.code_features else None)
                model = model.fit(fitted_on, init=warm) if warm_start else model.fit(fitted_on)
                predictions = [model.predict(r) for r in test]
                row = score(name, predictions, test, random_needs)
                row.update(train_kernels=len(fitted_on), test_kernels=len(test), train_s=time.perf_counter() - began)
                if args.by_gap:
                    row["gap_pairs"] = gap_pairs(predictions, test)
                rows.setdefault(name, {}).setdefault(split, []).append(row)
                print(f"seed {seed} {split:7s} {name:24s} top-1 {row['top1']:.1%} top-5 {row['top5']:.1%} tau {row['kendall']:.3f} "
                      f"tuner {row['tuner_measurements']:.1f} ({len(fitted_on)} train / {len(test)} test)", flush=True)
            for name, ranker in fixed:
                predictions = [ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for r in test]
                row = score(name, predictions, test, random_needs)
                row.update(train_kernels=int(ranker.extra.get("train", {}).get("train_kernels", 0)), test_kernels=len(test), train_s=0.0)
                if args.by_gap:
                    row["gap_pairs"] = gap_pairs(predictions, test)
                rows.setdefault(name, {}).setdefault(split, []).append(row)
                print(f"seed {seed} {split:7s} {name:24s} top-1 {row['top1']:.1%} top-5 {row['top5']:.1%} tau {row['kendall']:.3f} "
                      f"tuner {row['tuner_measurements']:.1f} (fixed / {len(test)} test)", flush=True)
    print(f"\n| split | {args.ranker} fitted on | top-1 slowdown | top-5 slowdown | Kendall tau | tuner meas. to <=2% | random meas. |")
    print("|---|---|---|---|---|---|---|")
    for split in splits:
        for name, by_split in rows.items():
            runs = by_split[split]
            mean = {k: float(np.mean([r[k] for r in runs])) for k in ("top1", "top5", "kendall", "tuner_measurements", "random_measurements")}
            print(f"| {split} | {name} | {mean['top1']:.1%} | {mean['top5']:.1%} | {mean['kendall']:.3f} | "
                  f"{mean['tuner_measurements']:.1f} | {mean['random_measurements']:.1f} |")
    if args.by_kind:
        print_by_kind(rows, splits)
    if args.by_gap:
        print_by_gap(rows, splits)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "ranker": args.ranker, "code_feature_set": args.code_feature_set if args.code_features else None,
                                               "rows": rows}, indent=1), encoding="utf-8")
    return 0


def fewer_configs(record: Any, count: int, seed: int) -> Any:
    """`record` with a seeded random `count` of its configurations (all of them when it has no more)."""
    import zlib
    from dataclasses import replace

    if record.num_configs <= count:
        return record
    keep = np.sort(np.random.default_rng([seed, zlib.crc32(record.name.encode())]).choice(record.num_configs, count, replace=False))
    return replace(record, config_runtime=record.config_runtime[keep], config_runtime_normalizers=record.config_runtime_normalizers[keep],
                   config_feat=record.config_feat[keep], config_text=[record.config_text[i] for i in keep] if record.config_text else [])


def load_fixed_ranker(path: str, feature_set: str | None) -> Any:
    """A fitted tile ranker file for a `--fixed` row; refuses one that reads other columns than the rows'."""
    from cost_model.learned.gbdt_predictor import code_feature_set_read
    from cost_model.learned.predictor import load_tile_ranker, tile_ranker_for

    ranker = load_tile_ranker(tile_ranker_for(path), path)
    reads = code_feature_set_read(getattr(ranker, "extra", {}) or {})
    if reads != feature_set:
        raise SystemExit(f"{path}: the ranker reads code feature set {reads!r}, the rows carry {feature_set!r} (--code-features / --code-feature-set)")
    return ranker


def gap_pairs(predictions: list[np.ndarray], records: list) -> dict[str, list[list[float]]]:
    """Per kind: [pairs ordered right, pairs] per `GAP_EDGES` bin, over these test kernels."""
    from cost_model.learned.metrics import pair_agreement_by_gap

    out: dict[str, list[list[float]]] = {}
    for pred, record in zip(predictions, records):
        agree, pairs = pair_agreement_by_gap(pred, record.config_runtime)
        kind = str(record.meta.get("kind", "?"))
        total = out.setdefault(kind, [[0.0] * len(pairs), [0] * len(pairs)])
        total[0] = [a + b for a, b in zip(total[0], agree.tolist())]
        total[1] = [a + b for a, b in zip(total[1], pairs.tolist())]
    return out


def print_by_gap(rows: dict[str, dict[str, list[dict]]], splits: list[str]) -> None:
    """Share of pairs ordered right per kind and runtime-gap bin, summed over the runs of each row."""
    from cost_model.learned.metrics import GAP_EDGES

    labels = [f"{lo:.0%}-{hi:.0%}" if np.isfinite(hi) else f">={lo:.0%}" for lo, hi in zip(GAP_EDGES[:-1], GAP_EDGES[1:])]
    for split in splits:
        print(f"\n{split} split, pairs ordered right by their measured runtime gap (share, pairs; all seeds):")
        print("| row | kind | " + " | ".join(labels) + " |")
        print("|---|---|" + "---:|" * len(labels))
        for name, by_split in rows.items():
            kinds = sorted({kind for run in by_split[split] for kind in run.get("gap_pairs", {})})
            for kind in kinds:
                agree = np.sum([run["gap_pairs"][kind][0] for run in by_split[split] if kind in run.get("gap_pairs", {})], axis=0)
                pairs = np.sum([run["gap_pairs"][kind][1] for run in by_split[split] if kind in run.get("gap_pairs", {})], axis=0)
                cells = [f"{a / n:.2f} ({int(n)})" if n else "-" for a, n in zip(agree, pairs)]
                print(f"| {name} | {kind} | " + " | ".join(cells) + " |")


def print_by_kind(rows: dict[str, dict[str, list[dict]]], splits: list[str]) -> None:
    """Per test-kernel kind (the record name's middle field, `program:kind:hash`): mean top-1 and tau per row."""
    for split in splits:
        kinds = sorted({name.split(":")[1] for by_split in rows.values() for run in by_split[split] for name in run["per_kernel"] if name.count(":") >= 2})
        print(f"\n{split} split, per kind (top-1 slowdown / Kendall tau, kernels x seeds):")
        print("| row | " + " | ".join(kinds) + " |")
        print("|---|" + "---|" * len(kinds))
        for name, by_split in rows.items():
            cells = []
            for kind in kinds:
                got = [m for run in by_split[split] for key, m in run["per_kernel"].items() if key.count(":") >= 2 and key.split(":")[1] == kind]
                cells.append(f"{np.mean([m['top1'] for m in got]):.1%} / {np.mean([m['kendall'] for m in got]):.3f} ({len(got)})" if got else "-")
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
