"""The tile autotuner against the exhaustive optimum, measured for real on a model's kernels.

    PYTHONPATH=. python benchmarks/bench_autotune_exhaustive.py examples/small_cnn.onnx [MORE MODELS] --budget 100 [--seed 0] [--max-flops 8e6]
    PYTHONPATH=. python benchmarks/bench_autotune_exhaustive.py --rescore SAVED.json --rankers NAME:FILE,...

For every dot/conv/reduce kernel of the model, the `budget` candidates `autotune` would rank
(`kernel_configs(space, seed, budget)`) are ALL compiled, checked against the unscheduled kernel
and timed in one interleaved harness pass (a fresh SQLite cache under benchmarks/results/, a
tenth re-timed for the noise floor). Then each ranker's order over the same candidates is
scored on those labels: the best of its top-5 (what `autotune` keeps) over the exhaustive best,
and how many measurements in its order reach 2% of the best, beside random search's expected
count. Rankers (`--rankers`): the shipped GraphSAGE model (`--ranker gnn`), the shipped XGBoost rank
model (`--ranker gbdt`) and the default `gbdt-ens` file (nineteenth session: added; it compiles each
candidate for its code features), or any ranker file as NAME:FILE (twentieth session: to score an
older file beside its refit on the same labels); none trained on these kernels' measurements
(small_cnn is not in the dataset's programs). Twenty-first session: also each ranker with the gate
(`tune_candidates(..., extra_k=--extra-k)`, run on the labels: the top-k, and `--extra-k` more when
the measured top-k disagree with the ranker's order). Prints a markdown table; writes
benchmarks/results/bench_autotune_exhaustive.json.

Twenty-fifth session: several model files in one run (their distinct kernels pooled), `--max-flops`
(each kernel scaled down the way `costmodel collect` scales the suite's, so kernels of models nobody
trained on can be timed at the dataset's sizes), each ranker's Kendall tau over the candidates, and
every label kept in the JSON (kind, dims, configurations, seconds) so that `--rescore JSON` scores
rankers on the same labels later without timing anything (a ranker fitted after the labels were
taken is scored on exactly them).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_autotune_exhaustive.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="*", help="model files (ONNX, HLO, ...); their distinct kernels are pooled")
    parser.add_argument("--max-flops", type=float, default=None,
                        help="scale each kernel down to at most this many FLOPs, as `costmodel collect --max-flops` does (default: real sizes)")
    parser.add_argument("--rescore", default=None, help="a JSON this bench wrote: score --rankers on its labels, timing nothing")
    parser.add_argument("--prefilters", default="", metavar="F,...",
                        help="also score each compiling ranker (gbdt-ens) behind the code-blind prefilter keeping these fractions of the "
                             "candidates, as `autotune --prefilter F` ranks (e.g. 0.5,0.75)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the SQLite cache beside --json of an interrupted run: the kernels it timed are read back, the rest are timed now "
                             "(default: a fresh cache, every label from this one run)")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--extra-k", type=int, default=5, help="the gate's extra measurements (0: no gate columns)")
    parser.add_argument("--json", default=str(RESULTS))
    parser.add_argument("--rankers", default="gnn,gbdt,gbdt-ens",
                        help="tile rankers to score, comma-separated: a ranker name (its shipped file; gbdt-ens is autotune's default) or "
                             "NAME:FILE (that file, e.g. an older model kept to compare in the same run on the same labels)")
    parser.add_argument("--timing-protocol", choices=("long", "short"), default=None,
                        help="how every candidate is timed (default: the tile default, long since the twenty-third session; before it the "
                             "autotuner timed single calls, 7 rounds)")
    args = parser.parse_args(argv)

    if bool(args.rescore) == bool(args.model):
        parser.error("give the model files to time, or --rescore JSON to score saved labels (one of the two)")

    import graph_ir
    from cost_model.learned.predictor import load_tile_ranker

    rankers = {}
    for entry in (e.strip() for e in args.rankers.split(",") if e.strip()):
        name, _, path = entry.partition(":")
        try:
            rankers[f"{name} ({Path(path).name})" if path else name] = load_tile_ranker(name, path or None)
        except (ValueError, OSError, graph_ir.CompilerOptError) as error:
            parser.error(f"--rankers {entry}: {error}")
    try:
        fractions = [float(f) for f in args.prefilters.split(",") if f.strip()]
    except ValueError:
        parser.error(f"--prefilters takes comma-separated fractions, got {args.prefilters!r}")
    if any(not 0.0 < f < 1.0 for f in fractions):
        parser.error(f"--prefilters must lie in (0, 1), got {args.prefilters!r}")
    from passes.autotune.tile import compiles_candidates

    prefiltered = [(f"{name} @prefilter {f:g}", name, f) for f in fractions for name, ranker in rankers.items() if compiles_candidates(ranker)]
    if fractions and not prefiltered:
        parser.error("--prefilters needs a ranker that compiles its candidates (gbdt-ens)")
    names = list(rankers) + [label for label, _, _ in prefiltered]
    if args.rescore:
        try:
            meta, labelled = _saved_labels(Path(args.rescore))
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"--rescore {args.rescore}: {error}")
    else:
        meta, labelled = _timed_labels(args)
        _write_json(Path(args.json), meta | {"rankers": [], "rows": [row for _, _, row in labelled]})  # the labels kept before any scoring
    rows_path = Path(args.rescore or args.json).with_suffix(".rows.npz")  # beside the labels: gbdt-ens config rows (compiled-code features) for later rescoring
    rows_cache = dict(np.load(rows_path)) if rows_path.is_file() else {}
    known = len(rows_cache)
    rows = []
    for space, candidates, row in labelled:
        _score(row, space, candidates, rankers, top_k=args.top_k, extra_k=args.extra_k, shared=rows_cache, prefiltered=prefiltered)
        rows.append(row)
        print(f"{row['kernel']}: {len(candidates)} configs, best {row['best_us']:.1f} us, spread {row['spread']:.1f}x; "
              + "; ".join(f"{n}: top-{args.top_k} +{row[n]['topk_slowdown']:.1%}, tau {row[n]['tau']:.2f}, {row[n]['meas_to_2pct']} meas."
                          + (f", gate +{row[n]['gate_slowdown']:.1%} in {row[n]['gate_measurements']}" if args.extra_k > 0 else "") for n in names)
              + f"; random {row['random_meas']:.1f} meas. ({row['measure_s']:.0f} s)", flush=True)
    if not rows:
        print("no dot/conv/reduce kernels in these models", file=sys.stderr)
        return 1
    if len(rows_cache) > known:
        scratch = rows_path.with_name(rows_path.name + ".tmp.npz")
        np.savez_compressed(scratch, **rows_cache)
        scratch.replace(rows_path)
    floor = meta["noise_floor"]
    print(f"\ntest-retest noise floor |min2/min1-1| over {floor['pairs']} pairs: median {floor['median']:.3f}, p90 {floor['p90']:.3f}")
    print(f"\n| ranker | kernels | best of top-{args.top_k} over exhaustive best (mean, max) | kernels within 2% | top-1 slowdown (mean) | "
          f"Kendall tau (mean) | meas. to <=2% (mean) | random meas. (mean) |"
          + (" gate: best over exhaustive (mean, max) | gate: within 2% | gate: measurements (mean) |" if args.extra_k > 0 else ""))
    print("|---|---:|---|---:|---:|---:|---:|---:|" + ("---|---:|---:|" if args.extra_k > 0 else ""))
    for name in names:
        slow = [r[name]["topk_slowdown"] for r in rows]
        print(f"| {name} | {len(rows)} | +{np.mean(slow):.1%}, +{max(slow):.1%} | {sum(s <= 0.02 for s in slow)} | {np.mean([r[name]['top1_slowdown'] for r in rows]):.1%} | "
              f"{np.mean([r[name]['tau'] for r in rows]):.3f} | {np.mean([r[name]['meas_to_2pct'] for r in rows]):.1f} | {np.mean([r['random_meas'] for r in rows]):.1f} |"
              + (f" +{np.mean([r[name]['gate_slowdown'] for r in rows]):.1%}, +{max(r[name]['gate_slowdown'] for r in rows):.1%} | "
                 f"{sum(r[name]['gate_slowdown'] <= 0.02 for r in rows)} | {np.mean([r[name]['gate_measurements'] for r in rows]):.1f} |" if args.extra_k > 0 else ""))
    for key in ("kind", "model"):
        if len({r.get(key) for r in rows}) > 1:
            print(group_table(rows, names, key, args.top_k))
    _write_json(Path(args.json), meta | {"rankers": names, "rows": rows})
    return 0


def _write_json(out: Path, content: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(out.name + ".tmp")
    scratch.write_text(json.dumps(content, indent=1), encoding="utf-8")
    scratch.replace(out)


def group_table(rows: list[dict], rankers: list[str], key: str, top_k: int) -> str:
    """Per `key` (kind or model) and ranker: mean Kendall tau / mean best-of-top-k slowdown / kernels within 2%."""
    groups = sorted({str(r.get(key)) for r in rows})
    lines = [f"\nby {key}: mean tau / best of top-{top_k} over the exhaustive best (mean) / kernels within 2%\n",
             f"| ranker | {' | '.join(f'{g} ({sum(str(r.get(key)) == g for r in rows)})' for g in groups)} |",
             "|---|" + "---|" * len(groups)]
    for name in rankers:
        cells = []
        for group in groups:
            mine = [r[name] for r in rows if str(r.get(key)) == group]
            cells.append(f"{np.mean([m['tau'] for m in mine]):.2f} / +{np.mean([m['topk_slowdown'] for m in mine]):.1%} / "
                         f"{sum(m['topk_slowdown'] <= 0.02 for m in mine)}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _timed_labels(args: argparse.Namespace) -> tuple[dict, list]:
    """Every candidate of every distinct kernel of the models, compiled, checked and timed in one pass."""
    import graph_ir
    from cost_model.measure.harness import noise_floor
    from cost_model.measure.tile.collect import TILE_PROTOCOL, kernel_configs, protocol_named, tile_harness
    from cost_model.measure.tile.kernels import build_kernel
    from cost_model.measure.tile.shapes import _nodes, kernels_from_node, scale_to_budget
    from cost_model.measure.tile.space import TileSpace
    from cost_model.profiling.cache import ProfileCache
    from passes import run_pipeline
    from passes.autotune.search import random_search_measurements
    from passes.autotune.tile import TileTuner, tvm_threads

    specs = {}
    for model in args.model:
        graph = run_pipeline(graph_ir.load(model), "shape-infer").graph
        for node in _nodes(graph):
            spec = kernels_from_node(node)
            if spec is not None and args.max_flops is not None:
                spec = scale_to_budget(spec, args.max_flops)
            if spec is not None:
                specs.setdefault(spec.signature, (spec, Path(model).name))
    protocol = protocol_named(args.timing_protocol) if args.timing_protocol else TILE_PROTOCOL
    cache_path = Path(args.json).with_suffix(".sqlite")
    if not args.resume:
        cache_path.unlink(missing_ok=True)  # every label from this one run
    labelled, retest = [], []
    with ProfileCache(str(cache_path)) as cache:
        harness = tile_harness(cache, protocol=protocol, threads=tvm_threads(), retest_fraction=0.1, seed=args.seed)
        tuner = TileTuner(None, harness, budget=args.budget, top_k=args.top_k, seed=args.seed, sample_s=protocol.sample_s)
        from tqdm import tqdm

        for signature, (spec, model) in tqdm(specs.items(), desc="kernels timed", unit="kernel", file=sys.stderr):
            space = TileSpace(build_kernel(spec))
            candidates = kernel_configs(space, args.seed, args.budget)
            began = time.perf_counter()
            seconds = np.array(tuner.measure(space, candidates))
            measure_s = time.perf_counter() - began
            retest += [cache_pair for c in candidates if (cache_pair := _retest(harness, signature, c.text())) is not None]
            labelled.append((space, candidates, {
                "kernel": signature, "model": model, "kind": spec.kind, "dims": list(spec.dims), "candidates": len(candidates),
                "best_us": float(seconds.min() * 1e6), "spread": float(seconds.max() / seconds.min()),
                "random_meas": random_search_measurements(seconds, seconds.min() * 1.02, seed=args.seed), "measure_s": measure_s,
                "configs": [c.text() for c in candidates], "seconds": seconds.tolist()}))
    meta = {"model": list(args.model), "max_flops": args.max_flops, "budget": args.budget, "seed": args.seed,
            "timing_protocol": protocol.name, "noise_floor": noise_floor(retest), "resumed": bool(args.resume)}
    return meta, labelled


def _saved_labels(path: Path) -> tuple[dict, list]:
    """The labels a timed run kept, with each kernel's candidates rebuilt (and checked to be the same ones)."""
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    saved = json.loads(path.read_text(encoding="utf-8"))
    labelled = []
    for row in saved["rows"]:
        if "seconds" not in row:
            raise ValueError(f"row {row.get('kernel')!r} has no labels (written before the twenty-fifth session); time it again")
        space = TileSpace(build_kernel(KernelSpec(row["kind"], tuple(row["dims"]))))
        candidates = kernel_configs(space, saved["seed"], saved["budget"])
        if [c.text() for c in candidates] != row["configs"]:
            raise ValueError(f"kernel {row['kernel']}: this checkout draws other candidates than the saved ones (the tile space changed)")
        keep = {k: v for k, v in row.items() if k in ("kernel", "model", "kind", "dims", "candidates", "best_us", "spread", "random_meas",
                                                       "measure_s", "configs", "seconds")}
        labelled.append((space, candidates, keep))
    return {k: v for k, v in saved.items() if k not in ("rows", "rankers")} | {"rescored_from": str(path)}, labelled


