"""Partitioned decoding (policy/partitioned.py): what each agreement exponent adds to zero-shot,
beside plain METIS on the same greedy answer as the control.

    PYTHONPATH=. taskset -c 0 python benchmarks/bench_go_partition.py --paper-sizes \\
        --workloads rnnlm-2:inference resnet-50:inference --devices 2xV100 4xV100 8xV100

Per (workload, devices) cell, the shipped checkpoint (or `--checkpoint`), one torch thread:
- `zero-shot`: `zero_shot(policy, env, samples)` without partitioned candidates (greedy, samples,
  every round, smoothed and coarsened decodings: the zero-shot before partitioning; no joint
  variants in either column, as in RESULTS.md h14);
- `+partition`: the same with the default partitioned candidates (`AGREEMENT_EXPONENTS`);
- one column per exponent gamma: the best of `partitioned_placements(..., exponents=(gamma,))` on
  the greedy answer (its fusion and priority levels kept), alone. gamma = 0 ignores the policy's
  distributions: plain METIS on tensor bytes (plus one cut sized by the policy's expected load),
  the control that says how much of the gain is the policy's and how much METIS's.
Ratios are to the human-expert reference (the `bench_go.py` cells); geometric means over all
cells and over `--held-out` workloads. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import math
import time
from statistics import geometric_mean

from benchmarks._go_cells import add_cell_arguments, cells, load_policy, markdown_table, write_json
from compiler_opt.policy.partitioned import AGREEMENT_EXPONENTS, partitioned_placements
from compiler_opt.rl import zero_shot
from compiler_opt.rl.rollout import collect_rollouts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cell_arguments(parser, json_name="go_partition.json")
    parser.add_argument("--exponents", nargs="+", type=float, default=[0.0, 1.0, 2.0, 4.0])
    args = parser.parse_args(argv)
    policy = load_policy(args)
    columns = ["zero-shot", "+partition"] + [f"gamma={g:g}" for g in args.exponents]
    rows = []
    for spec, devices, env in cells(args):
        ref = env.reference_step_s
        row: dict = {"workload": spec, "devices": devices, "nodes": env.problem.num_nodes}
        began = time.process_time()
        row["zero-shot"] = zero_shot(policy, env, args.samples, seed=args.seed, partition=(), joint=0).score.step_time_s / ref
        row["zero-shot_s"] = time.process_time() - began
        began = time.process_time()
        row["+partition"] = zero_shot(policy, env, args.samples, seed=args.seed, joint=0).score.step_time_s / ref
        row["+partition_s"] = time.process_time() - began
        rollout = collect_rollouts(policy, [env], 1, greedy_first=True, with_reward=False)[0]
        last = rollout.actions[-1, 0].numpy()
        inputs = env.inputs
        for gamma in args.exponents:
            began = time.process_time()
            placements = partitioned_placements(
                rollout.place_log_prob[0].numpy(), inputs.edge_index.numpy(), inputs.edge_bytes.numpy(),
                inputs.node_time.numpy(), inputs.device_mask.numpy(), last[:, 0], exponents=(gamma,),
            )
            best = math.inf
            for device in placements:
                actions = last.copy()
                actions[:, 0] = device
                best = min(best, env.score(actions, with_reward=False).step_time_s / ref)
            row[f"gamma={gamma:g}"] = best
            row[f"gamma={gamma:g}_s"] = time.process_time() - began
        rows.append(row)
        print(f"{spec} {devices}: " + " ".join(f"{c} {row[c]:.3f}" for c in columns), flush=True)
    lines = markdown_table(rows, columns)
    for label, keep in (("held out", lambda r: r["workload"] in args.held_out), ("all", lambda r: True)):
        chosen = [r for r in rows if keep(r)]
        if chosen:
            lines.append(f"| geomean {label} | | {len(chosen)} cells | " + " | ".join(f"{geometric_mean([r[c] for r in chosen]):.3f}" for c in columns) + " |")
    print("\n".join(lines))
    write_json(args.json, {"argv": argv, "default_exponents": list(AGREEMENT_EXPONENTS), "columns": columns, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
