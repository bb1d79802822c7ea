"""Why a tile ranker's mean top-1 slowdown is what it is: the per-kernel distribution and the knobs
of its worst picks.

    PYTHONPATH=. python benchmarks/bench_tile_diagnose.py out/tile_s13 [--seed 0] [--worst 10] [--ranker rank+relative]

For both splits (split seed `--seed`, test fraction 0.25) it fits XGBoost's pairwise rank model on
flat features (`GbdtBaseline(objective="rank")`, the "XGBoost rank" row of bench_costmodel.py; or
`--ranker NAME`, one of `tile_rankers.TILE_RANKER_NAMES`) and prints, over the test kernels: the median, p90 and max per-kernel top-1 slowdown, the share of the
mean that the worst `--worst` kernels carry, the same per kernel kind, and for the worst picks the
knobs (split factors, loop order, vectorize, unroll, parallel) of the model's pick beside the
kernel's true best, plus how often the worst picks share a knob pattern (scalar fallback, unroll
512, parallel on one core, order). Writes JSON to benchmarks/results/bench_tile_diagnose.json.

First, from the labels alone (`--data-only` stops there), how hard a top-1 pick is per kind: the
best configuration's lead over the second best, how many configurations lie within 2% / 10% of
the best, and the retest noise (|min2 / min1 - 1| of the configurations timed twice): a kind
whose best leads by 20% with no other configuration within 10% needs the one best of 50 found.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_tile_diagnose.json"


def knob_summary(text: str, is_reduce: list[bool]) -> dict[str, object]:
    """The knobs of one stored config text, and derived flags (vector length, scalar fallback)."""
    from cost_model.measure.tile.space import ORDERS, TileConfig

    config = TileConfig.from_text(text)
    order = ORDERS[config.order]
    last_spatial = max(i for i, r in enumerate(is_reduce) if not r)
    vec = config.tiles[last_spatial][-1] if (config.vectorize and order.endswith("S2")) else 1
    return {"tiles": [list(t) for t in config.tiles], "order": order, "vectorize": config.vectorize, "vector_len": vec,
            "scalar": vec == 1, "unroll": config.unroll, "parallel": config.parallel}


def distribution(values: np.ndarray, worst: int) -> dict[str, float]:
    values = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    total = float(values.sum())
    return {"kernels": int(values.size), "mean": float(values.mean()), "median": float(np.median(values)), "p90": float(np.quantile(values, 0.9)),
            "max": float(values.max()), f"share_worst{worst}": float(values[:worst].sum() / total) if total > 0 else float("nan"),
            "share_over_1x": float(values[values >= 1.0].sum() / total) if total > 0 else float("nan"),
            "kernels_over_1x": int((values >= 1.0).sum()), "kernels_under_5pct": int((values <= 0.05).sum())}


def label_difficulty(records: list) -> dict[str, dict[str, float]]:
    """Per kind (and "all"): medians of the best's lead over the 2nd best and of the configurations
    within 2% / 10% of the best, and the retest noise's median / p90 (module docstring)."""
    from cost_model.measure.harness import noise_floor

    per: dict[str, dict[str, list]] = {}
    for r in records:
        runtime = np.sort(np.asarray(r.config_runtime, dtype=np.float64))
        for kind in (str(r.meta.get("kind", "?")), "all"):
            d = per.setdefault(kind, {"lead": [], "within2": [], "within10": [], "pairs": []})
            d["lead"].append(runtime[1] / runtime[0] - 1.0 if runtime.size > 1 else float("nan"))
            d["within2"].append(float((runtime <= runtime[0] * 1.02).sum() - 1))
            d["within10"].append(float((runtime <= runtime[0] * 1.10).sum() - 1))
            d["pairs"].extend(r.meta.get("retest", []))  # the collection's own retests (not a later remeasure)
    out = {}
    for kind, d in sorted(per.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        floor = noise_floor(d["pairs"])
        out[kind] = {"kernels": len(d["lead"]), "lead_median": float(np.nanmedian(d["lead"])), "within2_median": float(np.median(d["within2"])),
                     "within10_median": float(np.median(d["within10"])), "noise_median": floor["median"], "noise_p90": floor["p90"]}
    return out


def print_label_difficulty(table: dict[str, dict[str, float]]) -> None:
    print("| kind | kernels | best's lead over 2nd (median) | others within 2% of best (median) | within 10% | retest noise median / p90 |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, d in table.items():
        print(f"| {kind} | {d['kernels']} | {d['lead_median']:.1%} | {d['within2_median']:.0f} | {d['within10_median']:.0f} | "
              f"{d['noise_median']:.1%} / {d['noise_p90']:.1%} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worst", type=int, default=10)
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--ranker", default="rank", help="rank (GbdtBaseline's pairwise rank model) or a tile_rankers.TILE_RANKER_NAMES entry")
    parser.add_argument("--data-only", action="store_true", help="only the label table (no ranker fitted)")
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)

    from cost_model.learned.baselines import GbdtBaseline
    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import top_k_slowdown
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(args.data)
    report: dict[str, object] = {"data": Path(args.data).name, "seed": args.seed, "ranker": args.ranker}
    report["labels"] = label_difficulty(records)
    print(f"## {Path(args.data).name}: how far the best configuration leads (labels only)")
    print_label_difficulty(report["labels"])
    for split in () if args.data_only else ("random", "program"):
        train_idx, test_idx = split_records(records, split, test_fraction=args.test_fraction, seed=args.seed)
        test = [records[i] for i in test_idx]
        if args.ranker == "rank":
            model = GbdtBaseline(seed=args.seed, objective="rank")
        else:
            from cost_model.learned.tile_rankers import make_tile_ranker

            model = make_tile_ranker(args.ranker, seed=args.seed)
        model.fit([records[i] for i in train_idx])
        preds = [model.predict(r) for r in test]
        top1 = np.array([top_k_slowdown(p, r.config_runtime, 1) for p, r in zip(preds, test)])
        kinds = [str(r.meta.get("kind", "?")) for r in test]
        by_kind = {k: distribution(top1[[x == k for x in kinds]], min(args.worst, kinds.count(k))) for k in sorted(set(kinds))}
        # the configs the model ranks first vs the true best, and how bad the pick is among the kernel's 50
        picks = []
        for p, r, slow, kind in zip(preds, test, top1, kinds):
            runtime = np.asarray(r.config_runtime, dtype=np.float64)
            pick, best = int(np.argmin(p)), int(np.argmin(runtime))
            is_reduce = [bool(x) for x in r.meta["is_reduce"]]
            picks.append({"kernel": Path(r.path).name, "kind": kind, "top1": float(slow), "pick_rank_true": int((runtime < runtime[pick]).sum()) + 1,
                          "ratio_median_over_best": float(np.median(runtime) / runtime.min()),
                          "ratio_worst_over_best": float(runtime.max() / runtime.min()),
                          "best_rank_pred": int((p < p[best]).sum()) + 1,
                          "pick": knob_summary(str(r.config_text[pick]), is_reduce), "best": knob_summary(str(r.config_text[best]), is_reduce)})
        picks.sort(key=lambda x: -x["top1"])
        worst = picks[: args.worst]
        patterns = {
            "pick scalar, best vectorized": sum(w["pick"]["scalar"] and not w["best"]["scalar"] for w in worst),
            "pick unroll 512": sum(w["pick"]["unroll"] == 512 for w in worst), "best unroll 512": sum(w["best"]["unroll"] == 512 for w in worst),
            "pick parallel": sum(w["pick"]["parallel"] for w in worst), "best parallel": sum(w["best"]["parallel"] for w in worst),
            "pick order != best order": sum(w["pick"]["order"] != w["best"]["order"] for w in worst),
            "pick orders": dict(Counter(w["pick"]["order"] for w in worst)), "best orders": dict(Counter(w["best"]["order"] for w in worst)),
        }
        all_patterns = {
            "pick scalar": sum(x["pick"]["scalar"] for x in picks), "best scalar": sum(x["best"]["scalar"] for x in picks),
            "pick unroll": dict(Counter(x["pick"]["unroll"] for x in picks)), "best unroll": dict(Counter(x["best"]["unroll"] for x in picks)),
            "pick orders": dict(Counter(x["pick"]["order"] for x in picks)), "best orders": dict(Counter(x["best"]["order"] for x in picks)),
            "pick parallel": sum(x["pick"]["parallel"] for x in picks), "best parallel": sum(x["best"]["parallel"] for x in picks),
        }
        report[split] = {"all": distribution(top1, args.worst), "by_kind": by_kind, "worst": worst, "worst_patterns": patterns,
                         "all_patterns": all_patterns, "train_kernels": len(train_idx), "test_kernels": len(test)}

        print(f"\n## {split} split (seed {args.seed}, ranker {args.ranker}): {len(train_idx)} train / {len(test)} test kernels")
        print("| kind | kernels | mean top-1 | median | p90 | max | share of mean, worst 10 | kernels >= 100% (share of mean) | kernels <= 5% |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind, d in [("all", report[split]["all"])] + list(by_kind.items()):
            share = d.get(f"share_worst{args.worst}", d.get(f"share_worst{min(args.worst, d['kernels'])}", float("nan")))
            print(f"| {kind} | {d['kernels']} | {d['mean']:.1%} | {d['median']:.1%} | {d['p90']:.1%} | {d['max']:.0%} | {share:.0%} | "
                  f"{d['kernels_over_1x']} ({d['share_over_1x']:.0%}) | {d['kernels_under_5pct']} |")
        print(f"\nworst {args.worst} picks:")
        print("| kernel | top-1 | pick's true rank | best's predicted rank | median/best | pick: order, vec, unroll, par, tiles | best: order, vec, unroll, par, tiles |")
        print("|---|---:|---:|---:|---:|---|---|")
        for w in worst:
            def fmt(k: dict) -> str:
                return f"{k['order']}, v{k['vector_len']}{' (scalar)' if k['scalar'] else ''}, u{k['unroll']}, {'par' if k['parallel'] else 'ser'}, {k['tiles']}"
            print(f"| {w['kernel']} | {w['top1']:.0%} | {w['pick_rank_true']} | {w['best_rank_pred']} | {w['ratio_median_over_best']:.2f} | {fmt(w['pick'])} | {fmt(w['best'])} |")
        print("worst-pick patterns:", json.dumps(patterns))
        print("all-pick patterns:", json.dumps(all_patterns))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
