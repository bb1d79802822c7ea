"""Placement methods compared: the tables of benchmarks/RESULTS.md.

Presets (`--preset`, repeatable) run the three studies of RESULTS.md; `--workloads` and the other
options are `compiler-opt bench`'s and replace the presets' choices.

    python benchmarks/bench_placement.py --preset profiled    # throughput-inputs/LayerGraphs, k=6, throughput
    python benchmarks/bench_placement.py --preset latency     # latency-inputs/LayerGraphs, latency
    python benchmarks/bench_placement.py --preset suite       # the workload suite at 2/4/8 x V100, latency
    python benchmarks/bench_placement.py --workloads resnet-50:inference --methods dp,sa --devices 4xV100

Suite workloads are built at their paper sizes (`Workload.paper_sizes`); `--default-sizes` builds
the small sizes instead. `sa` and `random` get `--budget` evaluations, raised to the slowest other
method's wall time in the cell (`--no-equal-time` turns that off). The JSON is rewritten after
every row, so an interrupted run keeps what it finished.

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
from graph_ir.io.atomic import atomic_path

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


def _write(path: Path, data: dict) -> None:
    """Replace `path` atomically: a reader (or a crash) never sees half a file."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2))


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
    parser.add_argument("--fusion-aware", action="store_true", help="methods score the default fusion kept within each device (not the unfused graph)")
    parser.add_argument("--default-sizes", action="store_true", help="suite workloads at their small default sizes instead of the paper sizes")
    parser.add_argument("--no-equal-time", action="store_true", help="sa/random get exactly --budget evaluations (no equal-time rule)")
    parser.add_argument("--max-nodes", type=int, help="graphs above this many nodes get an error row saying so instead of a run")
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
        spec.fusion_aware = args.fusion_aware
        spec.paper_sizes = not args.default_sizes
        spec.equal_time = not args.no_equal_time
        spec.max_nodes = args.max_nodes
        out = Path(args.json) if args.json and len(specs) == 1 else ROOT / "benchmarks" / "results" / f"bench_placement_{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        header = {"machine": platform.platform(), "budget": spec.budget, "paper_sizes": spec.paper_sizes, "equal_time": spec.equal_time}
        partial: list[dict] = []

        def save(row: dict, *, out: Path = out, header: dict = header, partial: list = partial) -> None:
            partial.append(row)
            _write(out, {**header, "complete": False, "rows": partial})

        rows = run_bench(spec, on_row=save)
        _write(out, {**header, "complete": True, "rows": rows})
        render_tables(bench_tables(rows))
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
