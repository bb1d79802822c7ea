"""Does a float32 ranker order another element type's tile configurations? (bf16 / f16 / f64 kernels)

The tile rankers were fitted on float32 kernels only; since the thirty-first session the tuner builds
an op's kernel in its own element types and ranks the candidates as the kernel's float32 twin (the same
loop nest and knobs). This measures how well that works. For each kernel (synthetic shapes of every
kind in the datasets' FLOP budget, `--synthetic N --synthetic-seed S`, and the bf16 dots / convs /
reductions of model files given as arguments, scaled to the same budget), the same `--configs` random
configurations are timed as float32 and as each `--dtypes` type (long protocol, one harness), and
ranked once by the tuner's ranker on the float32 twin. Per type, over kernels:

- Kendall tau between the float32 and the type's own labels (how much the type reorders the space);
- Kendall tau and top-1 slowdown of the ranker against each type's labels;
- the tuner's answer (the fastest of the ranker's top k, `--top-k`, the tuner's default, and of its
  top 2k) over the best of all timed configurations, minus 1.
With `--rank-own` the same ranker also ranks each type's candidates on the type's own compiled code
(its code features read the bf16 / f16 instructions; its other features are the twin's).

    PYTHONPATH=. python benchmarks/bench_tile_dtypes.py --synthetic 12 --synthetic-seed 31 --dtypes bfloat16,float16 \
        ../shared/testdata/external/hlo/<llm dump>.hlo --configs 30 --cache out/s31/dtypes.sqlite --json out/s31/dtypes.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np


def kernels_of(paths: list[str], max_flops: float, limit: int) -> list:
    """Distinct kernels (float32 twins) of the non-float32 dot / conv / reduce ops of model files, scaled to the budget."""
    import graph_ir
    from cost_model.measure.tile.shapes import _nodes, kernels_from_node, scale_to_budget
    from passes.autotune.tile import kernel_types

    found = {}
    for path in paths:
        for node in _nodes(graph_ir.load(path)):
            spec = kernels_from_node(node, Path(path).name)
            types = kernel_types(node) if spec is not None else None
            if spec is None or isinstance(types, str) or types == ("float32", ""):
                continue
            scaled = scale_to_budget(spec, max_flops)
            if scaled is not None:
                found.setdefault(scaled.signature, scaled)
    return list(found.values())[:limit]


def _scored(scores: np.ndarray, labels: np.ndarray, top_k: int) -> dict[str, float]:
    """Ranker tau, top-1 slowdown, and the tuner's answer (fastest of the top k, of the top 2k) over the best, minus 1."""
    from cost_model.learned.metrics import kendall_tau

    order = np.argsort(scores, kind="stable")
    best = float(labels.min())
    return {"tau_ranker": kendall_tau(scores, labels), "top1": float(labels[order[0]] / best - 1),
            "tuner": float(labels[order[:top_k]].min() / best - 1), "tuner_2k": float(labels[order[: 2 * top_k]].min() / best - 1)}


