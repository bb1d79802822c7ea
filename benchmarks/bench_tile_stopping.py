"""How many configurations should the tile autotuner measure? Stopping rules replayed on held-out
kernels whose every configuration is labelled (twenty-first session, RESULTS (i)).

    PYTHONPATH=. python benchmarks/bench_tile_stopping.py out/tile_s13 --extra out/tile_syn --extra out/tile_syn2 \\
        --extra out/tile_syn19 --extra out/tile_syn20 --extra out/tile_syn21 --code-features out/tile_s13_code \\
        --extra-code-features out/tile_syn_code ... --seeds 60,...,69 --dump scores.json.gz --json stopping.json
    PYTHONPATH=. python benchmarks/bench_tile_stopping.py --from-dump scores.json.gz     # score again, no fit

Per split seed and split (`split_records`, as `bench_costmodel.py` draws them), a ranker
(`--ranker`, default `rank-all-d10`, what the shipped gbdt-ens file holds) is fitted on the training
kernels + every `--extra` kernel, and each test kernel's configurations are ranked. The autotuner
measures in that order; rules: the top k (k = 5, the shipped setting, and 6, 7, 8, 10); the gate
(`passes.autotune.search.tune_candidates(extra_k=5)`: the top 5, and the next 5 when the Kendall
tau between the ranker's scores and the measured times of those 5 is below 0.2 or undefined); and
the gate's control, the same measurement count with a coin instead of the tau (per seed, the next 5
for a random share of kernels equal to the gate's firing rate, in expectation). Per rule: the best
measured over the kernel's best label minus 1 (mean), the share within 2%, the mean measurements,
beside random search's expected measurements to 2% (`random_search_measurements`). The last line
applies the twenty-first session's gate rule (pre-registered for split seeds 60-69, where it failed):
the gate would ship iff, on both splits, its mean slowdown is below the control's and below it on more
than half the seeds (6 of 10). The top 7 became the tile default by a second rule on seeds 70-79.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

RULES = ("top 5", "top 6", "top 7", "top 8", "top 10", "gate (top 5, +5 if tau < 0.2)", "control (top 5, +5 by a coin)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", help="the tile dataset whose splits are scored (TpuGraphs-style .npz folder)")
    parser.add_argument("--extra", action="append", default=[], help="another tile dataset folder (repeatable): every kernel joins the training set")
    parser.add_argument("--code-features", metavar="CACHE", help="compiled-code feature cache of DATA (tile_code_features)")
    parser.add_argument("--extra-code-features", metavar="CACHE", action="append", default=[], help="that cache of each --extra, in order")
    parser.add_argument("--code-feature-set", default="s18")
    parser.add_argument("--ranker", default="rank-all-d10", help="a tile_rankers.TILE_RANKER_NAMES entry")
    parser.add_argument("--seeds", default="60,61,62,63,64,65,66,67,68,69")
    parser.add_argument("--splits", default="program,random")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--dump", help="write every test kernel's scores and labels here (.json or .json.gz)")
    parser.add_argument("--from-dump", help="score a --dump file instead of fitting")
    parser.add_argument("--json", help="write the table's numbers here")
    args = parser.parse_args(argv)
    if bool(args.data) == bool(args.from_dump):
        parser.error("give DATA (fit and score) or --from-dump FILE (score only)")
    if args.code_features and len(args.extra_code_features) != len(args.extra):
        parser.error("--code-features takes one --extra-code-features per --extra")
    kernels = _load(args.from_dump) if args.from_dump else _fit_and_rank(args)
    if args.dump and not args.from_dump:
        _save(args.dump, kernels)
    table = score(kernels)
    print_table(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "table": table}, indent=1), encoding="utf-8")
    return 0


def _fit_and_rank(args: argparse.Namespace) -> list[dict]:
    from cost_model.learned.data import split_records
    from cost_model.learned.tile_rankers import make_tile_ranker
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(args.data)
    extras = [load_dir(folder) for folder in args.extra]
    if args.code_features:
        from cost_model.learned.tile_code_features import extended_records

        base = extended_records(records, args.code_features, args.code_feature_set)
        extra = [e for folder, cache in zip(extras, args.extra_code_features) for e in extended_records(folder, cache, args.code_feature_set) if e is not None]
    else:
        base, extra = list(records), [r for folder in extras for r in folder]
    kept = {i for i, e in enumerate(base) if e is not None}
    out = []
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        for split in [s for s in args.splits.split(",") if s]:
            train_idx, test_idx = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
            began = time.perf_counter()
            model = make_tile_ranker(args.ranker, seed=seed).fit([base[i] for i in train_idx if i in kept] + extra)
            test = [base[i] for i in test_idx if i in kept]
            out += [{"seed": seed, "split": split, "name": Path(r.path).name, "runtime": np.asarray(r.config_runtime, dtype=float).tolist(),
                     "score": np.asarray(model.predict(r), dtype=float).tolist()} for r in test]
            print(f"seed {seed} {split}: {len(test)} test kernels ({time.perf_counter() - began:.0f} s)", flush=True)
    return out


def _load(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)["kernels"]


def _save(path: str, kernels: list[dict]) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump({"kernels": kernels}, f)


def rule_slowdowns(runtime: np.ndarray, score: np.ndarray) -> tuple[dict[str, float], dict[str, int], bool]:
    """Each rule's slowdown and measurements on one kernel, and whether the gate opened: every rule
    is the autotuner's own step (`tune_candidates`) with the kernel's labels as the measurements."""
    from passes.autotune.search import tune_candidates

    def run(top_k: int, extra_k: int = 0):  # noqa: ANN202 - a TuneOutcome
        return tune_candidates(list(range(len(runtime))), rank=lambda _: score, measure=lambda idx: [float(runtime[i]) for i in idx],
                               top_k=top_k, extra_k=extra_k)

    best = runtime.min()
    slow, count = {}, {}
    for k in (5, 6, 7, 8, 10):
        outcome = run(k)
        slow[f"top {k}"], count[f"top {k}"] = float(outcome.best_seconds / best - 1), outcome.measurements
    gated = run(5, 5)
    slow[RULES[5]], count[RULES[5]] = float(gated.best_seconds / best - 1), gated.measurements
    return slow, count, gated.extra_measured > 0


def score(kernels: list[dict]) -> dict:
    from passes.autotune.search import random_search_measurements

    table: dict = {}
    for split in sorted({k["split"] for k in kernels}):
        seeds = sorted({k["seed"] for k in kernels if k["split"] == split})
        per_seed: dict[str, dict[str, list[float]]] = {rule: {"slowdown": [], "within_2pct": [], "measurements": []} for rule in RULES}
        random_needs, fired = [], []
        for seed in seeds:
            rows = [k for k in kernels if k["split"] == split and k["seed"] == seed]
            got = [rule_slowdowns(np.asarray(k["runtime"], dtype=float), np.asarray(k["score"], dtype=float)) for k in rows]
            p = float(np.mean([opened for _, _, opened in got]))
            fired.append(p)
            for rule in RULES[:6]:
                per_seed[rule]["slowdown"].append(float(np.mean([s[rule] for s, _, _ in got])))
                per_seed[rule]["within_2pct"].append(float(np.mean([s[rule] <= 0.02 for s, _, _ in got])))
                per_seed[rule]["measurements"].append(float(np.mean([c[rule] for _, c, _ in got])))
            control = [(1 - p) * s["top 5"] + p * s["top 10"] for s, _, _ in got]  # a coin with the gate's rate, in expectation
            per_seed[RULES[6]]["slowdown"].append(float(np.mean(control)))
            per_seed[RULES[6]]["within_2pct"].append(float(np.mean([(1 - p) * (s["top 5"] <= 0.02) + p * (s["top 10"] <= 0.02) for s, _, _ in got])))
            per_seed[RULES[6]]["measurements"].append(float(np.mean([(1 - p) * c["top 5"] + p * c["top 10"] for _, c, _ in got])))
            random_needs.append(float(np.mean([random_search_measurements(k["runtime"], min(k["runtime"]) * 1.02, seed=seed) for k in rows])))
        gate, control = np.array(per_seed[RULES[5]]["slowdown"]), np.array(per_seed[RULES[6]]["slowdown"])
        table[split] = {"seeds": seeds, "kernels": sum(1 for k in kernels if k["split"] == split), "gate_rate": float(np.mean(fired)),
                        "random_measurements": float(np.mean(random_needs)), "per_seed": per_seed,
                        "gate_better_seeds": int((gate < control).sum()), "gate_mean_below_control": bool(gate.mean() < control.mean())}
    return table


def print_table(table: dict) -> None:
    print("\n| split | rule | measurements | slowdown (mean of seeds) | within 2% | seeds better than the control |")
    print("|---|---|---:|---:|---:|---:|")
    for split, t in table.items():
        for rule in RULES:
            got = t["per_seed"][rule]
            better = f"{t['gate_better_seeds']} / {len(t['seeds'])}" if rule == RULES[5] else ""
            print(f"| {split} | {rule} | {np.mean(got['measurements']):.2f} | {np.mean(got['slowdown']):.2%} | {np.mean(got['within_2pct']):.3f} | {better} |")
        print(f"| {split} | random search to 2% | {t['random_measurements']:.1f} | | | |")
    wins = {split: t["gate_mean_below_control"] and t["gate_better_seeds"] > len(t["seeds"]) / 2 for split, t in table.items()}  # 6 of 10
    for split, t in table.items():
        print(f"{split}: {t['kernels']} kernel-splits over seeds {t['seeds'][0]}-{t['seeds'][-1]}, the gate opened on {t['gate_rate']:.0%}; "
              f"gate mean below the control's: {t['gate_mean_below_control']}, better on {t['gate_better_seeds']} of {len(t['seeds'])} seeds")
    print("the gate's rule (pre-registered for split seeds 60-69, where it failed) on these seeds: "
          + ("the gate would ship" if wins and all(wins.values()) else "the gate would not ship"))


if __name__ == "__main__":
    sys.exit(main())
