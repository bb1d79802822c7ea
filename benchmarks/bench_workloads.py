"""The workload suite on a topology: node counts, build times and simulated step times.

For every workload and mode at default sizes: nodes, the time to build it (lower + import; a
cached build only imports), and on `--devices` (default 4xV100) the simulated step time with
everything on the fastest device, the lower bound, and a naive 4-way pipeline split (the node
order cut into equal contiguous chunks over the GPUs) with the bytes it moves.

    python benchmarks/bench_workloads.py                 # table + benchmarks/results/bench_workloads.json
    python benchmarks/bench_workloads.py --skip-slow     # without Inception-V3 and DenseNet-121
    python benchmarks/bench_workloads.py --only resnet-50 bert-base
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from compiler_opt.cli.simulate_lib import fastest_device
from compiler_opt.workloads import build_workload, list_workloads
from compiler_opt.workloads.registry import is_cached
from cost_model.decisions import Decisions
from cost_model.devices import load_topology
from cost_model.lower_bound import step_time_lower_bound
from cost_model.simulator import SimulationProblem, simulate


def _split_decisions(problem: SimulationProblem, gpus: list[int]) -> Decisions:
    chunks = np.array_split(np.arange(problem.num_nodes), len(gpus))
    device = np.empty(problem.num_nodes, dtype=np.int32)
    for chunk, gpu in zip(chunks, gpus):
        device[chunk] = gpu
    return Decisions(device, np.full(problem.num_nodes, -1), np.zeros(problem.num_nodes))


def run_one(name: str, mode: str, devices: str) -> dict:
    cached = is_cached(name, mode)
    start = time.perf_counter()
    graph = build_workload(name, mode)
    build_s = time.perf_counter() - start
    topology = load_topology(devices)
    problem = SimulationProblem.from_graph(graph, topology)
    single = Decisions.default(problem.num_nodes, fastest_device(topology))
    start = time.perf_counter()
    result = simulate(problem, single)
    simulate_s = time.perf_counter() - start
    gpus = [i for i, d in enumerate(topology.devices) if d.kind != "cpu"] or [0]
    split = simulate(problem, _split_decisions(problem, gpus))
    return {
        "workload": name,
        "mode": mode,
        "nodes": problem.num_nodes,
        "build_s": build_s,
        "cached": cached,
        "simulate_s": simulate_s,
        "step_time_s": result.step_time_s,
        "lower_bound_s": step_time_lower_bound(problem),
        "peak_memory_bytes": int(result.peak_memory_bytes.max()),
        "oom": result.any_oom,
        "split_step_time_s": split.step_time_s,
        "split_bytes_moved": int(split.bytes_moved),
        "split_oom": split.any_oom,
    }


def _table(rows: list[dict], devices: str) -> str:
    header = f"{'workload':<15} {'mode':<9} {'nodes':>6} {'build s':>8} {'step ms':>9} {'bound ms':>9} {'peak MiB':>9} {'split4 ms':>10} {'moved MiB':>10}"
    lines = [f"workloads on {devices} (step: all on the fastest device; split4: contiguous 4-way split)", header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['workload']:<15} {r['mode']:<9} {r['nodes']:>6} {r['build_s']:>7.1f}{'c' if r['cached'] else ' '} "
            f"{r['step_time_s'] * 1e3:>9.2f} {r['lower_bound_s'] * 1e3:>9.3f} {r['peak_memory_bytes'] / 2**20:>9.1f} "
            f"{r['split_step_time_s'] * 1e3:>10.2f} {r['split_bytes_moved'] / 2**20:>10.1f}"
        )
    lines.append("(build s marked c: imported from the cache)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="4xV100")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these workloads only")
    parser.add_argument("--skip-slow", action="store_true", help="skip workloads marked slow (TF, torch export)")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_workloads.json")
    args = parser.parse_args(argv)
    rows = []
    for workload in list_workloads():
        if (args.only and workload.name not in args.only) or (args.skip_slow and workload.slow):
            continue
        for mode in workload.modes:
            rows.append(run_one(workload.name, mode, args.devices))
            print(f"  {workload.name} {mode}: {rows[-1]['nodes']} nodes", file=sys.stderr, flush=True)
    print(_table(rows, args.devices))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"devices": args.devices, "python": platform.python_version(), "machine": platform.machine(), "results": rows}
    args.json.write_text(json.dumps(payload, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
