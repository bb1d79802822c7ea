"""Zero-shot with a short local search on its answer, against the same seconds without a policy.

    PYTHONPATH=. taskset -c 1 python benchmarks/bench_go_zero_shot_polish.py --paper-sizes --polish-seconds 2 5 \\
        --fine-tune ft_a.json ft_b.json --json zs_polish.json

Per (workload, devices) cell, the shipped checkpoint (or `--checkpoint`), one torch thread:
- `zero-shot`: `zero_shot(policy, env, samples)`, the policy's answer alone (what `go-zero-shot` scores);
- `zero-shot+S`: the same call with `polish_seconds=S`: that answer, then S CPU seconds of the fine-tune's
  local search from it (rl/polish.py), no training;
- `control@S`: no policy at the same CPU seconds as `zero-shot+S` took on that cell: the classical
  warm-start seeds and the same local search from the fastest of them (`rl.polish.seeds_and_polish`,
  what `bench_go.py`'s `seeds+polish` row runs);
- with `--warm`, `warm+S`: `zero_shot(..., seeds=DEFAULT_SEEDS, polish_seconds=S)` (the seeds run first,
  the episodes edit the best of them, and the search races the answer against the fastest seeds'
  placements), and `control@warm+S`, the control at the CPU seconds that took. The control's seeds get
  half its seconds and a seed predicted to end past them is skipped, which the warm zero-shot (all of
  its seeds) does run: compare seeds too before reading a gap as the policy's (RESULTS.md h17).
`--fine-tune`: `bench_go.py` JSON files with `go-fine-tune` rows for the same cells (one per run); each
column is then also read as a ratio to their geometric mean per cell, the issue's "zero-shot within 10%
of fine-tuned". Ratios to the human-expert reference; geometric means over all cells and over the
`--held-out` workloads; CPU seconds per call. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import geometric_mean

from benchmarks._go_cells import add_cell_arguments, cells, load_policy, markdown_table, write_json
from compiler_opt.rl import zero_shot
from compiler_opt.rl.polish import seeds_and_polish
from compiler_opt.rl.warm_start import DEFAULT_SEEDS


def fine_tune_ratios(paths: list[str]) -> dict[str, float]:
    """Per cell ("workload@devices"): the geometric mean over the files of `go-fine-tune`'s step time
    over the human expert's."""
    runs: dict[str, list[float]] = {}
    for path in paths:
        rows = json.loads(Path(path).read_text())["rows"]
        for row in rows:
            if row["method"] == "go-fine-tune":
                runs.setdefault(f"{row['workload']}@{row['devices']}", []).append(row["vs_expert"])
    if not runs:
        raise SystemExit(f"no go-fine-tune rows in {', '.join(paths)}")
    return {cell: geometric_mean(values) for cell, values in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cell_arguments(parser, json_name="go_zero_shot_polish.json")
    parser.add_argument("--polish-seconds", nargs="+", type=float, default=[5.0], help="CPU seconds of local search after the zero-shot")
    parser.add_argument("--no-control", action="store_true", help="skip the no-policy control")
    parser.add_argument("--warm", action="store_true", help="also zero-shot with the warm start's seeds + S seconds of search (and its control)")
    parser.add_argument("--warm-seed-seconds", type=float, default=0.0, help="--warm: the seeds' CPU budget (zero_shot seed_seconds; 0: every seed runs)")
    parser.add_argument("--fine-tune", nargs="*", default=[], help="bench_go.py JSON files with go-fine-tune rows for these cells")
    args = parser.parse_args(argv)
    if any(not s > 0 for s in args.polish_seconds):
        parser.error("--polish-seconds must be > 0")
    fine_tune = fine_tune_ratios(args.fine_tune) if args.fine_tune else {}
    policy = load_policy(args)
    levels = policy.config
    searched = [f"zero-shot+{s:g}" for s in args.polish_seconds] + ([f"warm+{s:g}" for s in args.polish_seconds] if args.warm else [])
    columns = ["zero-shot", *searched] + ([] if args.no_control else [f"control@{c.removeprefix('zero-shot+')}" for c in searched])
    rows = []
    for spec, devices, env in cells(args):
        row: dict = {"workload": spec, "devices": devices, "nodes": env.problem.num_nodes}
        runs = [("zero-shot", 0.0, ())] + [(f"zero-shot+{s:g}", s, ()) for s in args.polish_seconds]
        runs += [(f"warm+{s:g}", s, DEFAULT_SEEDS) for s in args.polish_seconds] if args.warm else []
        for column, seconds, seeds in runs:
            began = time.process_time()
            found = zero_shot(policy, env, args.samples, seed=args.seed, seeds=seeds, polish_seconds=seconds,
                              seed_seconds=args.warm_seed_seconds if seeds else 0.0)
            row[column] = found.score.step_time_s / env.reference_step_s
            row[f"{column}_s"] = time.process_time() - began
        if not args.no_control:
            for column in searched:
                cpu = row[f"{column}_s"]  # the control gets what the policy's run took
                began = time.process_time()
                done = seeds_and_polish(env, cpu, seed=args.seed, fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels)
                name = f"control@{column.removeprefix('zero-shot+')}"
                row[name] = done.polished.score.step_time_s / env.reference_step_s
                row[f"{name}_s"] = time.process_time() - began
        cell = f"{spec}@{devices}"
        if cell in fine_tune:
            row["fine-tune"] = fine_tune[cell]
        rows.append(row)
        print(f"{cell} ({row['nodes']} nodes): " + "  ".join(f"{c} {row[c]:.3f}x ({row[c + '_s']:.1f} s)" for c in columns), flush=True)
    print("\n" + "\n".join(markdown_table(rows, columns + (["fine-tune"] if fine_tune else []))))
    summary = {}
    for c in columns:
        held = [r for r in rows if r["workload"] in args.held_out]
        entry = {"geomean": geometric_mean([r[c] for r in rows]), "held_out_geomean": geometric_mean([r[c] for r in held]) if held else None}
        tuned = [r for r in rows if "fine-tune" in r]
        if tuned:
            ratios = [r[c] / r["fine-tune"] for r in tuned]
            entry["over_fine_tune"] = geometric_mean(ratios)
            entry["within_10pct"] = sum(x <= 1.1 for x in ratios)
            entry["cells_with_fine_tune"] = len(tuned)
        summary[c] = entry
        extra = f", / fine-tune {entry['over_fine_tune']:.3f} (within 10% on {entry['within_10pct']} of {entry['cells_with_fine_tune']})" if tuned else ""
        held_text = f"held out {entry['held_out_geomean']:.4f}x" if held else "no held-out cells"
        print(f"{c}: geomean {entry['geomean']:.4f}x, {held_text}{extra}")
    write_json(args.json, {"argv": argv if argv is not None else sys.argv, "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