def command_line() -> argparse.ArgumentParser:
    """This benchmark's command line (`bench_tile_type_ranker.py` reads a run's seed back through it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model files whose non-float32 kernels are measured too")
    parser.add_argument("--synthetic", type=int, default=12, help="synthetic kernels (every kind, the datasets' budget)")
    parser.add_argument("--synthetic-seed", type=int, default=31)
    parser.add_argument("--model-kernels", type=int, default=8, help="at most this many kernels from the model files")
    parser.add_argument("--dtypes", default="bfloat16", help="comma-separated element types besides float32")
    parser.add_argument("--configs", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=None, help="the tuner's k (default: TILE_TOP_K)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default="out/tile_dtypes.sqlite")
    parser.add_argument("--rank-own", action="store_true", help="also rank each type's candidates by its own compiled code (same ranker)")
    parser.add_argument("--json", help="write every kernel's row here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)

    from tqdm import tqdm

    from cost_model.learned.metrics import kendall_tau
    from cost_model.learned.predictor import load_tile_ranker, tile_ranker_for
    from cost_model.measure.tile.collect import collect_kernel, kernel_configs, tile_harness
    from cost_model.measure.tile.kernels import build_kernel
    from cost_model.measure.tile.space import TileSpace
    from cost_model.measure.tile.synthetic import synthetic_kernels
    from cost_model.profiling.cache import ProfileCache
    from passes.autotune.tile import TILE_TOP_K

    top_k = TILE_TOP_K if args.top_k is None else args.top_k
    dtypes = [d for d in args.dtypes.split(",") if d]
    specs = [s.float32_twin for s in kernels_of(args.models, 8e6, args.model_kernels)] + synthetic_kernels(args.synthetic, seed=args.synthetic_seed)
    ranker = load_tile_ranker(tile_ranker_for(None, None), None)
    rows = []
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    with ProfileCache(args.cache) as cache:
        harness = tile_harness(cache)
        for spec in tqdm(specs, desc="kernels", unit="kernel"):
            twin = TileSpace(build_kernel(spec))
            configs = kernel_configs(twin, args.seed, args.configs)
            scores = np.asarray(ranker.rank(twin, configs), dtype=np.float64)
            row = {"kernel": spec.signature, "kind": spec.kind, "dims": list(spec.dims), "source": spec.source, "labels": {},
                   "scores": {"twin": scores.tolist()}}
            for dtype in ["float32", *dtypes]:
                typed = replace(spec, dtype=dtype)
                result = collect_kernel(typed, harness, configs=0, extra=configs)
                timed = {c.text(): harness.value(result.measured.measurements[c.text()]) for c in result.configs}
                row["labels"][dtype] = [timed.get(c.text(), float("nan")) for c in configs]
                if args.rank_own and dtype != "float32":  # the same ranker, shown the type's own compiled code
                    row["scores"][f"own:{dtype}"] = np.asarray(ranker.rank(TileSpace(build_kernel(typed)), configs), dtype=np.float64).tolist()
            keep = np.all([np.isfinite(row["labels"][d]) for d in row["labels"]], axis=0)
            base = np.asarray(row["labels"]["float32"])[keep]
            for dtype, labels in row["labels"].items():
                y = np.asarray(labels)[keep]
                row[dtype] = {"tau_vs_float32": kendall_tau(base, y)} | _scored(np.asarray(row["scores"]["twin"])[keep], y, top_k)
                if f"own:{dtype}" in row["scores"]:
                    row[dtype]["own"] = _scored(np.asarray(row["scores"][f"own:{dtype}"])[keep], y, top_k)
            rows.append(row)
            tqdm.write(f"{spec.signature:48s} " + "  ".join(
                f"{d}: tau(f32) {row[d]['tau_vs_float32']:.2f} ranker {row[d]['tau_ranker']:.2f} top-1 {row[d]['top1']:.1%} tuner {row[d]['tuner']:.1%}"
                + (f" (own code: tuner {row[d]['own']['tuner']:.1%})" if "own" in row[d] else "") for d in dtypes))
    print(f"\n{len(rows)} kernels, {args.configs} configurations each, the tuner's k = {top_k}; means over kernels:")
    print("| element type | ranked as | tau vs float32 labels | ranker tau | ranker top-1 | tuner, top k | within 2% | tuner, top 2k | within 2% |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for dtype in ["float32", *dtypes]:
        for name, get in (("float32 twin", lambda r: r[dtype]), ("own code", lambda r: r[dtype].get("own"))):
            got = [get(r) for r in rows]
            if any(g is None for g in got):
                continue
            mean = {k: float(np.mean([g[k] for g in got])) for k in ("tau_ranker", "top1", "tuner", "tuner_2k")}
            near = {k: float(np.mean([g[k] <= 0.02 for g in got])) for k in ("tuner", "tuner_2k")}
            tau32 = np.mean([r[dtype]["tau_vs_float32"] for r in rows])
            print(f"| {dtype} | {name} | {tau32:.3f} | {mean['tau_ranker']:.3f} | {mean['top1']:.1%} | {mean['tuner']:.2%} | {near['tuner']:.0%} "
                  f"| {mean['tuner_2k']:.2%} | {near['tuner_2k']:.0%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "top_k": top_k, "rows": rows}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
