"""GO (one / zero-shot / fine-tune) against the classical placement methods and the human expert.

    PYTHONPATH=. python benchmarks/bench_go.py --workloads rnnlm-8:inference amoebanet:inference \\
        --devices 2xV100 4xV100 8xV100 --budget 6 --samples 6 --checkpoint default

Every method's answer is scored by the same simulator on the same `SimulationProblem`. Classical
placements get the framework's default greedy fusion (the `fuse` pass) and default priorities; GO
decides placement, fusion and priorities jointly. `go-fine-tune` and `go-one` run `--budget` PPO
iterations of `--samples` episodes; `sa` and `random` get the same number of simulator
evaluations as GO fine-tune used (not the same wall time: their evaluations are cheaper, and the
wall times are in the table). `--placement-only` adds GO fine-tune deciding placement alone
(default fusion and priorities), the joint-vs-placement ablation. Ratios: to the human-expert reference and to the lower bound
(`step_time_lower_bound`, fusion-aware). Rows go to benchmarks/results/bench_go.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from compiler_opt.cli._render import Table, render_tables
from compiler_opt.policy import load_checkpoint
from compiler_opt.rl import GraphEnvironment, TrainConfig, load_graph, make_policy, run_training, zero_shot
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from cost_model.lower_bound import step_time_lower_bound

ROOT = Path(__file__).resolve().parent.parent
CLASSICAL = ("human-expert", "single-device", "critical-path", "m-etf", "m-sct", "m-topo", "metis")


def _classical(env: GraphEnvironment, method: str, **options: object) -> tuple[Decisions, float, int]:
    from passes.placement import place_outcome

    began = time.perf_counter()
    outcome = place_outcome(env.graph, method, env.topology, **options)
    device = outcome.decisions.device
    decisions = Decisions(device, env.decoder.default_fusion(device), np.zeros(env.problem.num_nodes))
    return decisions, time.perf_counter() - began, outcome.evaluations


def run(args: argparse.Namespace) -> list[dict]:
    rows: list[dict] = []
    checkpoint = None if args.checkpoint == "default" else args.checkpoint
    for spec in args.workloads:
        name, graph = load_graph(spec)
        for devices in args.devices:
            env = GraphEnvironment(name, graph, load_topology(devices))
            bound = step_time_lower_bound(env.problem, fusion=True)

            def add(method: str, decisions: Decisions, seconds: float, evaluations: int) -> None:
                score = env.score_decisions(decisions)
                rows.append({
                    "workload": name, "devices": devices, "method": method, "nodes": env.problem.num_nodes,
                    "step_time_s": score.step_time_s, "oom": score.oom, "invalid": score.invalid,
                    "vs_expert": score.step_time_s / env.reference_step_s, "vs_bound": score.step_time_s / bound,
                    "seconds": seconds, "evaluations": evaluations,
                })
                print(f"{name} {devices} {method}: {score.step_time_s * 1e3:.4f} ms ({rows[-1]['vs_expert']:.3f}x expert) {seconds:.1f} s", file=sys.stderr, flush=True)

            for method in CLASSICAL:
                add(method, *_classical(env, method))
            torch.manual_seed(args.seed)
            policy, _ = load_checkpoint(checkpoint)
            began = time.perf_counter()
            found = zero_shot(policy, env, args.samples, seed=args.seed)
            add("go-zero-shot", found.decisions, time.perf_counter() - began, args.samples + 1)
            tuned_evals = args.budget * args.samples + 2
            variants = [("fine-tune", env), ("go-one", env)]
            if args.placement_only:
                variants.append(("fine-tune-placement", GraphEnvironment(name, graph, env.topology, problem=env.problem, placement_only=True)))
            for mode, run_env in variants:
                label = {"fine-tune": "go-fine-tune", "go-one": "go-one", "fine-tune-placement": "go-fine-tune-placement-only"}[mode]
                mode = "fine-tune" if mode == "fine-tune-placement" else mode
                config = TrainConfig(
                    mode=mode, workloads=[name], devices=[devices], iterations=args.budget, samples_per_graph=args.samples,
                    seed=args.seed, init_checkpoint=args.checkpoint if mode == "fine-tune" else "", learning_rate=args.lr,
                )
                began = time.perf_counter()
                policy = make_policy(config)
                candidates = [zero_shot(policy, run_env, 1, seed=args.seed)] if mode == "fine-tune" else []
                result = run_training(config, envs=[run_env], policy=policy, progress=False, save=False)
                candidates.extend(result.best.values())
                fitting = [c for c in candidates if not (c.score.oom or c.score.invalid)] or candidates
                best = min(fitting, key=lambda c: c.score.step_time_s)
                add(label, best.decisions, time.perf_counter() - began, tuned_evals if mode == "fine-tune" else args.budget * args.samples)
            for method in ("sa", "random"):
                add(method, *_classical(env, method, budget=tuned_evals, seed=args.seed))
    return rows


def tables(rows: list[dict]) -> list[Table]:
    out = []
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((row["workload"], row["devices"]), []).append(row)
    detail = Table("GO vs classical (simulated step time, latency)", ["workload", "devices", "method", "step ms", "vs expert", "vs bound", "seconds", "evals"], numeric=frozenset(range(3, 8)))
    for (workload, devices), group in cells.items():
        for row in group:
            step = "OOM" if row["oom"] else f"{row['step_time_s'] * 1e3:.4f}"
            detail.rows.append([workload, devices, row["method"], step, f"{row['vs_expert']:.3f}", f"{row['vs_bound']:.2f}", f"{row['seconds']:.1f}", str(row["evaluations"])])
    out.append(detail)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    summary = Table("geometric mean over cells", ["method", "vs expert", "vs bound", "wins (<= best classical)", "mean seconds"], numeric=frozenset({1, 2, 3, 4}))
    for method in methods:
        mine = [r for r in rows if r["method"] == method]
        wins = 0
        for (w, d), group in cells.items():
            classical = min(r["step_time_s"] for r in group if not r["method"].startswith("go"))
            wins += any(r["method"] == method and r["step_time_s"] <= classical * 1.000001 for r in group)
        geo = lambda key: math.exp(np.mean([math.log(r[key]) for r in mine]))  # noqa: E731
        summary.rows.append([method, f"{geo('vs_expert'):.3f}", f"{geo('vs_bound'):.2f}", f"{wins}/{len(cells)}", f"{np.mean([r['seconds'] for r in mine]):.1f}"])
    out.append(summary)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=["rnnlm-8:inference", "amoebanet:inference"])
    parser.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--budget", type=int, default=6, help="PPO iterations of go-one and go-fine-tune")
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--placement-only", action="store_true", help="also GO fine-tune deciding placement only (default fusion, priorities 0)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_go.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = run(args)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "machine": platform.platform(), "rows": rows}, indent=2))
    render_tables(tables(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
