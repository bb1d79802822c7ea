"""What the GO zero-shot benchmarks share (bench_go_joint, bench_go_partition, bench_go_zero_shot_polish):
the cell arguments, the policy, the (workload, devices) cells, the markdown table and the JSON file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ("inception-v3:inference", "amoebanet:inference", "rnnlm-8:inference", "gnmt-8:inference")


def add_cell_arguments(parser: argparse.ArgumentParser, *, json_name: str) -> None:
    """--workloads, --devices, --paper-sizes, --checkpoint, --samples, --held-out, --seed, --json, --cycle-check."""
    parser.add_argument("--workloads", nargs="+", default=list(HELD_OUT))
    parser.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    parser.add_argument("--paper-sizes", action="store_true")
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--samples", type=int, default=8, help="sampled episodes beside the greedy one (bench_go's default)")
    parser.add_argument("--held-out", nargs="*", default=list(HELD_OUT), help="workloads whose geometric mean is also reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / json_name))
    parser.add_argument("--cycle-check", choices=("limited", "exact"), default="exact",
                        help="the decoder's fusion cycle check: the 4096-node search (limited) or exact (GraphEnvironment(exact_cycles=))")


def load_policy(args: argparse.Namespace) -> Any:
    """The shipped checkpoint (or --checkpoint) in eval mode, on one torch thread."""
    import torch

    from compiler_opt.policy import load_checkpoint

    torch.set_num_threads(1)
    policy, _ = load_checkpoint(None if args.checkpoint == "default" else args.checkpoint)
    policy.eval()
    return policy


def cells(args: argparse.Namespace) -> Iterator[tuple[str, str, Any]]:
    """(workload, devices, GraphEnvironment) per cell, each workload's graph loaded once."""
    from compiler_opt.rl import GraphEnvironment, load_graph
    from cost_model.devices.loader import load_topology

    for spec in args.workloads:
        name, graph = load_graph(spec, paper=args.paper_sizes)
        for devices in args.devices:
            yield spec, devices, GraphEnvironment(name, graph, load_topology(devices), exact_cycles=getattr(args, "cycle_check", "exact") == "exact")


def markdown_table(rows: list[dict], columns: list[str]) -> list[str]:
    """One line per row (a column a row lacks is '-'), ratios to three decimals."""
    lines = ["| workload | devices | nodes | " + " | ".join(columns) + " |", "|---|---|---|" + "---|" * len(columns)]
    for row in rows:
        lines.append(f"| {row['workload']} | {row['devices']} | {row['nodes']} | " + " | ".join(f"{row[c]:.3f}" if c in row else "-" for c in columns) + " |")
    return lines


def write_json(path: str, payload: dict) -> None:
    """`payload` to `path`, written beside it and renamed over it (`graph_ir.io.atomic.atomic_path`)."""
    from graph_ir.io.atomic import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=1, default=float))
