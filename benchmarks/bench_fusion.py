"""Fusion speed: the `fuse` pass, the default fusion and the GO decoder, pure-Python vs compiled
cycle check, with a check that both give identical groups.

    PYTHONPATH=. python benchmarks/bench_fusion.py --workloads rnnlm-8:train resnet-50:train \\
        inception-v3:train --decoder rnnlm-8:train --repeats 3

For each workload (default sizes, built or loaded from ~/.cache/compiler-opt) and each engine
(`python`: `COMPILER_OPT_NO_JIT=1`; `numba`: the compiled search of passes/fusion/cycle_numba.py),
times, in one process, `run_pipeline(fuse)` and `apply_default_fusion` on fresh clones, and
`DecisionDecoder.decisions` on seeded random actions (2xV100). Medians of `--repeats` runs; the
numba compile is warmed up first (not timed). Every run's `node.fusion_group` (decoder: group
array) is compared with the Python engine's: `identical` must be yes. `--profile` prints the top
cProfile entries of one Python-engine `fuse`. Rows go to benchmarks/results/bench_fusion.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from compiler_opt.cli._render import Table, render_tables
from compiler_opt.policy import DecisionDecoder
from compiler_opt.workloads import build_workload
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem
from graph_ir.clone import clone_graph
from passes import run_pipeline
from passes.fusion import groups as fusion_groups
from passes.fusion.defaults import apply_default_fusion

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("python", "numba")


def _use_engine(engine: str) -> None:
    if engine == "python":
        os.environ[fusion_groups.NO_JIT_ENV] = "1"
    else:
        os.environ.pop(fusion_groups.NO_JIT_ENV, None)
    name = fusion_groups.select_cycle_engine(refresh=True)[0]
    if name != engine:
        raise SystemExit(f"bench_fusion: engine {engine!r} requested but {name!r} selected (is numba installed?)")


def _groups(graph) -> list[int | None]:  # type: ignore[no-untyped-def]
    return [node.fusion_group for node in graph]


def _time_graph_op(graph, op, repeats: int) -> tuple[float, list[int | None]]:  # type: ignore[no-untyped-def]
    times, result = [], []
    for _ in range(repeats):
        copy = clone_graph(graph)
        start = time.perf_counter()
        op(copy)
        times.append(time.perf_counter() - start)
        result = _groups(copy)
    return statistics.median(times), result


def _fuse(graph) -> None:  # type: ignore[no-untyped-def]
    run_pipeline(graph, "fuse")


def _default(graph) -> None:  # type: ignore[no-untyped-def]
    apply_default_fusion(graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=["rnnlm-8:train", "resnet-50:train"])
    parser.add_argument("--decoder", nargs="*", default=["rnnlm-8:train"], help="workloads to time the GO decoder on")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one Python-engine fuse per workload")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_fusion.json")
    args = parser.parse_args(argv)

    _use_engine("numba")  # warm the compile (cached on disk after the first run)
    warm = build_workload("rnnlm-8", "train")
    _fuse(clone_graph(warm))

    rows: list[dict[str, object]] = []
    for spec in args.workloads:
        name, _, mode = spec.partition(":")
        graph = build_workload(name, mode or "train")
        for label, op in (("fuse", _fuse), ("default-fusion", _default)):
            row: dict[str, object] = {"workload": spec, "nodes": len(graph), "op": label}
            reference = None
            for engine in ENGINES:
                _use_engine(engine)
                seconds, groups = _time_graph_op(graph, op, args.repeats)
                row[f"{engine}_s"] = seconds
                if reference is None:
                    reference = groups
                row["identical"] = groups == reference if engine != "python" else True
            row["groups"] = len({g for g in reference or [] if g is not None})
            rows.append(row)
            print(f"{spec} {label}: {row}", file=sys.stderr)
        if args.profile:
            _use_engine("python")
            profiler = cProfile.Profile()
            copy = clone_graph(graph)
            profiler.enable()
            _fuse(copy)
            profiler.disable()
            print(f"--- cProfile, Python engine, fuse on {spec}", file=sys.stderr)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(12)

    topology = load_topology("2xV100")
    for spec in args.decoder:
        name, _, mode = spec.partition(":")
        graph = build_workload(name, mode or "train")
        problem = SimulationProblem.from_graph(graph, topology)
        rng = np.random.default_rng(0)
        n = problem.num_nodes
        actions = np.stack([rng.integers(1, 3, n), rng.integers(0, 4, n), rng.integers(0, 8, n)], axis=1)
        row = {"workload": spec, "nodes": n, "op": "go-decode"}
        reference = None
        for engine in ENGINES:
            _use_engine(engine)
            decoder = DecisionDecoder(problem)
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                decisions = decoder.decisions(actions)
                times.append(time.perf_counter() - start)
            row[f"{engine}_s"] = statistics.median(times)
            if reference is None:
                reference = decisions.fusion_group
            row["identical"] = bool(np.array_equal(decisions.fusion_group, reference))
        row["groups"] = int(reference.max()) + 1 if reference is not None and reference.size else 0
        rows.append(row)
        print(f"{spec} go-decode: {row}", file=sys.stderr)
    _use_engine("numba")

    table = Table(
        title=f"Fusion speed, medians of {args.repeats} (shared 2-core machine, one process)",
        headers=["workload", "nodes", "op", "groups", "python s", "numba s", "speed-up", "identical"],
        numeric=frozenset({1, 3, 4, 5, 6}),
    )
    for row in rows:
        py, nb = float(row["python_s"]), float(row["numba_s"])  # type: ignore[arg-type]
        table.rows.append([str(row["workload"]), str(row["nodes"]), str(row["op"]), str(row["groups"]), f"{py:.3f}", f"{nb:.3f}", f"{py / nb:.1f}x", "yes" if row["identical"] else "NO"])
    render_tables([table])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.platform(), "repeats": args.repeats, "rows": rows}, indent=2))
    return 0 if all(row["identical"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
