"""Does the GO policy learn? A fixed-size PPO diagnostic: reward per block of iterations.

The yardstick for changes to PPO (rl/ppo.py) and its settings: each variant trains from the
same start (fresh weights from the seed, or a checkpoint) for a fixed number of iterations on
small workloads, every environment in every iteration (no sampling noise between iterations),
and the table shows, per block of iterations, the mean episode reward and the best episode
reward (both averaged over environments and seeds), and the mean best-so-far step time as a
ratio to the human expert. A policy that learns has a rising mean; one that only searches has a
rising best with a flat mean.

    PYTHONPATH=. python benchmarks/bench_go_learning.py --mode go-one \\
        --workloads rnnlm-2:inference wavenet-2x18:inference resnet-50:inference --devices 2xV100 \\
        --iterations 40 --block 10 --seeds 0 1 \\
        --variant episode:ratio=episode --variant decision:ratio=decision

`--variant NAME:key=value,...` sets `TrainConfig` fields (ratio, learning_rate, ppo_epochs,
samples_per_graph, clip, entropy_coef, ...). `--mode pretrain` trains one policy over all
environments per seed instead of one per environment. One torch thread. JSON under
benchmarks/results/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compiler_opt.rl import TrainConfig
from compiler_opt.rl.trainer import build_environments, load_graph, run_training

__all__ = ["main"]

_FIELDS = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
_ALIASES = {"lr": "learning_rate", "epochs": "ppo_epochs", "samples": "samples_per_graph"}


def _parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = text.partition(":")
    overrides: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        key = _ALIASES.get(key, key)
        if key not in _FIELDS:
            raise SystemExit(f"--variant {text!r}: unknown TrainConfig field {key!r}")
        default = getattr(TrainConfig(workloads=["x"]), key)
        if isinstance(default, bool):
            overrides[key] = value.lower() in ("1", "true", "yes")
        else:
            overrides[key] = type(default)(value) if not isinstance(default, str) else value
    return name, overrides


def _blocks(rows: list[list[float]], block: int) -> list[float]:
    """Mean of per-iteration values in consecutive blocks."""
    return [float(np.mean(rows[i : i + block])) for i in range(0, len(rows), block)]


def _run(variant: dict[str, Any], envs: list, args: argparse.Namespace, seed: int, labels: list[str]) -> dict[str, Any]:
    if args.mode == "pretrain":
        base = dict(mode="pretrain", graphs_per_iteration=len(envs))
    else:  # the diagnostic measures learning from the policy's own start: no warm-start seeds
        base = dict(mode="go-one", warm_start=[])
    fields = dict(workloads=labels, devices=["-"], iterations=args.iterations, samples_per_graph=args.samples, seed=seed, init_checkpoint=args.checkpoint)
    config = TrainConfig(**{**fields, **base, **variant})  # a variant may override any field (samples_per_graph=3)
    began = time.process_time()
    result = run_training(config, envs=envs, progress=False, save=False)
    cpu = time.process_time() - began
    per_iter_mean, per_iter_best, per_iter_ratio = [], [], []
    best_step: dict[str, float] = {}
    for record in result.env_history:
        per_iter_mean.append(float(np.mean([np.mean(r["reward"]) for r in record.values()])))
        per_iter_best.append(float(np.mean([np.max(r["reward"]) for r in record.values()])))
        for label, r in record.items():
            if r["ratio"]:
                best_step[label] = min(best_step.get(label, math.inf), min(r["ratio"]))
        per_iter_ratio.append(float(np.exp(np.mean(np.log(list(best_step.values()))))) if best_step else math.nan)
    clip = [h["clip_fraction"] for h in result.history]
    entropy = [h["entropy"] for h in result.history]
    final_best = {label: b.ratio for label, b in result.best.items()}
    return {
        "seed": seed, "cpu_s": cpu, "iterations": result.iterations,
        "mean": per_iter_mean, "best": per_iter_best, "best_so_far_ratio": per_iter_ratio,
        "clip_fraction": clip, "entropy": entropy, "final_best_ratio": final_best,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("go-one", "pretrain"), default="go-one")
    p.add_argument("--workloads", nargs="+", default=["rnnlm-2:inference", "wavenet-2x18:inference", "resnet-50:inference"])
    p.add_argument("--devices", nargs="+", default=["2xV100"])
    p.add_argument("--paper-sizes", action="store_true")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--block", type=int, default=10)
    p.add_argument("--samples", type=int, default=6)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--checkpoint", default="", help="start every run from this checkpoint ('default': the shipped one)")
    p.add_argument("--variant", action="append", default=[], help="NAME:key=value,... (TrainConfig fields)")
    p.add_argument("--out", default="benchmarks/results/go_learning.json")
    p.add_argument("--table", metavar="JSON", help="only print the table of a saved run")
    args = p.parse_args(argv)
    if args.table:
        _table(json.loads(Path(args.table).read_text()), args.block)
        return 0
    torch.set_num_threads(1)
    variants = [_parse_variant(v) for v in (args.variant or ["decision:ratio=decision"])]
    base = TrainConfig(workloads=args.workloads, devices=args.devices, paper_sizes=args.paper_sizes)
    graphs = [load_graph(spec, paper=args.paper_sizes) for spec in args.workloads]
    envs = build_environments(base, graphs)
    for env in envs:
        _ = env.reference_step_s  # built once, outside the timed runs
    groups = [[env] for env in envs] if args.mode == "go-one" else [envs]
    out: dict[str, Any] = {"args": vars(args), "variants": {}}
    for name, overrides in variants:
        runs = []
        for group in groups:
            labels = [env.label for env in group]
            for seed in args.seeds:
                run = _run(overrides, group, args, seed, labels)
                run["envs"] = labels
                runs.append(run)
                print(f"  {name} {'+'.join(labels) if len(labels) < 3 else f'{len(labels)} envs'} seed {seed}: "
                      f"{run['cpu_s']:.0f} CPU s, mean {run['mean'][0]:.3f} -> {run['mean'][-1]:.3f}", file=sys.stderr)
        out["variants"][name] = {"overrides": overrides, "runs": runs}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))  # after every variant: a long run can be read early
    _table(out, args.block)
    print(f"\nwrote {args.out}")
    return 0


def _table(out: dict[str, Any], block: int) -> None:
    """Print the per-block table of a results dict (also: `--table FILE` re-prints a saved run)."""
    print(f"\nper block of {block} iterations: mean episode reward / best episode reward / best-so-far step time (x human expert, geomean)")
    for name, data in out["variants"].items():
        runs = data["runs"]
        mean = np.mean([_blocks(r["mean"], block) for r in runs], axis=0)
        best = np.mean([_blocks(r["best"], block) for r in runs], axis=0)
        ratio = np.exp(np.mean([np.log(r["best_so_far_ratio"][block - 1 :: block]) for r in runs], axis=0))
        clip = np.mean([_blocks(r["clip_fraction"], block) for r in runs], axis=0)
        cpu = np.mean([r["cpu_s"] for r in runs])
        print(f"\n{name} {data['overrides']}  ({len(runs)} runs, {cpu:.0f} CPU s each)")
        print("block  " + "  ".join(f"{i * block + 1:>4}-{(i + 1) * block:<4}" for i in range(len(mean))))
        print("mean   " + "  ".join(f"{v:>9.3f}" for v in mean))
        print("best   " + "  ".join(f"{v:>9.3f}" for v in best))
        print("ratio  " + "  ".join(f"{v:>9.3f}" for v in ratio))
        print("clip   " + "  ".join(f"{v:>9.3f}" for v in clip))


if __name__ == "__main__":
    sys.exit(main())
