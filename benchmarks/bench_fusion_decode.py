"""The GO decoder's fusion decodes as the zero-shot makes them, replayed and timed.

    PYTHONPATH=. python benchmarks/bench_fusion_decode.py --workloads gnmt-8:inference rnnlm-8:inference \\
        --devices 2xV100 8xV100 --paper-sizes --repeats 3

For each cell, the zero-shot (`rl.zero_shot`, 8 sampled episodes, seed `--seed`) runs once with
every call of the compiled by-priority merge loop (`cycle_numba.priority_merges_compiled`) recorded
(its inputs, copied before the call); then every recorded decode is replayed `--repeats` times on
fresh copies and timed. A row: the decodes, the median over repeats of their summed seconds, and a
digest of every decode's groups, so two checkouts' rows show at a glance that they decode the same
groups (run this file with PYTHONPATH at another checkout to time its code on the same decodes).
Rows go to benchmarks/results/bench_fusion_decode.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # appended: PYTHONPATH at another checkout wins (its code is timed)

from benchmarks._go_cells import add_cell_arguments, cells, load_policy  # noqa: E402


def recorded_decodes(policy: Any, env: Any, seed: int) -> list[list[Any]]:
    """The inputs of every compiled merge-loop call one zero-shot makes on `env`."""
    from compiler_opt.rl import zero_shot
    from passes.fusion import cycle_numba

    calls: list[list[Any]] = []
    merge_loop = cycle_numba.priority_merges_compiled

    def record(*args: Any) -> int:
        calls.append([a.copy() if isinstance(a, np.ndarray) else a for a in args])
        return merge_loop(*args)

    cycle_numba.priority_merges_compiled = record
    try:
        zero_shot(policy, env, 8, seed=seed)
    finally:
        cycle_numba.priority_merges_compiled = merge_loop
    return calls


def replay(calls: list[list[Any]]) -> tuple[float, str]:
    """Summed seconds of the merge loop over `calls`, and a digest of the groups they make."""
    from passes.fusion import cycle_numba

    total, digest = 0.0, hashlib.sha256()
    for call in calls:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in call]
        start = time.perf_counter()
        merges = cycle_numba.priority_merges_compiled(*args)
        total += time.perf_counter() - start
        digest.update(np.int64(merges).tobytes())
        digest.update(cycle_numba.group_ids_compiled(args[9], args[13]).tobytes())  # root, size
    return total, digest.hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cell_arguments(parser, json_name="bench_fusion_decode.json")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    policy = load_policy(args)
    rows = []
    print("| workload | devices | nodes | decodes | merge-loop s (median) | groups digest |\n|---|---|---:|---:|---:|---|", flush=True)
    for spec, devices, env in cells(args):
        calls = recorded_decodes(policy, env, args.seed)
        replay(calls[:1])  # warm-up: numba's cached machine code loaded
        runs = [replay(calls) for _ in range(args.repeats)]
        digests = {d for _, d in runs}
        if len(digests) != 1:
            raise RuntimeError(f"{spec} {devices}: replays of the same decodes gave different groups ({sorted(digests)})")
        rows.append({"workload": spec, "devices": devices, "nodes": env.problem.num_nodes, "decodes": len(calls),
                     "seconds": statistics.median(t for t, _ in runs), "runs_s": [t for t, _ in runs], "groups_digest": digests.pop()})
        row = rows[-1]
        print(f"| {spec} | {devices} | {row['nodes']} | {row['decodes']} | {row['seconds']:.3f} | {row['groups_digest']} |", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"machine": platform.platform(), "repeats": args.repeats, "seed": args.seed,
                                           "paper_sizes": args.paper_sizes, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
