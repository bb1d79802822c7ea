"""Dumped tile rankings scored again on a re-measured labelling of the same kernels (twenty-second
session, RESULTS (i)).

    compiler-opt costmodel remeasure DIR --max-load 2.5          # DIR: a copy of the dataset; relabelled in place
    PYTHONPATH=. python benchmarks/bench_tile_relabel.py scores_a.json.gz [scores_b.json.gz ...] --labels DIR --json relabel.json

A dump (`bench_tile_stopping.py --dump`) holds, per split seed and split, every held-out kernel's labels
and the ranker's scores. `costmodel remeasure` times a dataset's kernels again in a later, independent
pass and keeps both passes' minima per configuration (`meta["remeasure"]["pairs"]`). The same scores
are scored on three labellings of the same kernels:
- `collection`: the labels the dump was scored on (the first pass);
- `re-measurement`: the second pass's minima alone, timed independently of the first;
- `min of both`: what the relabelled folder holds (timing noise mostly slows a run).
A fourth row, `pass 2 ranks pass 1`, uses the second pass's times as the ranker and the first pass's
as labels: how well one measurement predicts another (both sides noisy), the labels' own agreement.
Metrics (mean over kernels of each seed, then over seeds): top-1 and top-5 slowdown, Kendall tau,
the share of kernels whose top-1 is within 2% of the best, measurements in the ranker's order to within
2%. Below the table: |pass 2 / pass 1 - 1| over every configuration (the noise between two passes
timed apart) beside the collection's in-pass retest pairs.

Only kernels the folder has re-measured are scored, in every row alike; a dump whose labels are not the
folder's collection labels (another dataset, another order) is refused with the file's name.

`--compare` scores each dump on the minimum of both passes alone, one row per dump (a dump may hold
either labelling: a ranker fitted on the collection labels and one fitted on the relabelled folder are
compared on the same labels), with per-seed counts of where the last dump beats the first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:  # its siblings (bench_costmodel, bench_tile_stopping), also when loaded by a test
    sys.path.insert(0, str(Path(__file__).resolve().parent))

LABELLINGS = ("collection", "re-measurement", "min of both", "pass 2 ranks pass 1")
METRICS = ("top1", "top5", "kendall", "top1_within_2pct", "tuner_measurements")


def load_dumps(paths: list[str]) -> list[dict]:
    from bench_tile_stopping import _load

    kernels: list[dict] = []
    seen: set[tuple] = set()
    for path in paths:
        for k in _load(path):
            key = (k["seed"], k["split"], k["name"])
            if key in seen:
                raise ValueError(f"{path}: seed {k['seed']} {k['split']} kernel {k['name']} is in an earlier dump too")
            seen.add(key)
            kernels.append(k)
    return kernels


def remeasured_labels(folder: str) -> dict[str, dict[str, np.ndarray]]:
    """Per kernel file name: the collection's and the re-measurement's minima (kernels not re-measured are absent)."""
    out = {}
    for path in sorted(Path(folder).glob("*.npz")):
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
        info = meta.get("remeasure")
        if not info or not info.get("pairs"):
            continue
        pairs = np.asarray(info["pairs"], dtype=np.float64)
        collect = np.asarray(info["runtime_collect"], dtype=np.float64)
        if pairs.shape[0] != collect.shape[0]:
            continue  # some configurations were not timed again: not a whole second labelling
        out[path.name] = {"collection": collect, "second": pairs[:, 1]}
    return out


def kernel_row(score: np.ndarray, runtime: np.ndarray) -> dict[str, float]:
    from bench_costmodel import tuner_measurements
    from cost_model.learned.metrics import kendall_tau, top_k_slowdown

    top1 = top_k_slowdown(score, runtime, 1)
    return {"top1": top1, "top5": top_k_slowdown(score, runtime, 5), "kendall": kendall_tau(score, runtime),
            "top1_within_2pct": float(top1 <= 0.02), "tuner_measurements": float(tuner_measurements(score, runtime))}


def summarise(by_seed: dict[int, list[dict[str, float]]]) -> dict:
    """Per seed the mean of each metric over its kernels, and the mean over seeds."""
    seeds = sorted(by_seed)
    per_seed = {m: [float(np.nanmean([r[m] for r in by_seed[s]])) for s in seeds] for m in METRICS}
    return {"seeds": seeds, "kernels": sum(len(by_seed[s]) for s in seeds), "per_seed": per_seed,
            "mean": {m: float(np.mean(v)) for m, v in per_seed.items()}}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-9, atol=0.0))


def score(kernels: list[dict], labels: dict[str, dict[str, np.ndarray]]) -> dict:
    table: dict = {"kernels_scored": 0, "kernels_skipped": 0}
    rows: dict[tuple[str, str], dict[int, list[dict[str, float]]]] = {}
    for k in kernels:
        got = labels.get(k["name"])
        if got is None:
            table["kernels_skipped"] += 1
            continue
        runtime = np.asarray(k["runtime"], dtype=np.float64)
        if not _same(runtime, got["collection"]):
            raise ValueError(f"{k['name']}: the dump's labels are not this folder's collection labels (another dataset or order?)")
        score_ = np.asarray(k["score"], dtype=np.float64)
        both = np.minimum(runtime, got["second"])
        for name, s, r in ((LABELLINGS[0], score_, runtime), (LABELLINGS[1], score_, got["second"]), (LABELLINGS[2], score_, both),
                           (LABELLINGS[3], got["second"], runtime)):
            rows.setdefault((k["split"], name), {}).setdefault(k["seed"], []).append(kernel_row(s, r))
        table["kernels_scored"] += 1
    for split in sorted({s for s, _ in rows}):
        table[split] = {name: summarise(rows[(split, name)]) for name in LABELLINGS}
    return table


def compare(dumps: dict[str, list[dict]], labels: dict[str, dict[str, np.ndarray]]) -> dict:
    """Per dump, the metrics on the minimum of both passes (per split: per seed and mean)."""
    table: dict = {}
    for path, kernels in dumps.items():
        rows: dict[str, dict[int, list[dict[str, float]]]] = {}
        for k in kernels:
            got = labels.get(k["name"])
            if got is None:
                continue
            runtime = np.asarray(k["runtime"], dtype=np.float64)
            both = np.minimum(got["collection"], got["second"])
            if not (_same(runtime, got["collection"]) or _same(runtime, both)):
                raise ValueError(f"{path}: {k['name']}: the dump's labels are neither this folder's collection labels nor its relabelled ones")
            rows.setdefault(k["split"], {}).setdefault(k["seed"], []).append(kernel_row(np.asarray(k["score"], dtype=np.float64), both))
        for split in sorted(rows):
            table.setdefault(split, {})[path] = summarise(rows[split])
    for split, got in table.items():
        first, last = list(got.values())[0], list(got.values())[-1]
        if len(got) > 1 and first["seeds"] == last["seeds"]:
            got["last_vs_first"] = {"tau_better_seeds": int(np.sum(np.array(last["per_seed"]["kendall"]) > np.array(first["per_seed"]["kendall"]))),
                                    "top1_better_seeds": int(np.sum(np.array(last["per_seed"]["top1"]) < np.array(first["per_seed"]["top1"]))),
                                    "tau_diff": last["mean"]["kendall"] - first["mean"]["kendall"],
                                    "top1_diff": last["mean"]["top1"] - first["mean"]["top1"], "seeds": len(first["seeds"])}
    return table


def print_compare(table: dict) -> None:
    print("\n| split | dump (scored on the minimum of both passes) | kernels | top-1 | top-5 | Kendall tau | top-1 within 2% | meas. to <=2% |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for split, got in table.items():
        for path, t in got.items():
            if path == "last_vs_first":
                continue
            m = t["mean"]
            print(f"| {split} | {Path(path).name} | {t['kernels']} | {100 * m['top1']:.1f}% | {100 * m['top5']:.1f}% | {m['kendall']:.3f} | "
                  f"{m['top1_within_2pct']:.3f} | {m['tuner_measurements']:.2f} |")
    for split, got in table.items():
        if "last_vs_first" in got:
            d = got["last_vs_first"]
            print(f"{split}: last vs first dump: tau {d['tau_diff']:+.4f} (better on {d['tau_better_seeds']} / {d['seeds']} seeds), "
                  f"top-1 {100 * d['top1_diff']:+.2f} points (better on {d['top1_better_seeds']} / {d['seeds']})")


def pass_noise(labels: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
    """|pass 2 / pass 1 - 1| over every re-measured configuration, and the signed median."""
    ratio = np.concatenate([v["second"] / v["collection"] for v in labels.values()]) if labels else np.ones(1)
    gap = np.abs(ratio - 1.0)
    return {"configs": int(ratio.size), "median": float(np.median(gap)), "p90": float(np.percentile(gap, 90)),
            "signed_median": float(np.median(ratio - 1.0)), "share_faster_2nd": float(np.mean(ratio < 1.0))}


def print_table(table: dict, noise: dict[str, float]) -> None:
    print(f"\n{table['kernels_scored']} kernel x seed rows scored ({table['kernels_skipped']} skipped: not re-measured)")
    print("\n| split | labels | kernels | top-1 | top-5 | Kendall tau | top-1 within 2% | meas. to <=2% |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for split in [s for s in table if isinstance(table[s], dict)]:
        for name, t in table[split].items():
            m = t["mean"]
            print(f"| {split} | {name} | {t['kernels']} | {100 * m['top1']:.1f}% | {100 * m['top5']:.1f}% | {m['kendall']:.3f} | "
                  f"{m['top1_within_2pct']:.3f} | {m['tuner_measurements']:.2f} |")
    print(f"\nbetween the passes, {noise['configs']} configurations: |pass 2 / pass 1 - 1| median {100 * noise['median']:.1f}%, "
          f"p90 {100 * noise['p90']:.1f}%; pass 2 / pass 1 - 1 median {100 * noise['signed_median']:+.1f}% "
          f"(pass 2 faster on {100 * noise['share_faster_2nd']:.0f}%)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", nargs="+", help="bench_tile_stopping.py --dump files (.json or .json.gz)")
    parser.add_argument("--labels", required=True, metavar="DIR", help="the dataset folder after `costmodel remeasure`")
    parser.add_argument("--compare", action="store_true", help="one row per dump, each scored on the minimum of both passes")
    parser.add_argument("--json", help="write the table's numbers here")
    args = parser.parse_args(argv)
    labels = remeasured_labels(args.labels)
    if not labels:
        parser.error(f"{args.labels}: no kernel there has been re-measured (run `compiler-opt costmodel remeasure` first)")
    if args.compare:
        try:
            table = compare({path: load_dumps([path]) for path in args.dumps}, labels)
        except ValueError as error:
            parser.error(str(error))
        print_compare(table)
        if args.json:
            Path(args.json).write_text(json.dumps({"argv": sys.argv, "compare": table}, indent=1), encoding="utf-8")
        return 0
    try:
        table = score(load_dumps(args.dumps), labels)
    except ValueError as error:
        parser.error(str(error))
    noise = pass_noise(labels)
    print_table(table, noise)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "table": table, "pass_noise": noise}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
