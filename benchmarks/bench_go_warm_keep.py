"""How far do seeded GO episodes stray from their seed? The choice of `heads.KEEP_INIT`.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_go_warm_keep.py --workload rnnlm-2:inference \\
        --devices 2xV100 --keep 6 8 10 --tasks placement
    PYTHONPATH=. nice -n 10 python benchmarks/bench_go_warm_keep.py --workload rnnlm-2:inference \\
        --devices 2xV100 --keep 8 --tasks all

On one (training-split) workload at paper size with the shipped checkpoint: every warm-start seed
(x human expert), the best seed as the policy's decoder reads it (`seed_episode`), then for each
keep bonus `--samples` seeded episodes: the share of nodes moved off the seed's device, and step
time x expert of the joint episode, of its placement with the default fusion (placement-only),
and of the seed's placement with the episode's fusion and priorities. `--tasks placement` puts the
bonus on placement only (fusion and scheduling heads free), `all` on the three tasks (the default
of `heads.JointHeads`). Prints one line per bonus.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from compiler_opt.policy import load_checkpoint
from compiler_opt.rl import GraphEnvironment, load_graph
from compiler_opt.rl.warm_start import DEFAULT_SEEDS, seed_episode, warm_start_seeds
from cost_model.devices.loader import load_topology


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="rnnlm-2:inference")
    parser.add_argument("--devices", default="2xV100")
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--keep", type=float, nargs="+", default=[6.0, 8.0, 10.0])
    parser.add_argument("--tasks", choices=("placement", "all"), default="all")
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    name, graph = load_graph(args.workload, paper=True)
    env = GraphEnvironment(name, graph, load_topology(args.devices))
    ref = env.reference_step_s
    policy, _ = load_checkpoint(None if args.checkpoint == "default" else args.checkpoint)
    print(f"{env.label}: {env.problem.num_nodes} nodes")
    seeds = warm_start_seeds(env, DEFAULT_SEEDS, fusion_levels=policy.config.fusion_levels)
    for s in seeds:
        print(f"  seed {s.method:14s} {s.score.step_time_s / ref:.3f}x expert{' OOM' if s.score.oom else ''} ({s.cpu_seconds:.2f} CPU s)")
    head = min((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)
    episode = seed_episode(env, head, policy.config.iterations)
    print(f"  best seed {head.method} as an episode: {episode.score.step_time_s / ref:.3f}x" if episode else "  best seed not replayable")
    placement_only = GraphEnvironment(name, graph, env.topology, problem=env.problem, placement_only=True)
    generator = torch.Generator().manual_seed(args.seed)
    seed_device = head.actions[:, 0].numpy()
    for keep in args.keep:
        with torch.no_grad():
            policy.heads.keep.fill_(keep)
            if args.tasks == "placement":
                policy.heads.keep[1:] = 0.0
        began = time.process_time()
        final = policy.sample(env.inputs, args.samples, generator=generator, initial=head.actions).actions[-1].numpy()
        moved = [(final[k, :, 0] != seed_device).mean() for k in range(args.samples)]
        joint = [env.score(final[k]).step_time_s / ref for k in range(args.samples)]
        only = [placement_only.score(final[k]).step_time_s / ref for k in range(args.samples)]
        kept = final.copy()
        kept[:, :, 0] = seed_device
        fusion = [env.score(kept[k]).step_time_s / ref for k in range(args.samples)]
        print(f"keep {keep:g} ({args.tasks}): moved {np.round(moved, 4).tolist()} joint {np.round(joint, 3).tolist()} "
              f"placement-only {np.round(only, 3).tolist()} seed placement + episode fusion/priority {np.round(fusion, 3).tolist()} "
              f"({time.process_time() - began:.1f} CPU s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
