"""Mean and per-seed values of several bench_costmodel.py runs (one JSON per seed).

    PYTHONPATH=. python benchmarks/bench_seeds_summary.py benchmarks/results/bench_costmodel_fusion_s5*.json

Rows: (split, method) in the order of the first file; columns: top-1 / top-5 slowdown, Kendall
tau, MAPE (configs >= 5 us; n/a for rank-score methods), tuner and random measurements to 2%,
each as the mean over the files with the per-seed values in parentheses. With `--data DIR` (the
dataset the runs scored) also the Kendall tau over the test kernels whose label spread exceeds the
dataset's noise floor (cost_model.learned.metrics.label_spread), from the runs' per-kernel rows,
so runs written before that column existed get it too; `--label TEXT` is appended to every
method's name (e.g. "before" / "after" rows of one table).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

RANK_ONLY = ("rank", "MetaSchedule", "pairwise")  # their scores are not times: MAPE is meaningless


def _cell(values: list[float], percent: bool) -> str:
    fmt = (lambda v: f"{v:.1%}") if percent else (lambda v: f"{v:.3f}" if abs(v) < 1.5 else f"{v:.1f}")
    return f"{fmt(float(np.mean(values)))} ({', '.join(fmt(v) for v in values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--data", metavar="DIR", help="the dataset folder: adds tau over the kernels above the noise floor")
    parser.add_argument("--label", default="", help="appended to every method name")
    parser.add_argument("--levels", action="store_true",
                        help="also the per-kernel level error |median(pred/label) - 1|, the MAPE with that level removed and the worst test kernel's MAPE "
                             "(runs of bench_costmodel.py since the ninth session)")
    args = parser.parse_args(argv)
    runs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.files]
    above: set[str] | None = None
    if args.data:
        from cost_model.learned.metrics import label_spread
        from cost_model.learned.tpugraphs import load_dir

        floor = runs[0]["summary"]["noise_floor"]["median"]
        above = {Path(r.path).name for r in load_dir(args.data) if label_spread(r.config_runtime) > floor}
    seeds = [r["summary"]["seed"] for r in runs]
    print(f"{runs[0]['summary']['data']}: {runs[0]['summary']['kernels']} graphs/kernels, {runs[0]['summary']['configs_total']} configs; seeds {seeds}; "
          f"noise floor median {runs[0]['summary']['noise_floor']['median']:.3f}, p90 {runs[0]['summary']['noise_floor']['p90']:.3f} "
          f"({runs[0]['summary']['noise_floor']['pairs']} pairs)")
    extra = " tau, kernels above noise |" if above is not None else ""
    if args.levels:
        extra += " per-kernel level error | MAPE, level removed | worst test kernel MAPE (per seed) |"
    print(f"| split | method | top-1 slowdown | top-5 slowdown | Kendall tau |{extra} MAPE (>=5us) | tuner meas. to <=2% | random meas. to <=2% |")
    print("|---|---|---|---|---|---|---|---|" + "---|" * extra.count("|"))
    keys = list(dict.fromkeys((row["split"], row["method"]) for row in runs[0]["results"]))
    for split, method in keys:
        rows = [row for run in runs for row in run["results"] if row["split"] == split and row["method"] == method]
        if len(rows) != len(runs):
            continue
        mape = "n/a (rank scores)" if any(tag in method for tag in RANK_ONLY) else _cell([r["mape"] for r in rows], True)
        spread = ""
        if above is not None:
            taus = [float(np.mean([m["kendall"] for name, m in r["per_kernel"].items() if name in above])) for r in rows]
            counts = [sum(name in above for name in r["per_kernel"]) for r in rows]  # per seed
            spread = f" {_cell(taus, False)} [n {'/'.join(str(c) for c in counts)}] |"
        if args.levels:
            if any(tag in method for tag in RANK_ONLY) or "level_error" not in rows[0]:
                spread += " - | - | - |"
            else:
                worst = [max(r["per_kernel"].items(), key=lambda item: item[1]["mape"]) for r in rows]
                names = ", ".join("%s %.1f%%" % (Path(name).stem, 100 * m["mape"]) for name, m in worst)
                spread += f" {_cell([r['level_error'] for r in rows], True)} | {_cell([r['mape_level_removed'] for r in rows], True)} | {names} |"
        print(f"| {split} ({'/'.join(str(r['test_kernels']) for r in rows)} test) | {method}{args.label} | {_cell([r['top1'] for r in rows], True)} | "
              f"{_cell([r['top5'] for r in rows], True)} | {_cell([r['kendall'] for r in rows], False)} |{spread} {mape} | "
              f"{_cell([r['tuner_measurements'] for r in rows], False)} | {_cell([r['random_measurements'] for r in rows], False)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