def _score(row: dict, space: object, candidates: list, rankers: dict, *, top_k: int, extra_k: int, shared: dict | None = None,
           prefiltered: list[tuple[str, str, float]] = ()) -> None:
    """Each ranker's order over the candidates, scored on the row's labels (in place); `prefiltered`:
    (label, ranker name, fraction) rows of a compiling ranker behind the code-blind prefilter."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling script, also when loaded as a module
    from bench_costmodel import tuner_measurements
    from cost_model.learned.metrics import kendall_tau, top_k_slowdown
    from passes.autotune.search import tune_candidates

    seconds = np.asarray(row["seconds"])
    shared = {} if shared is None else shared  # config rows by kernel and code feature set: each candidate compiled once
    orders = {name: np.asarray(_ranked(ranker, space, candidates, shared, row["kernel"])) for name, ranker in rankers.items()}
    if prefiltered:
        from passes.autotune.tile import prefilter_keep, prefiltered_scores

        first = _code_blind().rank(space, candidates)
        for label, name, fraction in prefiltered:  # the kept ones keep their scores: right for feature sets without "+z" columns
            keep = prefilter_keep(len(candidates), fraction, top_k + extra_k)
            orders[label] = prefiltered_scores(first, lambda kept, full=orders[name]: full[kept], keep) if keep < len(candidates) else orders[name]
    for name, scores in orders.items():
        row[name] = {"topk_slowdown": top_k_slowdown(scores, seconds, top_k), "top1_slowdown": top_k_slowdown(scores, seconds, 1),
                     "tau": kendall_tau(scores, seconds), "meas_to_2pct": tuner_measurements(scores, seconds)}
        if extra_k > 0:  # the autotuner's own step on these labels
            gated = tune_candidates(list(range(len(candidates))), rank=lambda _, s=scores: s, measure=lambda idx, s=seconds: [float(s[i]) for i in idx],
                                    top_k=top_k, extra_k=extra_k)
            row[name] |= {"gate_slowdown": float(gated.best_seconds / seconds.min() - 1), "gate_measurements": gated.measurements,
                          "gate_agreement": gated.agreement}


@functools.lru_cache(maxsize=1)
def _code_blind() -> object:
    """The packaged code-blind ranker `autotune` prefilters with, loaded once per run."""
    from cost_model.learned.predictor import load_tile_ranker

    return load_tile_ranker("gbdt", None)


def _ranked(ranker: object, space: object, candidates: list, shared: dict[str, np.ndarray], kernel: str = "") -> np.ndarray:
    """`ranker.rank(space, candidates)`; a gbdt-ens ranker reads its config rows (compiled-code features
    included) from `shared` when another one with the same feature set has built them (for this kernel,
    on this host: the rows file beside the JSON is this host's)."""
    members = getattr(ranker, "members", None)
    if not members or not hasattr(ranker, "rank_rows"):
        return ranker.rank(space, candidates)
    from cost_model.measure.tile.dataset import kernel_graph

    extra = members[0].extra
    key = f"{kernel}|{extra.get('code_feature_set', 's16') if extra.get('code_features') else 'none'}"
    if key not in shared:
        shared[key] = members[0].config_rows(space, candidates)
    feats, opcodes, _ = kernel_graph(space.kernel)
    return ranker.rank_rows(feats, opcodes, shared[key], kind=space.kernel.spec.kind)


def _retest(harness, signature: str, config: str) -> tuple[float, float] | None:  # noqa: ANN001 - a Harness
    first, again = harness.cached(signature, config), harness.cached_retest(signature, config)
    return (harness.value(first), harness.value(again)) if first is not None and again is not None else None


if __name__ == "__main__":
    sys.exit(main())
