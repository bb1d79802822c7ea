"""How timing noise enters the tile labels: retest error by configuration runtime and by hour of
collection, what the per-kernel score says, and what re-measuring the noisiest kernels changed.

    PYTHONPATH=. python benchmarks/bench_label_noise.py out/tile     # reads out/tile/*.npz and out/tile/measurements.sqlite

Retest error = |min2 / min1 - 1| of a configuration timed in the collection and again in its
independent retest pass (cache backend `tvm-llvm/retest`); spread = median / min - 1 of one
configuration's own samples. After `compiler-opt costmodel remeasure`, the re-measured kernels'
(collection, re-measurement) pairs give a full test-retest per kernel: their noise, the per-kernel
Kendall tau between the two passes, the top-1 choice of one pass scored by the other, and how well
the score computed before re-measuring (quality.kernel_noise) predicted that noise. Writes
benchmarks/results/bench_label_noise.json.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_label_noise.json"


def _band(values: np.ndarray) -> dict[str, float]:
    return {"n": int(values.size), "median": float(np.median(values)), "p90": float(np.quantile(values, 0.9))} if values.size else {"n": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="tile dataset folder (with measurements.sqlite)")
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)

    from scipy.stats import kendalltau, spearmanr

    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.quality import kernel_noise

    db = sqlite3.connect(f"file:{Path(args.data) / 'measurements.sqlite'}?mode=ro", uri=True)
    rows = db.execute("SELECT key, backend, min_s, median_s, created FROM measurements").fetchall()
    first = {k: (mn, md, c) for k, b, mn, md, c in rows if b == "tvm-llvm"}
    retest = {k: mn for k, b, mn, _, _ in rows if b == "tvm-llvm/retest" and k in first}
    keys = list(retest)
    base = np.array([first[k][0] for k in keys])
    err = np.array([abs(retest[k] / first[k][0] - 1) for k in keys])
    spread = np.array([first[k][1] / first[k][0] - 1 for k in keys])
    created = np.array([first[k][2] for k in keys])
    out: dict = {"retest_pairs": len(keys), "all_retest": _band(err)}
    out["by_runtime"] = {f"{lo:g}-{hi:g} s": _band(err[(base >= lo) & (base < hi)]) for lo, hi in
                         [(0, 1e-5), (1e-5, 1e-4), (1e-4, 1e-3), (1e-3, 1e-2), (1e-2, 10.0)]}
    hours = np.floor(created / 3600).astype(int)
    out["by_hour_utc"] = {time.strftime("%H:00", time.gmtime(h * 3600)): _band(err[hours == h]) for h in sorted(set(hours.tolist()))}
    out["by_spread"] = {f"{lo:g}-{hi:g}": _band(err[(spread >= lo) & (spread < hi)]) for lo, hi in
                        [(0, 0.02), (0.02, 0.05), (0.05, 0.1), (0.1, 0.3), (0.3, 1.0), (1.0, 1e9)]}
    out["spearman_spread_vs_retest"] = float(spearmanr(spread, err).statistic)

    records = load_dir(args.data)
    noise = [kernel_noise(r) for r in records]
    out["kernels"] = len(records)
    out["score"] = _band(np.array([n.score for n in noise]))
    done = [r for r in records if "remeasure" in r.meta]
    out["remeasured"] = len(done)
    if done:
        taus, top1, err_kernel, score_before, loads = [], [], [], [], []
        for r in done:
            pairs = np.asarray(r.meta["remeasure"]["pairs"], dtype=np.float64)
            a, b = pairs[:, 0], pairs[:, 1]
            taus.append(float(kendalltau(a, b).statistic))
            top1.append(float(b[np.argmin(a)] / b.min() - 1))  # the collection's winner, timed by the re-measurement
            err_kernel.append(float(np.median(np.abs(b / a - 1))))
            score_before.append(float(r.meta["remeasure"].get("score_before", np.nan)))
            loads.append(float(r.meta["remeasure"].get("load1_after", np.nan)))
        all_pairs = np.concatenate([np.asarray(r.meta["remeasure"]["pairs"]) for r in done])
        out["remeasure"] = {
            "old_vs_new_error": _band(np.abs(all_pairs[:, 1] / all_pairs[:, 0] - 1)),
            "new_faster_fraction": float(np.mean(all_pairs[:, 1] < all_pairs[:, 0])),
            "kernel_tau_mean": float(np.mean(taus)), "kernel_tau_median": float(np.median(taus)),
            "collection_top1_slowdown_mean": float(np.mean(top1)), "collection_top1_slowdown_median": float(np.median(top1)),
            "spearman_score_vs_kernel_error": float(spearmanr(score_before, err_kernel).statistic) if len(done) > 2 else float("nan"),
            "load1_mean": float(np.nanmean(loads)), "load1_max": float(np.nanmax(loads)),
        }
    print(json.dumps(out, indent=1))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
