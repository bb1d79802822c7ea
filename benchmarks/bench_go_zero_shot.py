"""Held-out zero-shot quality of GO checkpoints: is a new checkpoint worth shipping?

    PYTHONPATH=. nice -n 10 python benchmarks/bench_go_zero_shot.py --paper-sizes \\
        --workloads inception-v3:inference amoebanet:inference --devices 2xV100 4xV100 8xV100 \\
        --checkpoints default runs/pretrain5/best.pt runs/pretrain5/latest.pt --samples 4

Per (workload, devices) cell and checkpoint: `zero_shot(policy, env, samples, seed)` (the greedy
answer and `samples` sampled ones, best kept; no warm start, no training), as a ratio to the
human-expert reference; then the geometric mean per checkpoint. The held-out workloads must not
be in any checkpoint's training split (WORKSPACE.md, Pretraining record). One torch thread; JSON
under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from compiler_opt.policy import load_checkpoint
from compiler_opt.rl import GraphEnvironment, load_graph, zero_shot
from cost_model.devices.loader import load_topology

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=["inception-v3:inference", "amoebanet:inference"])
    parser.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    parser.add_argument("--paper-sizes", action="store_true")
    parser.add_argument("--checkpoints", nargs="+", default=["default"])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "go_zero_shot.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    policies = {}
    for name in args.checkpoints:
        policy, meta = load_checkpoint(None if name == "default" else name)
        trained = {w.split(":")[0] for w in meta["train_config"].get("workloads", [])}
        leaked = trained & {w.split(":")[0] for w in args.workloads}
        if leaked:
            print(f"{name}: trained on {sorted(leaked)}: not a held-out comparison", file=sys.stderr)
            return 2
        policies[name] = policy
    rows = []
    for spec in args.workloads:
        name, graph = load_graph(spec, paper=args.paper_sizes)
        for devices in args.devices:
            env = GraphEnvironment(name, graph, load_topology(devices))
            for checkpoint, policy in policies.items():
                began = time.process_time()
                found = zero_shot(policy, env, args.samples, seed=args.seed)
                rows.append({"workload": name, "devices": devices, "checkpoint": checkpoint, "step_time_s": found.score.step_time_s,
                             "vs_expert": found.score.step_time_s / env.reference_step_s, "oom": found.score.oom, "cpu_seconds": time.process_time() - began})
                print(f"{name}@{devices} {checkpoint}: {rows[-1]['vs_expert']:.3f}x expert", file=sys.stderr, flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1))
    cells = list(dict.fromkeys(f"{r['workload'].split(':')[0]} {r['devices']}" for r in rows))
    print("| checkpoint | " + " | ".join(cells) + " | geomean |")
    print("|---|" + "---|" * (len(cells) + 1))
    for checkpoint in policies:
        mine = [r for r in rows if r["checkpoint"] == checkpoint]
        geo = math.exp(np.mean([math.log(r["vs_expert"]) for r in mine]))
        print(f"| {checkpoint} | " + " | ".join(f"{r['vs_expert']:.3f}" for r in mine) + f" | {geo:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
