"""Launch share of every suite workload's one-GPU step, at paper and at default sizes.

    python benchmarks/bench_launch_share.py                       # every (workload, mode), both sizes
    python benchmarks/bench_launch_share.py --only rnnlm-2 gnmt-2 --sizes paper

For each (workload, mode, sizes): nodes, the framework's default fusion (`passes.fusion.defaults`),
the simulated step with everything on one V100, its kernel count and the part of the step that
is kernel launch overhead (`compiler_opt.cli.bench_cells.launch_share`). A step that is mostly
launch overhead makes placement gains mostly spread launches; the paper sizes are meant to be
compute- and transfer-bound as in the placement papers. Rows are written to
benchmarks/results/bench_launch_share.json after each one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from compiler_opt.cli.bench_cells import launch_share
from compiler_opt.workloads import build_workload, list_workloads
from compiler_opt.workloads.registry import is_cached
from cost_model.decisions import node_order
from graph_ir.io.atomic import atomic_path
from passes.fusion.defaults import apply_default_fusion

ROOT = Path(__file__).resolve().parent.parent


def measure(name: str, mode: str, paper: bool, devices: str) -> dict:
    began = time.perf_counter()
    graph = build_workload(name, mode, paper=paper)
    fusion = apply_default_fusion(graph).name
    groups = np.array([-1 if n.fusion_group is None else n.fusion_group for n in node_order(graph)], dtype=np.int32)
    one = launch_share(graph, groups, devices=devices)
    return {
        "workload": f"{name}:{mode}", "sizes": "paper" if paper else "default", "nodes": len(graph), "default_fusion": fusion,
        "devices": devices, "step_s": one.step_s, "kernels": one.kernels, "launch_s": one.launch_s, "launch_share": one.share,
        "seconds": time.perf_counter() - began,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", help="workload names (default: all)")
    parser.add_argument("--sizes", nargs="+", choices=("paper", "default"), default=["paper", "default"])
    parser.add_argument("--devices", default="1xV100")
    parser.add_argument("--cached-only", action="store_true", help="skip graphs not yet in the workload cache (say which)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_launch_share.json"))
    args = parser.parse_args(argv)
    rows = []
    print("| workload | sizes | nodes | default fusion | 1-GPU step (ms) | kernels | launch share |")
    print("|---|---|---|---|---|---|---|")
    for sizes in args.sizes:
        for workload in list_workloads():
            if args.only and workload.name not in args.only:
                continue
            for mode in workload.modes:
                if args.cached_only and not is_cached(workload.name, mode, paper=sizes == "paper"):
                    print(f"| {workload.name}:{mode} | {sizes} | not built yet (--cached-only) | | | | |", flush=True)
                    continue
                row = measure(workload.name, mode, sizes == "paper", args.devices)
                rows.append(row)
                print(f"| {row['workload']} | {sizes} | {row['nodes']} | {row['default_fusion']} | {row['step_s'] * 1e3:.4g} | "
                      f"{row['kernels']} | {row['launch_share']:.1%} |", flush=True)
                with atomic_path(args.json) as tmp:
                    tmp.write_text(json.dumps({"devices": args.devices, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
