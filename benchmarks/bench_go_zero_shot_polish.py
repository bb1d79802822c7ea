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
  placements), and `control@warm+S`, the control at the CPU seconds that took. With several
  `--warm-seed-seconds` B, one column `warmB+S` per pair. The warm control's seeds get the same
  budget as the warm zero-shot's (`--control-seeds same`, so the two run the same seeds and a gap is
  the policy's edits); `half` gives them half the control's seconds, as the cold columns' control and
  RESULTS.md h17's tables do. `--no-cold-search` skips the `zero-shot+S` columns (and their controls).
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
from compiler_opt.rl.config import POLISH_RACES, TrainConfig
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
    parser.add_argument("--warm-seed-seconds", nargs="+", type=float, default=[0.0],
                        help="--warm: the seeds' CPU budgets (zero_shot seed_seconds; 0: every seed runs); several: a column per pair with --polish-seconds")
    parser.add_argument("--control-seeds", choices=("same", "half"), default="same",
                        help="the warm control's seed budget: the warm zero-shot's (same) or half the control's seconds (half, RESULTS.md h17)")
    parser.add_argument("--polish-race", choices=POLISH_RACES, default=TrainConfig.polish_race,
                        help="how the zero-shot's search shares its seconds between starts (zero_shot polish_race; the controls keep TrainConfig.polish_race)")
    parser.add_argument("--no-cold-search", action="store_true", help="skip the zero-shot+S columns (the policy's answer alone stays)")
    parser.add_argument("--fine-tune", nargs="*", default=[], help="bench_go.py JSON files with go-fine-tune rows for these cells")
    args = parser.parse_args(argv)
    if any(not s > 0 for s in args.polish_seconds):
        parser.error("--polish-seconds must be > 0")
    if any(not s >= 0 for s in args.warm_seed_seconds):
        parser.error("--warm-seed-seconds must be >= 0")
    if args.no_cold_search and not args.warm:
        parser.error("--no-cold-search leaves only the zero-shot column without --warm")
    fine_tune = fine_tune_ratios(args.fine_tune) if args.fine_tune else {}
    policy = load_policy(args)
    levels = policy.config
    # (column, search seconds, seeds, seed budget); the seed budget is None for the cold columns
    runs: list[tuple[str, float, tuple[str, ...], float | None]] = [("zero-shot", 0.0, (), None)]
    runs += [] if args.no_cold_search else [(f"zero-shot+{s:g}", s, (), None) for s in args.polish_seconds]
    if args.warm:
        several = len(args.warm_seed_seconds) > 1
        runs += [(f"warm{b:g}+{s:g}" if several else f"warm+{s:g}", s, DEFAULT_SEEDS, b) for b in args.warm_seed_seconds for s in args.polish_seconds]
    searched = [run for run in runs if run[1] > 0]
    columns = [run[0] for run in runs] + ([] if args.no_control else [f"control@{run[0].removeprefix('zero-shot+')}" for run in searched])
    rows = []
    for spec, devices, env in cells(args):
        row: dict = {"workload": spec, "devices": devices, "nodes": env.problem.num_nodes}
        for column, seconds, seeds, seed_budget in runs:
            began = time.process_time()
            found = zero_shot(policy, env, args.samples, seed=args.seed, seeds=seeds, polish_seconds=seconds, seed_seconds=seed_budget or 0.0,
                              polish_race=args.polish_race)
            row[column] = found.score.step_time_s / env.reference_step_s
            row[f"{column}_s"] = time.process_time() - began
        if not args.no_control:
            for column, _, _, seed_budget in searched:
                cpu = row[f"{column}_s"]  # the control gets what the policy's run took
                same = seed_budget is not None and args.control_seeds == "same"
                began = time.process_time()
                done = seeds_and_polish(env, cpu, seed=args.seed, fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels,
                                        seed_seconds=seed_budget if same else None)
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
    write_json(args.json, {"argv": argv if argv is not None else sys.argv, "polish_race": args.polish_race, "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
