"""Zero-shot with the joint variants of its fastest candidates (rl/trainer.zero_shot's `joint`).

    PYTHONPATH=. taskset -c 0 python benchmarks/bench_go_joint.py --paper-sizes \\
        --workloads rnnlm-2:inference resnet-50:inference --counts 0 1 4 8

Per (workload, devices) cell, the shipped checkpoint (or `--checkpoint`), one torch thread:
`zero_shot(policy, env, samples, joint=k)` for each k of `--counts`: the greedy answer, the
sampled episodes, every round, the smoothed / coarsened / partitioned decodings, and then the
joint variants (rl/joint.py: fusion merged beyond the default, priorities by bottom level) of
the k fastest distinct placements among them. k = 0 is RESULTS.md h14's zero-shot. Ratios to the
human-expert reference (the `bench_go.py` cells), geometric means over all cells and over the
`--held-out` workloads, CPU seconds per call. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import geometric_mean, median

import torch

from compiler_opt.policy import load_checkpoint
from compiler_opt.rl import GraphEnvironment, load_graph, zero_shot
from cost_model.devices.loader import load_topology

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ("inception-v3:inference", "amoebanet:inference", "rnnlm-8:inference", "gnmt-8:inference")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(HELD_OUT))
    parser.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    parser.add_argument("--paper-sizes", action="store_true")
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--samples", type=int, default=8, help="sampled episodes beside the greedy one (bench_go's default)")
    parser.add_argument("--counts", nargs="+", type=int, default=[0, 1, 4, 8], help="how many fastest candidates get joint variants (0: none)")
    parser.add_argument("--held-out", nargs="*", default=list(HELD_OUT), help="workloads whose geometric mean is also reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "go_joint.json"))
    args = parser.parse_args(argv)
    if any(k < 0 for k in args.counts):
        parser.error("--counts must be >= 0")
    torch.set_num_threads(1)
    policy, _ = load_checkpoint(None if args.checkpoint == "default" else args.checkpoint)
    policy.eval()
    rows = []
    for spec in args.workloads:
        name, graph = load_graph(spec, paper=args.paper_sizes)
        for devices in args.devices:
            env = GraphEnvironment(name, graph, load_topology(devices))
            row: dict = {"workload": spec, "devices": devices, "nodes": env.problem.num_nodes}
            for k in args.counts:
                began = time.process_time()
                found = zero_shot(policy, env, args.samples, seed=args.seed, joint=k)
                row[f"joint={k}"] = found.score.step_time_s / env.reference_step_s
                row[f"joint={k}_s"] = time.process_time() - began
                row[f"joint={k}_evaluations"] = found.evaluations
            rows.append(row)
            print(f"{spec}@{devices} ({row['nodes']} nodes): " + "  ".join(f"k={k} {row[f'joint={k}']:.3f}x ({row[f'joint={k}_s']:.1f} s)" for k in args.counts), flush=True)
    columns = [f"joint={k}" for k in args.counts]
    print("\n| workload | devices | nodes | " + " | ".join(columns) + " |")
    print("|---|---|---|" + "---|" * len(columns))
    for row in rows:
        print(f"| {row['workload']} | {row['devices']} | {row['nodes']} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    summary = {}
    for c in columns:
        held = [r[c] for r in rows if r["workload"] in args.held_out]
        summary[c] = {
            "geomean": geometric_mean([r[c] for r in rows]),
            "held_out_geomean": geometric_mean(held) if held else None,
            "median_cpu_s": median(r[f"{c}_s"] for r in rows),
        }
        text = f"held out {summary[c]['held_out_geomean']:.4f}x" if held else "no held-out cells"
        print(f"{c}: geomean {summary[c]['geomean']:.4f}x, {text}, median {summary[c]['median_cpu_s']:.2f} CPU s")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps({"argv": argv if argv is not None else sys.argv, "rows": rows, "summary": summary}, indent=1))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
