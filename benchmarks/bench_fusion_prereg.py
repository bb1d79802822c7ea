"""Two saved additive fusion models scored on one fusion folder, graph by graph, and the
seventeenth session's pre-registered decision rule applied (RESULTS (i), "Seventeenth session,
fusion (a pre-registered test on new programs)").

    PYTHONPATH=. python benchmarks/bench_fusion_prereg.py out/t11c/fusion_s17_mainscale \\
        --model-a cost_model/learned/fusion_additive.json --model-b out/t11c/model_b.json \\
        --xla-calls out/t11c/xla_calls.sqlite [--json out/t11c/prereg.json]

Nothing is fitted: both models are used as saved. Per graph (the project's `kernel_metrics`, as
every fusion table): MAPE over the configurations with label >= 5 us, Kendall tau over all of them,
and the level (median prediction / label over the configurations >= 5 us); the headline is the
mean over the graphs. A model that reads XLA call counts gets them from `--xla-calls` (every
configuration of the folder collected by `benchmarks/collect_fusion_xla.py`). Also printed: the
folder's in-process noise floor (`dataset.json`), and per graph the mean YNNPACK reduce fusions per
configuration (the count model B prices).

Decision rule (fixed before the labels were collected): B wins iff its mean per-graph MAPE is lower
than A's AND the number of graphs where B's MAPE is strictly higher than A's is at most half the
graphs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def decide(mape_a: list[float], mape_b: list[float]) -> dict:
    """The pre-registered rule on per-graph MAPEs (same graphs, same order)."""
    a, b = np.asarray(mape_a, dtype=np.float64), np.asarray(mape_b, dtype=np.float64)
    if a.shape != b.shape or not len(a):
        raise ValueError("the two models must be scored on the same, non-empty list of graphs")
    worse = int((b > a).sum())
    lower = bool(b.mean() < a.mean())
    return {"mape_a": float(a.mean()), "mape_b": float(b.mean()), "graphs": len(a), "b_worse_on": worse, "b_better_on": int((b < a).sum()),
            "b_lower_mean": lower, "b_not_worse_on_more_than_half": worse <= len(a) / 2, "b_wins": lower and worse <= len(a) / 2}


def score_model(model, records: list, rows: list[np.ndarray]) -> list[dict]:
    from cost_model.learned.metrics import kernel_metrics

    out = []
    for record, terms in zip(records, rows):
        runtime = np.asarray(record.config_runtime, dtype=np.float64)
        pred = np.log(model.predict_terms(terms))
        keep = runtime >= 5e-6
        level = float(np.median(np.exp(pred)[keep] / runtime[keep])) if keep.any() else float("nan")
        out.append({"graph": record.name, "configs": int(len(runtime)), "level": level} | kernel_metrics(pred, runtime))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--model-a", required=True)
    parser.add_argument("--model-b", required=True)
    parser.add_argument("--xla-calls", default="", help="XLA call cache holding every configuration of the folder (needed by a model with XLA terms)")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)

    from cost_model.learned.fusion_additive import AdditiveFusionModel
    from cost_model.learned.fusion_terms import record_terms
    from cost_model.learned.fusion_xla_terms import XLA_TERM_NAMES, XlaCallCache, record_xla_terms
    from cost_model.learned.tpugraphs import load_dir

    records = sorted(load_dir(args.data), key=lambda r: r.name)
    models = {"A": AdditiveFusionModel.load(args.model_a), "B": AdditiveFusionModel.load(args.model_b)}
    narrow = [record_terms(r) for r in records]
    wide, ynn = None, [float("nan")] * len(records)
    if args.xla_calls:
        with XlaCallCache(args.xla_calls) as cache:
            calls = cache.all_calls()
            xla = [record_xla_terms(r, cache, calls) for r in records]
        wide = [np.concatenate([t, x], axis=1) for t, x in zip(narrow, xla)]
        ynn = [float(x[:, XLA_TERM_NAMES.index("xla_ynn_reduce_fusions")].mean()) for x in xla]
    results = {}
    for key, model in models.items():
        if model.uses_xla_terms and wide is None:
            parser.error(f"model {key} reads XLA call counts: pass --xla-calls")
        results[key] = score_model(model, records, wide if model.uses_xla_terms else narrow)
    meta = json.loads((Path(args.data) / "dataset.json").read_text(encoding="utf-8"))
    floor = meta.get("noise_floor") or {}
    if not floor and meta.get("merged_from"):
        floor = meta["merged_from"][0].get("noise_floor", {})
    verdict = decide([r["mape"] for r in results["A"]], [r["mape"] for r in results["B"]])
    print(f"{'graph':>18} {'configs':>7} {'ynn/cfg':>7} | {'A MAPE':>7} {'tau':>6} {'level':>6} | {'B MAPE':>7} {'tau':>6} {'level':>6} | B-A")
    for i, record in enumerate(records):
        a, b = results["A"][i], results["B"][i]
        print(f"{record.name:>18} {a['configs']:>7} {ynn[i]:>7.2f} | {a['mape']:>7.2%} {a['kendall']:>6.3f} {a['level']:>6.3f} | "
              f"{b['mape']:>7.2%} {b['kendall']:>6.3f} {b['level']:>6.3f} | {b['mape'] - a['mape']:+.2%}")
    for key in ("A", "B"):
        rows = results[key]
        print(f"model {key}: mean MAPE {np.mean([r['mape'] for r in rows]):.2%}, tau {np.mean([r['kendall'] for r in rows]):.3f}, "
              f"graphs over 5% {sum(r['mape'] > 0.05 for r in rows)}/{len(rows)}, mean |level - 1| {np.mean([abs(r['level'] - 1) for r in rows]):.2%}")
    with_ynn = [i for i, v in enumerate(ynn) if v > 0]
    if with_ynn and len(with_ynn) < len(records):
        for name, idx in (("with YNNPACK reduce fusions", with_ynn), ("without", [i for i in range(len(records)) if i not in with_ynn])):
            print(f"  graphs {name} ({len(idx)}): A {np.mean([results['A'][i]['mape'] for i in idx]):.2%}, B {np.mean([results['B'][i]['mape'] for i in idx]):.2%}")
    print(f"noise floor of the folder (in-process retest |ratio - 1|): median {floor.get('median', float('nan')):.2%}, "
          f"p90 {floor.get('p90', float('nan')):.2%} over {floor.get('pairs', 0)} pairs")
    print(f"decision: B's mean MAPE lower: {verdict['b_lower_mean']} ({verdict['mape_b']:.2%} vs {verdict['mape_a']:.2%}); B worse on "
          f"{verdict['b_worse_on']} of {verdict['graphs']} graphs (rule: at most half): B {'WINS' if verdict['b_wins'] else 'does not win'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"data": Path(args.data).name, "model_a": args.model_a, "model_b": args.model_b, "noise_floor": floor,
                                               "ynn_reduce_per_config": dict(zip([r.name for r in records], ynn)), "results": results,
                                               "decision": verdict}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
