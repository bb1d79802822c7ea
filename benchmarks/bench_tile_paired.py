"""Tile ranker files against a baseline file on the same kernels: per-kernel top-1 / top-5 slowdown and Kendall tau,
the paired difference of each file against the baseline with a bootstrap interval, and what `autotune` would measure
(the best of a file's top k over the kernel's best).

    PYTHONPATH=. python benchmarks/bench_tile_paired.py out/tile_z3_syn47 --code-features out/tile_z3_syn47_code \\
        --baseline cost_model/learned/tile_gbdt_ens.json --files out/s56/H.json cost_model/learned/tile_gbdt_ens.znver5.json \\
        --bootstrap 10000 --seed 0 --by-kind --json out/s56/test.json

Every kernel of the folder is scored (no split: for files no fit on this folder has read), each exactly as
`costmodel evaluate --split all` scores it (`metrics.kernel_metrics` on the ranker's `rank_rows`). Only kernels every
file can read are kept (a file that reads compiled-code features needs the kernel's cache entry); the count left out
is printed. The bootstrap resamples kernels with replacement (numpy `default_rng(seed)`), the same resamples for every
file, and gives the 2.5% and 97.5% quantiles of the mean per-kernel difference file - baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ("top1", "top5", "kendall")


def _scores(model_path: str, records: list[Any], code_features: str | None) -> dict[str, dict[str, float]]:
    """Per kernel name: top-1, top-5, tau, and the best of the top `TOP_K` over the best, for one ranker file."""
    from cost_model.learned.metrics import kernel_metrics, top_k_slowdown
    from cost_model.learned.train import _ranker_and_records, _saved_model_kind

    kind = _saved_model_kind(model_path)
    if kind not in ("gbdt", "gbdt-ens"):
        raise SystemExit(f"{model_path}: not a tile ranker file (.ubj gbdt or gbdt-ens .json), its kind is {kind}")
    ranker, kept, _ = _ranker_and_records(model_path, kind, records, code_features if _reads_code(model_path, kind) else None, "data")
    out = {}
    for r in kept:
        pred = ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat, kind=r.meta.get("kind"))
        row = {k: v for k, v in kernel_metrics(pred, r.config_runtime).items() if k in METRICS}
        row["top7"] = top_k_slowdown(pred, r.config_runtime, 7)
        out[r.name] = row
    return out


def _reads_code(model_path: str, kind: str) -> bool:
    from cost_model.learned.predictor import load_tile_ranker

    return bool(load_tile_ranker(kind, model_path).extra.get("code_features"))


def _bootstrap(diff: np.ndarray, resamples: np.ndarray) -> tuple[float, float]:
    means = diff[resamples].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main(argv: list[str] | None = None) -> int:
    from cost_model.learned.tpugraphs import load_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a tile dataset folder")
    parser.add_argument("--code-features", help="the folder's compiled-code feature cache (for files that read it)")
    parser.add_argument("--baseline", required=True, help="the ranker file every other file is compared with")
    parser.add_argument("--files", nargs="+", required=True, help="ranker files compared with the baseline")
    parser.add_argument("--bootstrap", type=int, default=10000, help="bootstrap resamples of the kernels")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--by-kind", action="store_true", help="also a table per kernel kind")
    parser.add_argument("--json", help="write every per-kernel row and the summaries here")
    args = parser.parse_args(argv)

    records = load_dir(args.data)
    if not records:
        raise SystemExit(f"{args.data}: no kernels")
    files = [args.baseline, *args.files]
    if len(set(files)) < len(files):
        raise SystemExit(f"a file is given twice: {' '.join(files)}")
    per_file = {f: _scores(f, records, args.code_features) for f in files}
    names = sorted(set.intersection(*(set(s) for s in per_file.values())))
    if not names:
        raise SystemExit("no kernel is readable by every file")
    kinds = {r.name: str(r.meta.get("kind")) for r in records}
    print(f"{args.data}: {len(records)} kernels, {len(names)} scored by every file ({len(records) - len(names)} left out: no code features)")

    rng = np.random.default_rng(args.seed)
    resamples = rng.integers(0, len(names), size=(args.bootstrap, len(names)))
    arrays = {f: {m: np.array([per_file[f][n][m] for n in names]) for m in (*METRICS, "top7")} for f in files}
    summary: dict[str, Any] = {}
    print(f"\n{'file':52s} {'top-1':>7s} {'top-5':>7s} {'top-7':>7s} {'tau':>7s}   {'tau - baseline [95% bootstrap]':>34s} {'top-1 - baseline [95%]':>30s} {'tau +/-':>8s}")
    for f in files:
        a = arrays[f]
        row: dict[str, Any] = {m: float(a[m].mean()) for m in (*METRICS, "top7")}
        text = ""
        if f != args.baseline:
            base = arrays[args.baseline]
            dtau, dtop1 = a["kendall"] - base["kendall"], a["top1"] - base["top1"]
            row |= {"tau_diff": float(dtau.mean()), "tau_diff_ci": _bootstrap(dtau, resamples),
                    "top1_diff": float(dtop1.mean()), "top1_diff_ci": _bootstrap(dtop1, resamples),
                    "tau_higher": int((dtau > 0).sum()), "tau_lower": int((dtau < 0).sum())}
            lo, hi = row["tau_diff_ci"]
            lo1, hi1 = row["top1_diff_ci"]
            text = (f"{row['tau_diff']:+.4f} [{lo:+.4f}, {hi:+.4f}]".rjust(34) + f"{100 * row['top1_diff']:+.2f} [{100 * lo1:+.2f}, {100 * hi1:+.2f}]".rjust(31)
                    + f"{row['tau_higher']:>4d}/{row['tau_lower']:<4d}")
        summary[f] = row
        print(f"{f[-52:]:52s} {100 * row['top1']:6.2f}% {100 * row['top5']:6.2f}% {100 * row['top7']:6.2f}% {row['kendall']:7.4f}   {text}")

    by_kind: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    if args.by_kind:
        print(f"\nper kind: top-1 / tau{'':10s}" + "".join(f"{Path(f).name[-22:]:>24s}" for f in files))
        for kind in sorted(set(kinds[n] for n in names)):
            idx = np.array([i for i, n in enumerate(names) if kinds[n] == kind])
            for f in files:
                by_kind[kind][f] = {m: float(arrays[f][m][idx].mean()) for m in (*METRICS, "top7")} | {"kernels": int(idx.size)}
            print(f"{kind:18s} ({idx.size:3d})" + "".join(f"{100 * by_kind[kind][f]['top1']:12.2f}% / {by_kind[kind][f]['kendall']:.3f}" for f in files))
    if args.json:
        from graph_ir.io.atomic import atomic_path

        doc = {"data": args.data, "kernels": len(names), "left_out": len(records) - len(names), "baseline": args.baseline,
               "bootstrap": args.bootstrap, "seed": args.seed, "summary": summary, "by_kind": by_kind,
               "per_kernel": {f: {n: per_file[f][n] | {"kind": kinds[n]} for n in names} for f in files}}
        target = Path(args.json)
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            Path(tmp).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"\nwrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
