"""The `go` pass at scale: wall time of a zero-shot answer and peak memory, by stage.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_go_scale.py --nodes 10000 100000 \\
        --workloads rnnlm-8:inference --devices 8xV100 --repeats 3

Each case runs in its own subprocess (so the peak RSS is that case's alone): a generated random
DAG (`compiler_opt.workloads.synthetic.random_onnx_dag`) of N nodes, or a suite workload at its
paper size, then the whole `go{mode=zero-shot,budget=B,decodings=D}` pass with the shipped checkpoint, timed
end to end (the pass builds the simulation problem, the features, runs the network, decodes the
fusion groups, simulates each candidate and writes the decisions onto the nodes). Stages are
timed separately (CPU seconds) on the same graph by running the pass's steps one by one. Graph
building / import is not part of the pass and is reported apart. One torch thread. Medians of
`--repeats` pass runs, wall and CPU seconds of this process: the machine is shared (the load
average is recorded next to the numbers), and at a load average of ~20 on 2 cores a CPU second
takes 5-15 wall seconds, so the CPU time is what an unloaded machine's wall time would be.
Rows go to benchmarks/results/bench_go_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _case(spec: str, devices: str, repeats: int, budget: int, decodings: str = "all") -> dict:
    import torch

    torch.set_num_threads(1)
    import compiler_opt.rl.go_pass  # noqa: F401 - registers `go`
    from compiler_opt.policy import load_checkpoint, policy_inputs
    from compiler_opt.policy.decode import DecisionDecoder
    from cost_model.costs import SimulationProblem, Target, simulate
    from cost_model.devices.loader import load_topology
    from passes import run_pipeline

    began = time.perf_counter()
    if spec.isdigit():
        from compiler_opt.workloads.synthetic import random_onnx_dag
        from graph_ir.io.onnx_import import import_onnx

        graph = import_onnx(random_onnx_dag(int(spec), seed=0))
        label = f"random-dag-{spec}"
    else:
        from compiler_opt.rl import load_graph

        label, graph = load_graph(spec, paper=True)
    build_s = time.perf_counter() - began
    rss_graph = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB (ru_maxrss is KiB)

    totals, cpu = [], []
    for _ in range(repeats):
        copy = graph.clone()
        began, began_cpu = time.perf_counter(), time.process_time()
        run_pipeline(copy, f"go{{mode=zero-shot,budget={budget},decodings={decodings}}}", target=Target.resolve(devices=devices))
        totals.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
    rss_pass = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    # The same steps one by one (one greedy episode) for the breakdown.
    stages: dict[str, float] = {}
    tick = time.process_time()

    def stage(name: str) -> None:
        nonlocal tick
        now = time.process_time()
        stages[name] = now - tick
        tick = now

    topology = load_topology(devices)
    problem = SimulationProblem.from_graph(graph, topology)
    stage("simulation problem")
    inputs = policy_inputs(problem)
    stage("features")
    policy, _ = load_checkpoint(None)
    policy.eval()
    stage("load checkpoint")
    with torch.no_grad():
        sampled = policy.sample(inputs, 1, greedy=True)
    stage("network (greedy)")
    decoder = DecisionDecoder(problem)
    decisions = decoder.decisions(sampled.actions[-1, 0].numpy())
    stage("decode fusion groups")
    result = simulate(problem, decisions)
    stage("simulate")
    return {
        "case": label, "nodes": problem.num_nodes, "devices": devices, "budget": budget, "decodings": decodings, "build_s": build_s,
        "pass_s_median": statistics.median(totals), "pass_s": totals, "pass_cpu_s_median": statistics.median(cpu), "pass_cpu_s": cpu,
        "stages_cpu_s": stages, "step_time_s": result.step_time_s,
        "peak_rss_gib_after_build": rss_graph, "peak_rss_gib": rss_pass, "load_average": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", nargs="*", type=int, default=[10000, 100000])
    parser.add_argument("--workloads", nargs="*", default=["rnnlm-8:inference"])
    parser.add_argument("--devices", default="8xV100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=0, help="zero-shot samples beside the greedy answer")
    parser.add_argument("--decodings", choices=["all", "off"], default="all", help="the go pass's decodings option: the greedy answer's smoothed, coarsened and partitioned candidates, or none")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case, print its JSON
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_go_scale.json"))
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(_case(args.case, args.devices, args.repeats, args.budget, args.decodings)))
        return 0
    rows = []
    for case in [*map(str, args.nodes), *args.workloads]:
        repeats = args.repeats if not case.isdigit() or int(case) <= 20000 else 1
        cmd = [sys.executable, __file__, "--case", case, "--devices", args.devices, "--repeats", str(repeats), "--budget", str(args.budget), "--decodings", args.decodings]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            rows.append({"case": case, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "machine": platform.platform(), "rows": rows}, indent=1))
    print(f"{'case':<22} {'nodes':>7} {'pass wall s':>12} {'pass CPU s':>11} {'network CPU s':>14} {'decode CPU s':>13} {'peak GiB':>9} {'load':>5}")
    for row in rows:
        if "error" in row:
            print(f"{row['case']:<22} error: {row['error']}")
            continue
        print(f"{row['case']:<22} {row['nodes']:>7} {row['pass_s_median']:>12.2f} {row['pass_cpu_s_median']:>11.2f} "
              f"{row['stages_cpu_s']['network (greedy)']:>14.2f} {row['stages_cpu_s']['decode fusion groups']:>13.2f} {row['peak_rss_gib']:>9.2f} {row['load_average']:>5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
