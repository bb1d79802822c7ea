"""Where one PPO iteration's CPU goes on a paper-size cell: sampling, decoding, simulating, updating.

    PYTHONPATH=. python benchmarks/bench_go_iteration.py --workload rnnlm-8:inference --devices 2xV100 --samples 6 --repeats 2

The shipped checkpoint, fine-tune settings (`TrainConfig` defaults: 4 PPO epochs), unseeded
episodes, one torch thread, the heap frozen as in training. Per repeat: `collect_rollouts` (sample
+ decode + simulate) and, timed apart on the same episodes, decoding and simulating alone, then one
`PPOTrainer.update`. Prints one line per repeat (CPU seconds) and writes JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from compiler_opt.rl import GraphEnvironment, TrainConfig, load_graph, make_policy
from compiler_opt.rl.ppo import PPOTrainer
from compiler_opt.rl.rollout import collect_rollouts
from cost_model.devices.loader import load_topology
from graph_ir._gc import gc_frozen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="rnnlm-8:inference")
    parser.add_argument("--devices", default="2xV100")
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    name, graph = load_graph(args.workload, paper=True)
    env = GraphEnvironment(name, graph, load_topology(args.devices))
    env.reference_step_s  # setup, outside the timings
    config = TrainConfig(mode="fine-tune", workloads=[name], samples_per_graph=args.samples, init_checkpoint="default")
    policy = make_policy(config)
    rows = []
    with gc_frozen():
        for repeat in range(args.repeats):
            generator = torch.Generator().manual_seed(repeat)
            began = time.process_time()
            rollouts = collect_rollouts(policy, [env], args.samples, generator=generator)
            rollout_s = time.process_time() - began
            began = time.process_time()
            decisions = [env.decisions(rollouts[0].actions[-1, k].numpy()) for k in range(args.samples)]
            decode_s = time.process_time() - began
            began = time.process_time()
            for d in decisions:
                env.score_decisions(d)
            simulate_s = time.process_time() - began
            began = time.process_time()
            PPOTrainer(policy, config).update(rollouts)
            update_s = time.process_time() - began
            row = {"nodes": env.problem.num_nodes, "samples": args.samples, "epochs": config.ppo_epochs, "rollout_s": rollout_s,
                   "sample_s": rollout_s - decode_s - simulate_s, "decode_s": decode_s, "simulate_s": simulate_s, "update_s": update_s}
            rows.append(row)
            print(f"{env.label} N={row['nodes']} K={args.samples}: rollout {rollout_s:.2f} CPU s (sampling ~{row['sample_s']:.2f}, "
                  f"decoding {decode_s:.2f}, simulating {simulate_s:.2f}), update ({config.ppo_epochs} epochs) {update_s:.2f}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"argv": vars(args), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
