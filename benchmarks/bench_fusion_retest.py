"""Test-retest agreement of two fusion collections of the same configurations (two passes, each
its own cache and processes): how far labels move when nothing but the measurement is repeated.

    PYTHONPATH=. python benchmarks/bench_fusion_retest.py out/fusion_s8 out/fusion_s8_retest --json benchmarks/results/fusion_retest_s8.json

Per graph (configurations matched by their text): MAPE = mean |b / a - 1|, median APE, Kendall
tau of a vs b, and the spread of a (slowest / fastest). A graph whose configurations barely differ
(spread below --flat, default 1.3x) has nothing to rank above the noise: it is reported apart
("flat"), as the tile section reports kernels above the noise floor. Totals: MAPE over all matched
configurations, mean per-graph tau over the graphs that are not flat, and over all graphs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def compare(first: str, second: str, *, flat: float = 1.3, configs: int = 0, graphs: str = "") -> dict:
    from scipy.stats import kendalltau

    from cost_model.learned.tpugraphs import load_dir

    a_records = {r.name: r for r in load_dir(first)}
    rows = []
    for record in load_dir(second):
        other = a_records.get(record.name)
        if other is None or (graphs and record.name not in graphs.split(",")):
            continue
        b_of = dict(zip(record.config_text, np.asarray(record.config_runtime, dtype=np.float64)))
        pairs = [(float(t1), b_of[text]) for text, t1 in zip(other.config_text, other.config_runtime) if text in b_of]
        pairs = pairs[:configs] if configs else pairs
        if len(pairs) < 3:
            continue
        a, b = np.array(pairs).T
        ape = np.abs(b / a - 1.0)
        rows.append({"graph": record.name, "configs": len(pairs), "mape": float(ape.mean()), "median_ape": float(np.median(ape)),
                     "tau": float(kendalltau(a, b).statistic), "spread": float(a.max() / a.min()), "level": float(np.median(b / a)),
                     "flat": bool(a.max() / a.min() < flat), "ape": ape.tolist()})
    if not rows:
        raise SystemExit(f"no graph with >= 3 matched configurations in both {first} and {second}")
    ape_all = np.concatenate([r["ape"] for r in rows])
    ranked = [r for r in rows if not r["flat"]]
    summary = {"graphs": len(rows), "configs": int(ape_all.size), "mape": float(ape_all.mean()), "median_ape": float(np.median(ape_all)),
               "p90_ape": float(np.quantile(ape_all, 0.9)), "tau_all": float(np.mean([r["tau"] for r in rows])),
               "tau_ranked": float(np.mean([r["tau"] for r in ranked])) if ranked else float("nan"), "ranked_graphs": len(ranked),
               "mape_ranked": float(np.concatenate([r["ape"] for r in ranked]).mean()) if ranked else float("nan"),
               "flat": float(flat)}
    return {"first": first, "second": second, "summary": summary, "rows": [{k: v for k, v in r.items() if k != "ape"} for r in rows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--flat", type=float, default=1.3, help="spread (slowest / fastest) below which a graph counts as flat")
    parser.add_argument("--configs", type=int, default=0, help="only the first N configurations of each graph (draws are prefix-stable)")
    parser.add_argument("--graphs", default="", metavar="NAME,...", help="only these graphs")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    result = compare(args.first, args.second, flat=args.flat, configs=args.configs, graphs=args.graphs)
    print("| graph | configs | spread | MAPE | median APE | level (b/a) | Kendall tau |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        flag = " (flat)" if r["flat"] else ""
        print(f"| {r['graph']}{flag} | {r['configs']} | {r['spread']:.2f}x | {r['mape'] * 100:.1f}% | {r['median_ape'] * 100:.1f}% | "
              f"{r['level']:.3f} | {r['tau']:.3f} |")
    s = result["summary"]
    print(f"\n{s['graphs']} graphs, {s['configs']} configurations: MAPE {s['mape'] * 100:.1f}% (median {s['median_ape'] * 100:.1f}%, "
          f"p90 {s['p90_ape'] * 100:.1f}%); mean tau {s['tau_all']:.3f} over all graphs, {s['tau_ranked']:.3f} over the "
          f"{s['ranked_graphs']} graphs with spread >= {s['flat']:.2f}x (their MAPE {s['mape_ranked'] * 100:.1f}%)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
