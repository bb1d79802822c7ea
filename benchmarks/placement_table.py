"""Markdown table of suite placement rows (RESULTS.md section d) from bench_placement.py JSON files.

    python benchmarks/placement_table.py benchmarks/results/suite_paper_*.json

One line per (workload, GPUs): nodes, the one-GPU step and its launch share, the lower bound, each
method's simulated step in ms (the best in bold), and the evaluations `sa`/`random` got under the
equal-time rule; then the geometric mean of each method against human-expert and the cells each
method wins (ties split). Files are read in order; a later file's row replaces an earlier one for
the same (workload, devices, method), so a resumed run can be merged with a partial one. A cell
whose methods did not all finish is listed with what it has and counted in no summary line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

METHODS = (
    "single-device", "human-expert", "round-robin", "hash", "critical-path", "metis", "scotch", "m-topo", "m-etf",
    "m-sct", "sa", "random", "dp", "dp-ls",
)


def load_rows(paths: list[str]) -> list[dict]:
    merged: dict[tuple[str, str, str], dict] = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for row in data["rows"] if isinstance(data, dict) else data:
            merged[(row["workload"], row["devices"], row["method"])] = row
    return list(merged.values())


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.4g}"


def markdown(rows: list[dict]) -> str:
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for row in rows:
        cells.setdefault((row["workload"], row["devices"]), {})[row["method"]] = row
    def order(key: tuple[str, str]) -> tuple:
        workload, devices = key
        name, _, mode = workload.partition(":")
        return (mode != "inference", name, int(devices.split("x")[0]))

    header = ["workload", "GPUs", "nodes", "1-GPU step (ms)", "launch share", "bound", *METHODS, "sa/random evals"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ratios: dict[str, list[float]] = {m: [] for m in METHODS}
    wins: dict[str, float] = {m: 0.0 for m in METHODS}
    complete = 0
    for key in sorted(cells, key=order):
        by = cells[key]
        any_row = next(iter(by.values()))
        if any_row.get("error", "").startswith("not run"):
            lines.append(f"| {key[0]} | {key[1].split('x')[0]} | {any_row['nodes']} | " + " | ".join(["-"] * (len(header) - 3)) + " |")
            continue
        values = {m: by[m].get("objective_value") for m in METHODS if m in by}
        done = [v for v in values.values() if v is not None]
        best = min(done) if done else None
        finished = all(m in by for m in METHODS)
        shown = []
        for m in METHODS:
            v = values.get(m)
            text = _ms(v) if m in by else "…"
            shown.append(f"**{text}**" if v is not None and best is not None and v <= best * (1 + 1e-9) else text)
        evals = "/".join(str(by[m].get("evaluations", "-")) if m in by else "…" for m in ("sa", "random"))
        share = any_row.get("launch_share")
        lines.append(
            f"| {key[0]} | {key[1].split('x')[0]} | {any_row['nodes']} | {_ms(any_row.get('one_gpu_step_s'))} | "
            f"{'-' if share is None else f'{share:.1%}'} | {_ms(any_row.get('lower_bound'))} | " + " | ".join(shown) + f" | {evals} |"
        )
        if not finished:
            continue
        complete += 1
        expert = values.get("human-expert")
        winners = [m for m, v in values.items() if v is not None and v <= best * (1 + 1e-9)]
        for m in winners:
            wins[m] += 1.0 / len(winners)
        for m, v in values.items():
            if v is not None and expert:
                ratios[m].append(v / expert)
    def geomean(xs: list[float]) -> str:
        return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.3f}" if xs else "-"

    pad = " | " * 6
    lines.append(f"| geomean x human-expert ({complete} complete cells){pad}" + " | ".join(geomean(ratios[m]) for m in METHODS) + " | |")
    lines.append(f"| cells won (ties split){pad}" + " | ".join(f"{wins[m]:.1f}" for m in METHODS) + " | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="bench_placement.py --json files, merged in order")
    args = parser.parse_args(argv)
    print(markdown(load_rows(args.json)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
