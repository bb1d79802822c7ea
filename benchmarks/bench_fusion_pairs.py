"""The additive fusion model with its collinear pairs tied: held out one program at a time, by the
program split and by the random split (fifteenth session).

    PYTHONPATH=. python benchmarks/bench_fusion_pairs.py out/fusion_s12c [--seeds 0,1,2] [--json out/pairs_s12c.json]

The shipped form (`AdditiveFusionModel(signed_terms=CONV_OFFSET)`) fits the MB read and MB written
between calls (`input_mb`, `output_mb`) and the arguments and outputs of a call (`kernel_inputs`,
`kernel_outputs`) as free weights; the pairs are collinear, and where the fit puts each pair's
cost moves with every program added or held out (RESULTS (i), twelfth session part 2, thirteenth
session). Each variant here ties the second term of a pair to the first at a ratio
(`tied_terms`, w_b = r x w_a):

- `mb=R`, `args=R`, `mb=R+args=S`: the ratio fixed (the same for every fit);
- `cv` (`cvargs`, `cvmb`: that pair only, the other free): each pair's ratio chosen from `--grid` by grouped cross-validation over the training
  programs only (`--inner-folds` folds of whole programs; the mean per-graph MAPE), then the
  model refitted on all training programs with it (nested: the held-out programs never choose).

Sixteenth session: variants with the per-argument / per-output cost split by buffer size
(`fusion_terms.BUFFER_SIZE_TERMS`) added to the shipped form, every pair free: `logsize`
(`LOG_SIZE_TERMS`: the sum of log2 elements over arguments and over outputs), `sizeclass`
(`SIZE_CLASS_TERMS`: the arguments and outputs over 4 KiB), `logsize_in` / `sizeclass_in` (the
argument term of each alone), `bothsize` (all four); a `_signed` suffix (`logsize_signed`, ...)
frees those terms' sign (`signed_terms`), so an argument may cost less as its buffer grows.

Seventeenth session: with `--xla-calls CACHE` (the XLA call counts of every configuration,
`benchmarks/collect_fusion_xla.py`, `fusion_xla_terms`), variants that add what XLA's CPU backend
made of each call to the shipped form: `xla` (all of `XLA_TERM_NAMES`), `xla=thunks+copies` (the
named ones, without their `xla_` prefix), each also `_signed`; `xlacv`: one XLA term (or none)
added to the shipped form, chosen per held-out fold by grouped cross-validation over the training
programs only (`--inner-folds`, mean per-graph MAPE; nested, as `cv`), so the choice among the
terms is held out too.

Twenty-first session: `calls15` adds `fusion_terms.CALL_GROWTH_TERMS` (the calls to the power 1.5);
variants join with `&` (`xla=ynn_reduce_fusions&calls15`: both added).

Per variant (`--splits`): leave one program out (every program of the folder), the program split and the random
split of `bench_costmodel.py` (`split_records`, test fraction 0.25, the seeds given): mean MAPE,
Kendall tau and level error over the test graphs, graphs over 5%, and the worst held-out graphs;
`all` fits on every graph and scores each in sample (a graph the form cannot fit even then is not
fixed by more data of the same kind).
Terms are computed once per file (`record_terms`); every fit is `fit_terms` on them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

MB = ("input_mb", "output_mb")
ARGS = ("kernel_inputs", "kernel_outputs")
# sixteenth session: buffer size terms added to the shipped form (names from `fusion_terms`)
SIZE_VARIANTS = {"logsize": ("kernel_input_log2_elements", "kernel_output_log2_elements"), "logsize_in": ("kernel_input_log2_elements",),
                 "sizeclass": ("large_kernel_inputs", "large_kernel_outputs"), "sizeclass_in": ("large_kernel_inputs",),
                 "bothsize": ("kernel_input_log2_elements", "kernel_output_log2_elements", "large_kernel_inputs", "large_kernel_outputs"),
                 "calls15": ("kernels_pow1_5",)}  # twenty-first session: fusion_terms.CALL_GROWTH_TERMS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--json", default="")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--variants", default="shipped,mb=1,args=1,mb=1+args=1,cv",
                        help="comma list: shipped, mb=R, args=R, mb=R+args=S, fixed (all of those over --grid), cv, cvargs, cvmb, " + ", ".join(SIZE_VARIANTS))
    parser.add_argument("--grid", default="0,0.5,1,2,3,4,8", help="ratios of the `fixed` variants (w_b / w_a)")
    parser.add_argument("--cv-grid", default="0,0.5,1,2,3,4", help="ratios the cv variants choose from")
    parser.add_argument("--inner-folds", type=int, default=5)
    parser.add_argument("--splits", default="lopo,program,random", help="comma list: lopo, program, random, all (in sample: fit and score on every graph)")
    parser.add_argument("--xla-calls", default="", help="XLA call cache (collect_fusion_xla.py): enables the xla variants")
    parser.add_argument("--watch", default="", help="comma list of graphs whose MAPE and level (median pred / runtime) to print, LOPO and in sample")
    args = parser.parse_args(argv)

    from cost_model.learned.data import split_records
    from cost_model.learned.fusion_additive import ALL_TERM_NAMES, CONV_OFFSET, AdditiveFusionModel
    from cost_model.learned.fusion_terms import SHIPPED_TERMS, TERM_NAMES, record_terms
    from cost_model.learned.fusion_xla_terms import XLA_TERM_NAMES, XlaCallCache, record_xla_terms
    from cost_model.learned.metrics import kernel_metrics
    from cost_model.learned.tpugraphs import load_dir

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import level_metrics

    records = load_dir(args.data)
    full_terms = [record_terms(r) for r in records]
    if args.xla_calls:  # rows of ALL_TERM_NAMES: TERM_NAMES then the XLA call counts
        with XlaCallCache(args.xla_calls) as cache:
            calls = cache.all_calls()
            full_terms = [np.concatenate([t, record_xla_terms(r, cache, calls)], axis=1) for t, r in zip(full_terms, records)]
    runtime = [np.asarray(r.config_runtime, dtype=np.float64) for r in records]
    programs = np.array([r.program for r in records])
    grid = [float(g) for g in args.cv_grid.split(",")]
    variants = []
    for name in args.variants.split(","):
        if name == "fixed":
            ratios = args.grid.split(",")
            name = ",".join(["shipped"] + [f"args={a}" for a in ratios] + [f"mb={m}" for m in ratios] + [f"mb={m}+args={a}" for m in ratios for a in ratios])
        variants += [v for v in name.split(",") if v not in variants]
    def added_terms(variant: str) -> tuple[str, ...]:
        if "&" in variant:  # parts joined: e.g. xla=ynn_reduce_fusions&calls15 (twenty-first session)
            return tuple(t for part in variant.removesuffix("_signed").split("&") for t in added_terms(part))
        base = variant.removesuffix("_signed")
        if base == "xlacv":
            if not args.xla_calls:
                parser.error(f"variant {variant} needs --xla-calls")
            return ()
        if base == "xla" or base.startswith("xla="):
            if not args.xla_calls:
                parser.error(f"variant {variant} needs --xla-calls")
            names = XLA_TERM_NAMES if base == "xla" else tuple(f"xla_{n}" for n in base[4:].split("+"))
            if set(names) - set(XLA_TERM_NAMES):
                parser.error(f"unknown XLA terms {sorted(set(names) - set(XLA_TERM_NAMES))}")
            return names
        return SIZE_VARIANTS.get(base, ())

    size_terms = {v: added_terms(v) for v in variants}
    model_terms = {v: SHIPPED_TERMS[:-1] + size_terms[v] + ("roofline_s",) for v in variants}  # the columns each variant's model reads
    model_signed = {v: CONV_OFFSET + (size_terms[v] if v.endswith("_signed") else ()) for v in variants}
    terms = [t[:, [TERM_NAMES.index(n) for n in SHIPPED_TERMS]] for t in full_terms]  # the shipped form's columns (the tie variants)
    all_terms, all_full, all_runtime = np.concatenate(terms), np.concatenate(full_terms), np.concatenate(runtime)
    row_graph = np.concatenate([np.full(len(t), i) for i, t in enumerate(terms)])
    counted = all_runtime >= 5e-6  # kernel_metrics' MAPE floor

    def fit(indices: list[int], ties: list[tuple[str, str, float]], names: tuple[str, ...] = SHIPPED_TERMS,
            signed: tuple[str, ...] = CONV_OFFSET) -> AdditiveFusionModel:
        model = AdditiveFusionModel(signed_terms=signed, tied_terms=ties, terms=names)
        columns = [ALL_TERM_NAMES.index(n) for n in names]
        return model.fit_terms(np.concatenate([full_terms[i][:, columns] for i in indices]), np.concatenate([runtime[i] for i in indices]))

    def choose_ties(train: list[int], pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str, float]]:
        """Each pair's ratio by grouped CV over the training programs (the joint grid)."""
        train_programs = sorted(set(programs[train]))
        order = np.random.default_rng(0).permutation(train_programs)
        folds = [set(order[k :: args.inner_folds]) for k in range(min(args.inner_folds, len(order)))]
        best, best_ties = np.inf, []
        for ratios in itertools.product(grid, repeat=len(pairs)):
            ties = [(*pair, r) for pair, r in zip(pairs, ratios)]
            errors = []
            for fold in folds:
                test_graphs = [i for i in train if programs[i] in fold]
                inner_train = np.isin(row_graph, [i for i in train if programs[i] not in fold])
                inner_test = np.isin(row_graph, test_graphs) & counted
                model = AdditiveFusionModel(signed_terms=CONV_OFFSET, tied_terms=ties).fit_terms(all_terms[inner_train], all_runtime[inner_train])
                error = np.abs(model.predict_terms(all_full[inner_test]) / all_runtime[inner_test] - 1.0)
                errors += [error[row_graph[inner_test] == i].mean() for i in test_graphs]  # per-graph MAPE
            if np.mean(errors) < best:
                best, best_ties = float(np.mean(errors)), ties
        return best_ties

    def inner_folds(train: list[int]) -> list[set]:
        order = np.random.default_rng(0).permutation(sorted(set(programs[train])))
        return [set(order[k :: args.inner_folds]) for k in range(min(args.inner_folds, len(order)))]

    def choose_xla_term(train: list[int]) -> tuple[str, ...]:
        """The one XLA term (or none) whose addition to the shipped form has the lowest grouped-CV
        per-graph MAPE over the training programs."""
        best, best_names = np.inf, ()
        for extra in [()] + [(t,) for t in XLA_TERM_NAMES]:
            names = SHIPPED_TERMS[:-1] + extra + ("roofline_s",)
            errors = []
            for fold in inner_folds(train):
                model = fit([i for i in train if programs[i] not in fold], [], names)
                for i in (i for i in train if programs[i] in fold):
                    keep = runtime[i] >= 5e-6
                    errors.append(np.abs(model.predict_terms(full_terms[i][keep]) / runtime[i][keep] - 1.0).mean())
            if np.mean(errors) < best - 1e-12:
                best, best_names = float(np.mean(errors)), extra
        return best_names

    def variant_ties(name: str, train: list[int]) -> list[tuple[str, str, float]]:
        if name == "shipped" or name.removesuffix("_signed") in SIZE_VARIANTS or name.startswith("xla") or "&" in name:
            return []
        if name == "cv":
            return choose_ties(train, (MB, ARGS))
        if name == "cvargs":
            return choose_ties(train, (ARGS,))
        if name == "cvmb":
            return choose_ties(train, (MB,))
        ties = []
        for part in name.split("+"):
            key, ratio = part.split("=")
            ties.append((*{"mb": MB, "args": ARGS}[key], float(ratio)))
        return ties

    splits: dict[str, list[tuple[list[int], list[int]]]] = {}
    everything = list(range(len(records)))
    for split in args.splits.split(","):
        if split == "all":  # in sample: fitted on every graph, scored on each (can the form fit a graph at all?)
            splits["all"] = [(everything, everything)]
        elif split == "lopo":
            splits["lopo"] = [([i for i in everything if programs[i] != p], [i for i in everything if programs[i] == p]) for p in sorted(set(programs))]
        else:
            for seed in [int(s) for s in args.seeds.split(",")]:
                splits[f"{split}{seed}"] = [split_records(records, split, test_fraction=0.25, seed=seed)]

    results: dict[str, dict] = {}
    for variant in variants:
        out: dict[str, dict] = {}
        for split_name, folds in splits.items():
            rows, chosen = [], []
            for train, test in folds:
                if variant == "xlacv":  # nested: the term chosen on the training programs alone
                    extra = choose_xla_term(train)
                    chosen.append(list(extra))
                    model = fit(train, [], SHIPPED_TERMS[:-1] + extra + ("roofline_s",))
                else:
                    ties = variant_ties(variant, train)
                    chosen.append([t[2] for t in ties])
                    model = fit(train, ties, model_terms[variant], model_signed[variant])
                for i in test:
                    pred = np.log(model.predict_terms(full_terms[i]))
                    keep = runtime[i] >= 5e-6
                    level = float(np.median(np.exp(pred)[keep] / runtime[i][keep])) if keep.any() else float("nan")
                    rows.append({"graph": records[i].name, "program": records[i].program, "level": level} | kernel_metrics(pred, runtime[i])
                                | level_metrics(pred, runtime[i]))
            out[split_name] = {"mape": float(np.mean([r["mape"] for r in rows])), "kendall": float(np.mean([r["kendall"] for r in rows])),
                               "level_error": float(np.mean([r["level_error"] for r in rows])), "over_5pct": sum(r["mape"] > 0.05 for r in rows),
                               "graphs": len(rows), "rows": rows, "ratios": chosen, "weights": dict(zip(model.terms, model.weights.tolist()))}
            worst = sorted(rows, key=lambda r: -r["mape"])[:6]
            print(f"{variant:>16} {split_name:>9}: MAPE {out[split_name]['mape']:.2%} tau {out[split_name]['kendall']:.3f} "
                  f"level {out[split_name]['level_error']:.2%} over 5% {out[split_name]['over_5pct']}/{len(rows)}"
                  + (f" ratios {chosen[0] if len(chosen) == 1 else sorted({tuple(c) for c in chosen})}" if variant.startswith("cv") else "")
                  + (f" chosen {sorted({'+'.join(c) or 'none': sum(x == c for x in chosen) for c in chosen}.items())}" if variant == "xlacv" else "")
                  + ("  worst " + ", ".join(f"{r['graph']} {r['mape']:.1%}" for r in worst) if split_name in ("lopo", "all") else ""), flush=True)
            watched = [r for r in rows if r["graph"] in set(args.watch.split(","))]
            if watched and split_name in ("lopo", "all"):
                print(f"{'':>16} {'':>9}  watch " + ", ".join(f"{r['graph']} {r['mape']:.1%} ({r['level']:.2f}x)" for r in watched), flush=True)
        for split in ("program", "random"):
            seeds = [v for k, v in out.items() if k.startswith(split)]
            if seeds:
                print(f"{variant:>16} {split:>9} mean of {len(seeds)} seeds: MAPE {np.mean([s['mape'] for s in seeds]):.2%} "
                      f"({', '.join(format(s['mape'], '.1%') for s in seeds)}) tau {np.mean([s['kendall'] for s in seeds]):.3f}", flush=True)
        results[variant] = out
    # a bound on any choice of the pairs' ratios: each held-out program's best fixed setting, chosen on that program itself
    fixed = [v for v in results if not v.startswith(("cv", "xla")) and "&" not in v and v.removesuffix("_signed") not in SIZE_VARIANTS and "lopo" in results[v]]
    if len(fixed) > 1:
        mape = {v: {r["graph"]: r["mape"] for r in results[v]["lopo"]["rows"]} for v in fixed}
        by_program: dict[str, list[str]] = {}
        for r in results[fixed[0]]["lopo"]["rows"]:
            by_program.setdefault(r["program"], []).append(r["graph"])
        graphs = sum(len(g) for g in by_program.values())
        per_program = sum(min(sum(mape[v][g] for g in gs) for v in fixed) for gs in by_program.values()) / graphs
        per_graph = float(np.mean([min(mape[v][g] for v in fixed) for gs in by_program.values() for g in gs]))
        print(f"bound over the {len(fixed)} fixed settings, leave one program out: the best setting per held-out program {per_program:.2%}, "
              f"per held-out graph {per_graph:.2%}")
        results["_bound"] = {"per_program": per_program, "per_graph": per_graph, "settings": fixed}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"data": Path(args.data).name, "grid": grid, "results": results}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
