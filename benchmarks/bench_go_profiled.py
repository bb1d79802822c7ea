"""GO fine-tune on the profiled placement workloads, beside dp / dp-ls / cp-sat and the experts.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_go_profiled.py \\
        --files ../shared/testdata/placement/throughput-inputs/LayerGraphs/*.json --seconds 60

Tarnawski et al.'s files (`../shared/testdata/placement`), at each file's own accelerator count and
memory, objective max-load (throughput; `--objective latency` for the latency files). Every row
is scored by `ProfiledPlacementContext`'s objective, the one the classical methods optimise. GO
runs through `compiler_opt.rl.profiled_env.ProfiledEnvironment`: placement only (the model has no
fusion or schedule), its sampled placement repaired to the file's colour classes and memory like
every method's answer; `go-fine-tune` starts from `--checkpoint` and trains for `--seconds`,
`go-zero-shot` is the checkpoint's greedy answer plus 8 samples. GO's times are CPU seconds of
this process (the shared machine's wall time per CPU second varies several-fold); the classical
methods report their own search seconds (wall). `dp-ls` and `sa` get
`--budget` evaluations, `cp-sat` `--cp-sat-seconds`. Where the README gives the optimum (k = 6,
LayerGraphs) the ratio to it is printed. Rows go to benchmarks/results/bench_go_profiled.json.
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

from compiler_opt.cli.bench_lib import README_REFERENCES, expert_file
from compiler_opt.rl import TrainConfig, make_policy, run_training, zero_shot
from compiler_opt.rl.profiled_env import ProfiledEnvironment
from cost_model.profiled import load_profiled_workload
from passes.placement.profiled import place_profiled

ROOT = Path(__file__).resolve().parent.parent
CLASSICAL = ("human-expert", "m-sct", "metis", "dp", "dp-ls", "sa", "cp-sat")


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for path in args.files:
        workload = load_profiled_workload(path)
        name = Path(path).stem
        env = ProfiledEnvironment(name, workload, objective=args.objective)
        bound = env.context.lower_bound()
        reference = README_REFERENCES.get(name) if workload.accelerators == 6 and args.objective == "throughput" else None

        def add(method: str, value: float, seconds: float, evals: int | None, violations: list[str]) -> None:
            rows.append({
                "workload": name, "k": workload.accelerators, "nodes": workload.num_nodes, "method": method, "objective": args.objective,
                "value": value, "lower_bound": bound, "vs_bound": value / bound if bound else None,
                "vs_readme_optimum": value / reference[2] if reference else None, "seconds": seconds, "evaluations": evals,
                "valid": not violations,
            })
            print(f"{name} {method}: {value:.4f} ({seconds:.1f} s)", file=sys.stderr, flush=True)

        methods = list(CLASSICAL)
        split = expert_file(path, args.expert)
        if split:
            methods.append("expert")
        for method in methods:
            options: dict = {"seed": args.seed}
            if method in ("dp-ls", "sa"):
                options["budget"] = args.budget
            if method == "cp-sat":
                options["time_limit_s"] = args.cp_sat_seconds
            try:
                outcome = place_profiled(workload, method, args.objective, expert=split, **options)
            except Exception as err:  # cp-sat's size limit: reported, not fatal
                from graph_ir.errors import CompilerOptError

                if not isinstance(err, CompilerOptError):
                    raise
                print(f"{name} {method}: error {str(err).splitlines()[0]}", file=sys.stderr)
                continue
            add(method, outcome.value, outcome.seconds, outcome.evaluations, outcome.violations)

        torch.manual_seed(args.seed)
        config = TrainConfig(mode="fine-tune", workloads=[name], devices=[env.topology.name], iterations=100000, samples_per_graph=args.samples,
                             seed=args.seed, init_checkpoint=args.checkpoint, learning_rate=args.lr, max_cpu_seconds=args.seconds)
        policy = make_policy(config)
        began = time.process_time()
        found = zero_shot(policy, env, 8, seed=args.seed)
        add("go-zero-shot", found.score.step_time_s, time.process_time() - began, 9, env.context.violations(found.decisions))
        began = time.process_time()
        result = run_training(config, envs=[env], policy=policy, progress=False, save=False)
        candidates = [found, *result.best.values()]
        best = min((c for c in candidates if not (c.score.oom or c.score.invalid)), key=lambda c: c.score.step_time_s, default=found)
        add("go-fine-tune", best.score.step_time_s, time.process_time() - began + rows[-1]["seconds"],
            9 + result.iterations * args.samples, env.context.violations(best.decisions))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = ROOT.parent / "shared" / "testdata" / "placement"
    parser.add_argument("--files", nargs="+", default=sorted(str(p) for p in (data / "throughput-inputs" / "LayerGraphs").glob("*.json")))
    parser.add_argument("--expert", default=str(data / "human-experts"))
    parser.add_argument("--objective", default="throughput", choices=("throughput", "latency"))
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--seconds", type=float, default=60.0, help="GO fine-tune CPU seconds per file")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--budget", type=int, default=2000, help="dp-ls and sa evaluations")
    parser.add_argument("--cp-sat-seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_go_profiled.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = run(args)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "machine": platform.platform(), "rows": rows}, indent=1))
    print("| workload | k | nodes | method | max-load | x lower bound | x README optimum | seconds | evals |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        opt = f"{r['vs_readme_optimum']:.4f}" if r["vs_readme_optimum"] else "-"
        print(f"| {r['workload']} | {r['k']} | {r['nodes']} | {r['method']} | {r['value']:.3f} | {r['vs_bound']:.3f} | {opt} | {r['seconds']:.1f} | {r['evaluations']} |")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    print("\n| method | geomean x lower bound | files |")
    print("|---|---|---|")
    for m in methods:
        mine = [r["vs_bound"] for r in rows if r["method"] == m and r["vs_bound"] and math.isfinite(r["vs_bound"])]
        print(f"| {m} | {math.exp(np.mean(np.log(mine))):.4f} | {len(mine)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
