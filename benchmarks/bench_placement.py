"""Placement methods compared: the tables of benchmarks/RESULTS.md.

Presets (`--preset`, repeatable) run the three studies of RESULTS.md; `--workloads` and the other
options are `compiler-opt bench`'s and replace the presets' choices.

    python benchmarks/bench_placement.py --preset profiled    # throughput-inputs/LayerGraphs, k=6, throughput
    python benchmarks/bench_placement.py --preset latency     # latency-inputs/LayerGraphs, latency
    python benchmarks/bench_placement.py --preset suite       # the workload suite at 2/4/8 x V100, latency
    python benchmarks/bench_placement.py --workloads resnet-50:inference --methods dp,sa --devices 4xV100

Writes the rows to benchmarks/results/bench_placement_<preset>.json (or --json) and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from compiler_opt.cli._render import render_tables
from compiler_opt.cli.bench_lib import BenchSpec, bench_tables, run_bench

ROOT = Path(__file__).resolve().parent.parent
PLACEMENT = ROOT.parent / "shared" / "testdata" / "placement"
SUITE = ["wavenet-2x18:inference", "densenet-121:inference", "rnnlm-2:inference", "transformer-xl:inference", "resnet-50:inference"]


def preset(name: str) -> BenchSpec:
    if name == "profiled":
        files = sorted((PLACEMENT / "throughput-inputs" / "LayerGraphs").glob("*.json"))
        return BenchSpec([str(f) for f in files], objective="throughput", expert=str(PLACEMENT / "human-experts"))
    if name == "latency":
        files = sorted((PLACEMENT / "latency-inputs" / "LayerGraphs").glob("*.json"))
        return BenchSpec([str(f) for f in files], objective="latency", expert=str(PLACEMENT / "human-experts"))
    if name == "suite":
        return BenchSpec(list(SUITE), objective="latency")
    raise SystemExit(f"unknown preset {name!r} (profiled, latency, suite)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", action="append", choices=("profiled", "latency", "suite"))
    parser.add_argument("--workloads", nargs="+")
    parser.add_argument("--devices", nargs="+")
    parser.add_argument("--methods", nargs="+")
    parser.add_argument("--objective", choices=("latency", "throughput", "memory"))
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--expert")
    parser.add_argument("--costs", default="roofline", help="kernel cost source (cost_model.costs): roofline | profiled | recorded")
    parser.add_argument("--no-default-fusion", action="store_true", help="place and score the op-by-op graph (as RESULTS.md sections c and d were made)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    specs = [(name, preset(name)) for name in args.preset or []]
    if args.workloads:
        specs = [("custom", BenchSpec(list(args.workloads)))]
    if not specs:
        parser.error("give --preset or --workloads")
    for name, spec in specs:
        spec.budget, spec.time_limit_s = args.budget, args.time_limit
        spec.devices = args.devices or spec.devices
        spec.methods = args.methods or spec.methods
        spec.objective = args.objective or spec.objective
        spec.expert = args.expert or spec.expert
        spec.costs = args.costs
        spec.default_fusion = not args.no_default_fusion
        rows = run_bench(spec)
        render_tables(bench_tables(rows))
        out = Path(args.json) if args.json and len(specs) == 1 else ROOT / "benchmarks" / "results" / f"bench_placement_{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": platform.platform(), "budget": spec.budget, "rows": rows}, indent=2))
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
