"""Where the fusion labels' noise comes from: a few configurations of one graph timed twice under
several timing protocols, and how well the two passes agree.

    PYTHONPATH=. python benchmarks/bench_fusion_noise.py --graph mha@1 --configs 10 --json a.json
    PYTHONPATH=. python benchmarks/bench_fusion_noise.py --graph mha@1 --configs 10 --json b.json --compare a.json

Protocols (each a `Harness` run over the same configurations, interleaved rounds):
- `single`: one `plan.run` per sample, 5 rounds, 1 warm-up, min (the fifth session's collection);
- `single-med`: the same samples, median;
- `batch`: a sample loops `plan.run` until it lasts >= --sample-ms (time per call), 7 rounds, min;
- `batch-med`: the same samples, median;
- `batch-nogc`: `batch` with Python's garbage collector off while timing;
- `batch-ref` / `batch-ref-med`: `batch` with every sample divided by a reference sample (a
  fixed jitted matmul, or with --ref-graph a fixed fusion of another graph) timed right after it
  (the harness's `reference`), min / median; "ref-normalized" compares the ratios themselves.
`--xla-timing`: synchronous dispatch and one Eigen thread (`cost_model.measure.xla_timing`).
`--drift S`: instead, loop the first configuration for S seconds and print each tenth's min /
median time per run and the process's RSS (process-age drift, the native leak of raw execute).
Each protocol runs twice in this process (pass A, pass B, fresh harness and order each time);
`--compare` scores this process's pass A against another process's pass A (a fresh process).
Agreement: MAPE of pass B against pass A, Kendall tau over the configurations, and the ratio of
the slowest to the fastest configuration (to tell real spread from noise). A reference kernel (a
fixed matmul) is timed with every protocol so a frequency/load drift between passes shows.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    from scipy.stats import kendalltau

    return {"mape": float(np.mean(np.abs(b / a - 1.0))), "median_ape": float(np.median(np.abs(b / a - 1.0))),
            "tau": float(kendalltau(a, b).statistic), "spread": float(a.max() / a.min())}


def _rss_mib() -> float:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("nan")


def _drift(run, seconds: float, sample_s: float, settings: dict) -> int:
    """One configuration looped for `seconds`: does a process get slower (or leak) as it runs?"""
    from cost_model.measure.harness import batched

    runner = batched(run, sample_s)
    times: list[float] = []
    marks: list[tuple[int, float]] = []
    end = time.perf_counter() + seconds
    tenth = seconds / 10
    next_mark = time.perf_counter() + tenth
    while time.perf_counter() < end:
        began = time.perf_counter()
        runner()
        times.append((time.perf_counter() - began) / runner.number)
        if time.perf_counter() >= next_mark:
            marks.append((len(times), _rss_mib()))
            next_mark += tenth
    start = 0
    print(f"drift: xla timing {settings}; {runner.number} runs per sample")
    for index, (stop, rss) in enumerate(marks):
        part = np.array(times[start:stop]) * 1e6
        if part.size:
            print(f"{index:2d}  min {part.min():8.1f} us  median {np.median(part):8.1f} us  p90 {np.quantile(part, 0.9):8.1f} us  RSS {rss:7.1f} MiB")
        start = stop
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", default="mha@1")
    parser.add_argument("--configs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-ms", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=7, help="rounds of the batch protocols")
    parser.add_argument("--protocols", default="single,batch,batch-nogc")
    parser.add_argument("--xla-timing", action="store_true", help="sync dispatch + one Eigen thread (cost_model.measure.xla_timing)")
    parser.add_argument("--ref-graph", default="", help="reference: a fixed fusion of this graph (e.g. mlp@1) instead of a 128x128 matmul")
    parser.add_argument("--drift", type=float, default=0.0, metavar="SECONDS",
                        help="instead: loop the first configuration (batched) this long; per tenth: min / median time per run, RSS")
    parser.add_argument("--json", default="")
    parser.add_argument("--compare", default="")
    args = parser.parse_args(argv)
    settings = {"applied": False}
    if args.xla_timing:
        from cost_model.measure.xla_timing import configure_xla_timing

        settings = configure_xla_timing()

    from compiler_opt.costmodel.fusion_graphs import fusion_graphs
    from cost_model.decisions import node_order
    from cost_model.measure.harness import Harness, batched, per_call_timer, wall_timer
    from cost_model.profiling.calibration import GroupExecutor
    from passes.autotune.fusion import draw_fusions

    name, scale = args.graph.split("@")
    graph = fusion_graphs((int(scale),), names={args.graph})[args.graph]
    nodes = node_order(graph)
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{args.seed}:{args.graph}".encode()).digest()[:8], "little"))
    drawn = draw_fusions(graph, nodes, rng, args.configs)
    executor = GroupExecutor(graph, nodes, seed=args.seed)
    plans = {text: executor.plan(d) for text, d in drawn.items()}
    groups = {text: len(p.steps) for text, p in plans.items()}

    import jax
    import jax.numpy as jnp

    ref_a = jnp.asarray(np.random.default_rng(0).standard_normal((128, 128), dtype=np.float32))
    ref_fn = jax.jit(lambda x: x @ x)
    ref_fn(ref_a).block_until_ready()

    def reference() -> object:
        return ref_fn(ref_a).block_until_ready()

    if args.ref_graph:  # a reference of the workload's own kind: a fixed fusion of another graph
        ref_graph = fusion_graphs((int(args.ref_graph.split("@")[1]),), names={args.ref_graph})[args.ref_graph]
        ref_nodes = node_order(ref_graph)
        ref_drawn = draw_fusions(ref_graph, ref_nodes, np.random.default_rng(0), 1)
        reference = GroupExecutor(ref_graph, ref_nodes, seed=args.seed).plan(next(iter(ref_drawn.values()))).run  # noqa: F811

    if args.drift > 0:
        return _drift(next(iter(plans.values())).run, args.drift, args.sample_ms * 1e-3, settings)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
    results: dict[str, dict] = {"graph": args.graph, "configs": list(plans), "groups": [groups[t] for t in plans],
                                "threads": threads, "xla_timing": settings, "protocols": {}}
    texts = list(plans)
    for protocol in args.protocols.split(","):
        passes = []
        for which in range(2):
            began = time.perf_counter()
            if protocol.startswith("single"):
                runners = {t: plans[t].run for t in texts} | {"__ref__": reference}
                harness = Harness(timer=wall_timer, repeats=5, warmup=1, remeasure_top=3, retest_fraction=0.0, seed=args.seed + which)
            elif protocol.startswith("batch-ref"):
                runners = {t: batched(plans[t].run, args.sample_ms * 1e-3) for t in texts}
                harness = Harness(timer=per_call_timer, repeats=args.repeats, warmup=1, remeasure_top=3, retest_fraction=0.0, seed=args.seed + which,
                                  reference=batched(reference, args.sample_ms * 1e-3), statistic="median" if protocol.endswith("med") else "min")
            else:
                runners = {t: batched(plans[t].run, args.sample_ms * 1e-3) for t in texts} | {"__ref__": batched(reference, args.sample_ms * 1e-3)}
                harness = Harness(timer=per_call_timer, repeats=args.repeats, warmup=1, remeasure_top=3, retest_fraction=0.0, seed=args.seed + which)
            if protocol.endswith("nogc"):
                gc.collect()
                gc.disable()
            try:
                measured = harness.measure(args.graph, runners)
            finally:
                gc.enable()
            stat = "median_s" if protocol.endswith("med") else "min_s"
            values = [getattr(measured.measurements[t], stat) for t in texts]
            ref_value = harness.reference_s if harness.reference is not None else getattr(measured.measurements["__ref__"], stat)
            passes.append({"values": values, "ref": ref_value,
                           "seconds": time.perf_counter() - began,
                           "spread": [measured.measurements[t].median_s / measured.measurements[t].min_s - 1.0 for t in texts]})
        a, b = np.array(passes[0]["values"]), np.array(passes[1]["values"])
        row = {"passes": passes, "same_process": _agreement(a, b)}
        ra, rb = passes[0]["ref"], passes[1]["ref"]
        row["same_process_ref_normalized"] = _agreement(a / ra, b / rb)
        results["protocols"][protocol] = row
        print(f"{protocol:11s} same process: MAPE {row['same_process']['mape']:.3f} (median {row['same_process']['median_ape']:.3f}) "
              f"tau {row['same_process']['tau']:.3f}  spread {row['same_process']['spread']:.2f}x  ref {ra * 1e6:.1f}/{rb * 1e6:.1f} us  "
              f"ref-normalized tau {row['same_process_ref_normalized']['tau']:.3f}  "
              f"pass s {passes[0]['seconds']:.1f}/{passes[1]['seconds']:.1f}  within-config median/min-1 {np.median(passes[0]['spread']):.3f}")
    if args.compare:
        other = json.loads(Path(args.compare).read_text())
        for protocol, row in results["protocols"].items():
            if protocol not in other["protocols"]:
                continue
            a = np.array(other["protocols"][protocol]["passes"][0]["values"])
            b = np.array(row["passes"][0]["values"])
            agree = _agreement(a, b)
            ra, rb = other["protocols"][protocol]["passes"][0]["ref"], row["passes"][0]["ref"]
            normed = _agreement(a / ra, b / rb)
            row["fresh_process"] = agree
            row["fresh_process_ref_normalized"] = normed
            print(f"{protocol:11s} fresh process: MAPE {agree['mape']:.3f} (median {agree['median_ape']:.3f}) tau {agree['tau']:.3f}  "
                  f"ref-normalized MAPE {normed['mape']:.3f} tau {normed['tau']:.3f}")
    print(f"threads in process: {threads}; groups per config: {sorted(groups.values())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
