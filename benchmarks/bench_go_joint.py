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
import sys
import time
from statistics import geometric_mean, median

from benchmarks._go_cells import add_cell_arguments, cells, load_policy, markdown_table, write_json
from compiler_opt.rl import zero_shot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cell_arguments(parser, json_name="go_joint.json")
    parser.add_argument("--counts", nargs="+", type=int, default=[0, 1, 4, 8], help="how many fastest candidates get joint variants (0: none)")
    args = parser.parse_args(argv)
    if any(k < 0 for k in args.counts):
        parser.error("--counts must be >= 0")
    policy = load_policy(args)
    rows = []
    for spec, devices, env in cells(args):
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
    print("\n" + "\n".join(markdown_table(rows, columns)))
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
    write_json(args.json, {"argv": argv if argv is not None else sys.argv, "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
