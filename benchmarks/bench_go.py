"""GO (one / zero-shot / fine-tune), the HDP-style reference and every classical method, per cell.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_go.py --paper-sizes \\
        --workloads inception-v3:inference amoebanet:inference rnnlm-8:inference \\
        --devices 2xV100 4xV100 8xV100 --seconds 60 --hdp-seconds 240 --rows classical \\
        --json benchmarks/results/bench_go_paper.json

GO's fine-tune and GO-one rows warm-start by default (compiler_opt/rl/warm_start.py: cheap
classical placements seed the search, their CPU seconds inside the row's budget; the row records
its seeds); the `-cold` rows run without a warm start. `go-zero-shot-warm`: zero-shot (no
training) whose samples edit the best of the same seeds. `go-zero-shot-polish`: the cold zero-shot
answer, then `--zero-shot-polish-seconds` CPU seconds of local search from it (no training).
`go-zero-shot-warm-polish`: the ten-second zero-shot (RESULTS.md h18): the same seeds within
`--zero-shot-seed-seconds`, the policy's edits of the best, then `--zero-shot-warm-polish-seconds`
of the search (defaults 2 and 3, `rl.trainer.WARM_ZERO_SHOT_*`).

A cell is (workload, devices). Every answer is scored by the same simulator on the same
`SimulationProblem` (`GraphEnvironment`). Classical placements (all of `bench`'s methods) get the
framework's default fusion kept within each device and default priorities, exactly as `compiler-opt
bench` and RESULTS.md (d) score them (since the sixth session; before, the `fuse` pass under each
placement, on graphs whose cheap calls were not inlined); HDP places only (same default fusion); GO decides placement, fusion and priorities jointly
(`go-fine-tune-placement-only`, `go-one-placement-only`, `go-zero-shot-placement-only`: GO
deciding placement alone with the default fusion and priorities, the joint-vs-placement ablation
at the same budget).

Time is the budget, counted as CPU seconds of the benchmark process (`time.process_time()`, one
torch thread): on this shared 2-core machine the wall time one CPU second takes varies several-fold
from minute to minute with the other sessions' load, so wall-clock budgets would not be the same
budget for two rows run at different times. `go-fine-tune`, `go-fine-tune-placement-only`,
`go-one`, `sa` and `random` all get `--seconds` CPU seconds per cell (sa/random: short pilots
measure CPU seconds per evaluation and the evaluation budget is set to fill `--seconds`; their
schedules depend on the budget). `hdp` gets `--hdp-seconds`. Rows report CPU seconds
(`seconds`) and wall seconds (`wall_seconds`). Searching rows record their best-so-far curve
(`curve`: [CPU seconds, step time] pairs) so time-to-quality can be compared (HDP vs GO).
`dp-ls` gets `--classical-budget` evaluations, `cp-sat` `--cp-sat-seconds` (its own wall limit).

`--rows` picks row groups (classical, hdp, go-one, go-zero-shot, go-fine-tune,
go-fine-tune-placement-only); rows already in `--json` are kept and skipped, and the file is
rewritten after every row, so a long run can be split (the classical rows do not depend on the
checkpoint) and resumed. Ratios: to the human-expert reference and to the lower bound
(`step_time_lower_bound`, fusion-aware).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from compiler_opt.cli._render import Table, render_tables
from compiler_opt.policy import load_checkpoint
from compiler_opt.rl import GraphEnvironment, TrainConfig, load_graph, make_policy, run_training, zero_shot
from compiler_opt.rl.config import POLISH_PRIORITIES, POLISH_RACES, START_ORDERS
from compiler_opt.rl.trainer import WARM_ZERO_SHOT_POLISH_SECONDS, WARM_ZERO_SHOT_SEED_SECONDS
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from cost_model.lower_bound import step_time_lower_bound
from graph_ir._gc import gc_frozen
from passes.placement.local_search import MOVE_ORDERS

ROOT = Path(__file__).resolve().parent.parent
SEARCH_CONTROL = "seeds+polish"  # GO fine-tune without the policy: its seeds and polish only (_seeds_and_polish)
GO_ROWS = (
    "go-one", "go-one-placement-only", "go-zero-shot", "go-fine-tune", "go-fine-tune-placement-only",
    "go-fine-tune-cold", "go-fine-tune-placement-only-cold", "go-one-cold", "go-zero-shot-warm", "go-zero-shot-placement-only",
    "go-zero-shot-polish", "go-zero-shot-warm-polish", SEARCH_CONTROL,
)
ROW_GROUPS = ("classical", "hdp", *GO_ROWS)
TIMED = ("sa", "random", "sa+fused", "random+fused")
# A search method named METHOD+timed (e.g. dp-ls+fused+groups+timed) searches for --seconds CPU
# seconds (the pass option `cpu_seconds`, no evaluation cap): the classical search at GO's wall time.
TIMED_SUFFIX = "+timed"
JOINT_CONTROL = "joint variants of classical (best)"  # per cell, the best METHOD+joint row (bench_go.py _with_joint_variants)


def classical_methods() -> list[str]:
    from passes.placement import METHODS

    return list(METHODS)


def _method_options(method: str) -> tuple[str, dict[str, object]]:
    """A row's method name as (placement method, options): `+groups`, dp-ls's moves carry whole
    fusion groups (RESULTS.md h7); `+fused`, option `fused` (the evaluations score the default
    fusion kept within each device, as the row does; RESULTS.md (d.3)); `+slack`, dp-ls tries
    the least-slack groups first (move_order; RESULTS.md h9)."""
    options: dict[str, object] = {}
    if method.endswith("+slack"):
        method, options = method.removesuffix("+slack"), {**options, "move_order": "slack"}
    if method.endswith("+groups"):
        method, options = method.removesuffix("+groups"), {**options, "group_moves": True}
    if method.endswith("+fused"):
        method, options = method.removesuffix("+fused"), {**options, "fused": True}
    return method, options


def _classical(env: GraphEnvironment, method: str, **options: object) -> tuple[Decisions, float, int]:
    """A classical placement + default fusion (`_method_options`); the CPU seconds it took
    (search and fusion)."""
    from passes.placement import place_outcome

    method, named = _method_options(method)
    options = {**named, **options}
    began = time.process_time()
    with _default_groups_on(env, bool(options.get("fused"))):
        outcome = place_outcome(env.graph, method, env.topology, **options)
    device = outcome.decisions.device
    decisions = Decisions(device, env.default_fusion(device), np.zeros(env.problem.num_nodes))
    return decisions, time.process_time() - began, outcome.evaluations


@contextlib.contextmanager
def _default_groups_on(env: GraphEnvironment, wanted: bool) -> Iterator[None]:
    """With `wanted`, the env's default fusion groups written on its graph's nodes for the
    duration: option `fused` keeps the groups the graph carries within each device, and the
    env's graph carries none (the env holds them as an array)."""
    groups = env.default_groups if wanted else None
    if groups is None:
        yield
        return
    nodes = env.problem.nodes
    for node, group in zip(nodes, groups.tolist()):
        node.fusion_group = None if group < 0 else group
    try:
        yield
    finally:
        for node in nodes:
            node.fusion_group = None


def _timed_search(env: GraphEnvironment, method: str, seconds: float, seed: int) -> tuple[Decisions, float, int]:
    """sa/random filling `seconds` of CPU: pilots of 5 and 25 evaluations give the setup time
    and CPU seconds per evaluation, from which the evaluation budget is set (the rows of RESULTS
    (h1)-(h7); `METHOD+timed` rows use the pass option `cpu_seconds` instead); since the forty-fourth
    session `cpu_seconds` also caps the run."""
    from passes.placement import place_outcome

    took, used = [], []
    base, options = _method_options(method)
    for budget in (5, 25):
        began = time.process_time()
        with _default_groups_on(env, bool(options.get("fused"))):
            used.append(place_outcome(env.graph, base, env.topology, budget=budget, seed=seed, **options).evaluations or budget)
        took.append(time.process_time() - began)
    # The evaluations a run really used (a search may stop early): a difference of ~0 would
    # otherwise read as free evaluations and ask for an endless budget.
    if used[1] > used[0] and took[1] > took[0]:
        per_eval = (took[1] - took[0]) / (used[1] - used[0])
    else:
        per_eval = took[1] / max(used[1], 1)
    per_eval = max(per_eval, 1e-3)
    setup = max(took[0] - used[0] * per_eval, 0.0)
    budget = min(max(10, int((seconds - setup) / per_eval)), 20000)
    # The estimate can be far off on large graphs (sa+fused on gnmt-8 2xV100: 181 CPU s for a 60-s row, forty-fourth
    # session), so the run also stops at the row's seconds (pass option `cpu_seconds`), keeping its best placement.
    return _classical(env, method, budget=budget, seed=seed, cpu_seconds=seconds)


def _go_tuned(env: GraphEnvironment, mode: str, args: argparse.Namespace, *, warm: bool) -> tuple[Decisions, float, int, list, dict]:
    """GO fine-tune (from the checkpoint) or GO-one (fresh weights) for `args.seconds` CPU
    seconds in all (the fine-tune's greedy start and the warm start's seeds included); the
    curve is [CPU seconds, best step time so far]; `warm`: the warm start (TrainConfig default
    seeds) or none. The extra dict records the seeds (method, step time, CPU seconds)."""
    began = time.process_time()
    torch.manual_seed(args.seed)
    config = TrainConfig(
        mode=mode, workloads=[env.name], devices=["cell"], iterations=100000, samples_per_graph=args.samples,
        seed=args.seed, init_checkpoint=args.checkpoint if mode == "fine-tune" else "", learning_rate=args.lr, max_cpu_seconds=args.seconds,
        warm_start=None if warm else [], polish_fraction=args.polish_fraction, polish_starts=args.polish_starts, policy_starts=args.policy_starts, polish_group_moves=not args.polish_node_moves,
        polish_move_order=args.polish_move_order, polish_first_seeds=tuple(args.polish_first_seeds), polish_start_order=args.polish_start_order,
        polish_priorities=args.polish_priorities, polish_race=args.polish_race,
        ppo_patience_cpu=args.ppo_patience, decoded_start_samples=args.decoded_start_samples,
    )
    policy = make_policy(config)
    # As the `go` pass: the policy's greedy answer starts a fine-tune only without a warm start
    # (the seeds, the reference first, come sooner and better).
    candidates = [zero_shot(policy, env, 1, seed=args.seed)] if mode == "fine-tune" and not config.seed_methods() else []
    start = time.process_time() - began
    config.max_cpu_seconds = max(args.seconds - start, 1e-3)  # one budget for the whole row
    curve = [[start, candidates[0].score.step_time_s]] if candidates and not candidates[0].score.oom else []
    result = run_training(config, envs=[env], policy=policy, progress=False, save=False)
    seeds = result.seeds.get(env.label, [])
    fitting_seeds = [s.score.step_time_s for s in seeds if s.fits]
    if fitting_seeds:
        curve.append([start + result.seed_cpu_seconds, min([*fitting_seeds, *[p[1] for p in curve]])])
    candidates.extend(result.best.values())
    for record in result.history:
        if math.isfinite(record.get("best_ratio_geomean", math.nan)):
            curve.append([start + record["cpu_seconds"], record["best_ratio_geomean"] * env.reference_step_s])
    polished = result.polished.get(env.label)
    decoded = result.decoded.get(env.label, [])
    if polished is not None and polished.improved:
        curve.append([time.process_time() - began, polished.score.step_time_s])
    fitting = [c for c in candidates if not (c.score.oom or c.score.invalid)] or candidates
    best = min(fitting, key=lambda c: c.score.step_time_s)
    evals = (2 if mode == "fine-tune" and not config.seed_methods() else 0) + len(seeds) + result.iterations * args.samples + (polished.evaluations if polished else 0)
    extra = {
        "seeds": [[s.method, s.score.step_time_s, s.cpu_seconds, bool(s.fits)] for s in seeds],
        "seed_cpu_seconds": result.seed_cpu_seconds,
        "iterations": result.iterations,
        "best_seed_s": min(fitting_seeds) if fitting_seeds else None,
        "start_cpu_seconds": start,
        # the polish (rl/polish.py): the answer before it, its simulations and CPU seconds
        "pre_polish_s": polished.start_step_s if polished else None,
        "polish_evaluations": polished.evaluations if polished else 0,
        "polish_cpu_seconds": polished.cpu_seconds if polished else 0.0,
        "polish_starts": polished.starts if polished else 0,
        "polish_winner": polished.winner if polished else 0,
        "polish_searches": polished.searches if polished else 0, "polish_race": args.polish_race,
        # the policy's fastest answer (the cold zero-shot's unless more starts add decodings): a polish start
        "policy_start_s": decoded[0].score.step_time_s if decoded else None,
        "polish_cpu_budget": polished.cpu_budget if polished else 0.0,
    }
    return best.decisions, time.process_time() - began, evals, curve, extra


class Bench:
    """Rows with resume: `done` holds (workload, devices, method) already in the JSON."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.path = Path(args.json)
        self.rows: list[dict] = []
        self.cells: dict[str, dict] = {}
        if self.path.exists() and not args.fresh:
            data = json.loads(self.path.read_text())
            self.rows, self.cells = data.get("rows", []), data.get("cells", {})
        self.done = {(r["workload"], r["devices"], r["method"]) for r in self.rows}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"argv": sys.argv, "machine": platform.platform(), "cells": self.cells, "rows": self.rows}, indent=1))
        os.replace(tmp, self.path)

    def run(self) -> None:
        args = self.args
        wanted = set(args.rows)
        methods = []
        if "classical" in wanted:
            methods += args.classical_methods or classical_methods()
        methods += [m for m in ("hdp", *GO_ROWS) if m in wanted]
        for spec in args.workloads:
            graph = None
            for devices in args.devices:
                todo = [m for m in methods if (self._name(spec), devices, m) not in self.done]
                if not todo:
                    continue
                if graph is None:
                    name, graph = load_graph(spec, paper=args.paper_sizes)
                env = GraphEnvironment(name, graph, load_topology(devices), exact_cycles=args.cycle_check == "exact")
                key = f"{name}@{devices}"
                if key not in self.cells:
                    began = time.perf_counter()
                    self.cells[key] = {
                        "nodes": env.problem.num_nodes, "reference_step_s": env.reference_step_s,
                        "lower_bound_s": step_time_lower_bound(env.problem, fusion=True), "setup_seconds": time.perf_counter() - began,
                    }
                for method in todo:
                    self.row(env, devices, key, method)

    def _name(self, spec: str) -> str:
        """The row label `load_graph` will give `spec`, without building it."""
        from compiler_opt.workloads.registry import workload_spec_label

        return workload_spec_label(spec)

    def row(self, env: GraphEnvironment, devices: str, key: str, method: str) -> None:
        args = self.args
        curve: list = []
        wall_began = time.perf_counter()
        try:
            with gc_frozen():  # every row alike: the graph's objects out of the collector's scans (graph_ir._gc)
                decisions, seconds, evals, curve, extra = self._decide(env, method)
        except Exception as err:  # one failing method must not sink the table (cp-sat's size limit)
            from graph_ir.errors import CompilerOptError

            if not isinstance(err, (CompilerOptError, ValueError)):
                raise
            self.rows.append({"workload": env.name, "devices": devices, "method": method, "nodes": env.problem.num_nodes,
                              "error": str(err).splitlines()[0], "step_time_s": math.inf, "oom": False, "invalid": True,
                              "vs_expert": math.inf, "vs_bound": math.inf, "seconds": 0.0, "evaluations": 0, "curve": []})
            self.done.add((env.name, devices, method))
            self.save()
            print(f"{key} {method}: error {self.rows[-1]['error']}", file=sys.stderr, flush=True)
            return
        wall = time.perf_counter() - wall_began
        score = env.score_decisions(decisions)
        cell = self.cells[key]
        self.rows.append({
            "workload": env.name, "devices": devices, "method": method, "nodes": env.problem.num_nodes,
            "step_time_s": score.step_time_s, "oom": score.oom, "invalid": score.invalid,
            "vs_expert": score.step_time_s / cell["reference_step_s"], "vs_bound": score.step_time_s / cell["lower_bound_s"],
            "seconds": seconds, "wall_seconds": wall, "evaluations": evals, "curve": curve, "checkpoint": args.checkpoint if method.startswith("go-") and not method.startswith("go-one") else None,
            **extra,
        })
        self.done.add((env.name, devices, method))
        self.save()
        print(f"{key} {method}: {score.step_time_s * 1e3:.4f} ms ({self.rows[-1]['vs_expert']:.3f}x expert) {seconds:.1f} CPU s, {wall:.1f} s", file=sys.stderr, flush=True)

    def _decide(self, env: GraphEnvironment, method: str) -> tuple[Decisions, float, int, list, dict]:
        args = self.args
        curve: list = []
        extra: dict = {}
        if method.endswith("+joint"):
            return _with_joint_variants(env, *self._decide(env, method.removesuffix("+joint")))
        if method in TIMED:
            decisions, seconds, evals = _timed_search(env, method, args.seconds, args.seed)
        elif method.endswith(TIMED_SUFFIX):
            decisions, seconds, evals = _classical(env, method.removesuffix(TIMED_SUFFIX), budget=10**9, cpu_seconds=args.seconds, seed=args.seed)
        elif _plain(method) == "dp-ls":
            decisions, seconds, evals = _classical(env, method, budget=args.classical_budget, seed=args.seed)
        elif _plain(method) == "cp-sat":
            decisions, seconds, evals = _classical(env, method, time_limit_s=args.cp_sat_seconds, seed=args.seed)
        elif method == "hdp":
            from compiler_opt.rl.hdp import HdpConfig, train_hdp

            began = time.process_time()
            result = train_hdp(env, HdpConfig(seed=args.seed, max_cpu_seconds=args.hdp_seconds, samples=args.samples, groups=args.hdp_groups))
            decisions, seconds, evals = result.decisions, time.process_time() - began, result.evaluations
            curve = [[cpu, step] for _, step, cpu in result.curve]
        elif method in ("go-zero-shot", "go-zero-shot-warm", "go-zero-shot-placement-only", "go-zero-shot-polish", "go-zero-shot-warm-polish"):
            from compiler_opt.policy.partitioned import AGREEMENT_EXPONENTS
            from compiler_opt.rl.trainer import JOINT_CANDIDATES
            from compiler_opt.policy.smoothing import SMOOTHING_WEIGHTS
            from compiler_opt.rl.warm_start import DEFAULT_SEEDS

            torch.manual_seed(args.seed)
            policy, _ = load_checkpoint(None if args.checkpoint == "default" else args.checkpoint)
            began = time.process_time()
            seeds = DEFAULT_SEEDS if method.endswith(("-warm", "-warm-polish")) else ()
            warm_polish = method == "go-zero-shot-warm-polish"
            polish_seconds = args.zero_shot_warm_polish_seconds if warm_polish else args.zero_shot_polish_seconds if method.endswith("-polish") else 0.0
            # placement-only: the default fusion and flat priorities decode every candidate (no joint variants)
            run_env = env.as_placement_only() if method.endswith("-placement-only") else env
            found = zero_shot(policy, run_env, args.zero_shot_samples, seed=args.seed, seeds=seeds, smoothing=() if args.no_smoothing else SMOOTHING_WEIGHTS, coarsen=not args.no_coarsen, partition=() if args.no_partition else AGREEMENT_EXPONENTS, joint=0 if args.no_joint else JOINT_CANDIDATES, polish_seconds=polish_seconds, seed_seconds=args.zero_shot_seed_seconds if warm_polish else 0.0)
            decisions, seconds, evals = found.decisions, time.process_time() - began, found.evaluations
        elif method == SEARCH_CONTROL:
            decisions, seconds, evals, curve, extra = _seeds_and_polish(env, args)
        elif method.startswith(("go-fine-tune", "go-one")):
            run_env = env
            base = method.removesuffix("-cold")
            if base.endswith("-placement-only"):
                run_env = env.as_placement_only()  # sharing the cell's reference and default fusion, as the joint row does
            mode = "go-one" if method.startswith("go-one") else "fine-tune"
            decisions, seconds, evals, curve, extra = _go_tuned(run_env, mode, args, warm=not method.endswith("-cold"))
        else:
            decisions, seconds, evals = _classical(env, method, seed=args.seed)
        return decisions, seconds, evals, curve, extra


def _seeds_and_polish(env: GraphEnvironment, args: argparse.Namespace) -> tuple[Decisions, float, int, list, dict]:
    """The control for GO's learned part: `go-fine-tune`'s warm start (the same seeds and joint
    seeds, the same share of `--seconds`) and its polish (rl/polish.py: the same starts, moves and
    joint variants) on every CPU second left, with no policy and no PPO."""
    from compiler_opt.policy.config import PolicyConfig
    from compiler_opt.rl.polish import seeds_and_polish

    began = time.process_time()
    levels = PolicyConfig()
    found = seeds_and_polish(
        env, args.seconds, seed=args.seed, fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels,
        starts=args.polish_starts, group_moves=not args.polish_node_moves, move_order=args.polish_move_order, first_seeds=args.polish_first_seeds,
        start_order=args.polish_start_order, priorities=args.polish_priorities, race=args.polish_race,
    )
    seeds, head, done, seed_cpu = found.seeds, found.head, found.polished, found.seed_cpu_seconds
    curve = [[seed_cpu, head.score.step_time_s], [time.process_time() - began, done.score.step_time_s]]
    extra = {
        "seeds": [[s.method, s.score.step_time_s, s.cpu_seconds, bool(s.fits)] for s in seeds], "seed_cpu_seconds": seed_cpu,
        "iterations": 0, "best_seed_s": head.score.step_time_s, "start_cpu_seconds": 0.0, "pre_polish_s": head.score.step_time_s,
        "polish_evaluations": done.evaluations, "polish_cpu_seconds": done.cpu_seconds, "polish_starts": done.starts, "polish_winner": done.winner, "polish_searches": done.searches, "polish_race": args.polish_race,
    }
    return done.decisions, time.process_time() - began, len(seeds) + done.evaluations, curve, extra


def _with_joint_variants(env: GraphEnvironment, decisions: Decisions, seconds: float, evals: int, curve: list, extra: dict) -> tuple[Decisions, float, int, list, dict]:
    """`METHOD+joint` (a control, not a classical row): the method's answer or the best of its
    joint variants (rl/joint.py, the shipped policy's levels), as GO's warm start and polish try
    them, so the table shows what the variants give without any search or policy."""
    from compiler_opt.policy.config import PolicyConfig
    from compiler_opt.rl.joint import best_joint_variant

    began = time.process_time()
    levels = PolicyConfig()
    chosen, best, _, tried = best_joint_variant(
        env, decisions, env.score_decisions(decisions), fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels
    )
    return best, seconds + time.process_time() - began, evals + tried, curve, {**extra, "joint_variant": chosen}


def seed_curve(row: dict) -> list:
    """The row's best-so-far curve with each warm-start seed at the CPU second it finished (the
    curve holds the seeds as one point, when the last one finished: a cheap seed found early,
    e.g. metis at 0.2 s before m-etf's 8 s on 10k nodes, would otherwise count as found late).
    Seeds run in their listed order, each timed on its own (`Seed.cpu_seconds`)."""
    curve = [list(p) for p in row.get("curve") or []]
    seeds, start = row.get("seeds") or [], row.get("start_cpu_seconds")
    if not seeds or start is None:  # rows written before the start was stored keep their curve
        return curve
    points, best, elapsed = [], min((p[1] for p in curve if p[0] <= start + 1e-9), default=math.inf), start
    for _method, step, cpu, fits in seeds:
        elapsed += cpu
        if fits:
            best = min(best, step)
        if math.isfinite(best):
            points.append([elapsed, best])
    return sorted(curve + points, key=lambda p: p[0])


def time_to_reach(curve: list, target: float) -> float | None:
    """First time a best-so-far curve is at or below `target` (None: never)."""
    for seconds, step in curve:
        if step <= target * (1 + 1e-9):
            return seconds
    return None


def bench_rows(paths: list[str], cells: dict[str, dict]) -> list[dict]:
    """Rows of `compiler-opt bench` / `bench_placement.py` JSON files (RESULTS.md (d)) for the
    cells GO ran, in this script's row form: the same graphs and the same scoring (the default
    fusion kept within each device), so their step times join GO's table as they are. A
    fusion-aware row (`--fusion-aware`, (d.3)) is named `METHOD+fused`. The cell's reference
    must match (d)'s human-expert row: a mismatch means the two runs scored different graphs."""
    out: dict[tuple[str, str, str], dict] = {}  # a cell run twice: the later file's row
    for path in paths:
        for row in json.loads(Path(path).read_text())["rows"]:
            cell = cells.get(f"{row['workload']}@{row['devices']}")
            value = row.get("objective_value")
            if cell is None or value is None or row.get("objective", "latency") != "latency":
                continue
            if row["method"] == "human-expert" and not row.get("fusion_aware") and not math.isclose(value, cell["reference_step_s"], rel_tol=1e-9):
                raise SystemExit(f"{path}: {row['workload']}@{row['devices']} human-expert {value:.6g} s != GO's reference {cell['reference_step_s']:.6g} s")
            method = row["method"] + ("+fused" if row.get("fusion_aware") else "")
            out[(row["workload"], row["devices"], method)] = {
                "workload": row["workload"], "devices": row["devices"], "nodes": row["nodes"], "method": method,
                "step_time_s": value, "oom": bool(row.get("oom")), "invalid": False,
                "vs_expert": value / cell["reference_step_s"], "vs_bound": value / cell["lower_bound_s"],
                "seconds": row.get("search_cpu_seconds") or 0.0, "evaluations": row.get("evaluations") or 0, "curve": [],
                "source": os.path.basename(path),
            }
    return list(out.values())


def merge_rows(rows: list[dict]) -> list[dict]:
    """One row per (workload, devices, method): a learned row from the first file that has it
    (`--json` before `--also`: a rerun replaces the earlier run's row), a classical row at its
    best over the files (the same method run twice with different budgets: (d.3)'s 2000
    evaluations of dp-ls+fused beside this script's `--classical-budget`)."""
    classical = set(classical_methods())
    out: dict[tuple[str, str, str], dict] = {}
    for row in rows:
        key = (row["workload"], row["devices"], row["method"])
        kept = out.get(key)
        if kept is None or (_is_classical(row["method"], classical) and row["step_time_s"] < kept["step_time_s"]):
            out[key] = row
    return list(out.values())


def _is_classical(method: str, classical: set[str]) -> bool:
    return _plain(method) in classical


def _plain(method: str) -> str:
    """The placement method of a classical row name: METHOD, METHOD+fused, METHOD+fused+groups,
    each optionally +timed."""
    return method.removesuffix(TIMED_SUFFIX).removesuffix("+groups").removesuffix("+fused")


def tables(rows: list[dict]) -> list[Table]:
    out = []
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault((row["workload"], row["devices"]), []).append(row)
    classical = set(classical_methods())
    classical |= {r["method"] for r in rows if _is_classical(r["method"], classical)}
    detail = Table("GO vs HDP vs classical (simulated step time, latency)", ["workload", "devices", "method", "step ms", "vs expert", "vs bound", "CPU s", "evals"], numeric=frozenset(range(3, 8)))
    best_rows = []
    for (workload, devices), group in cells.items():
        fitting = [r for r in group if r["method"] in classical and not r["oom"] and not r["invalid"]]
        best = min(fitting, key=lambda r: r["step_time_s"]) if fitting else None
        for row in group:
            if row["method"] in classical and row["method"] != "human-expert":
                continue
            detail.rows.append(_cells(row))
        if best is not None:
            best_rows.append({**best, "method": f"best classical ({best['method']})"})
            detail.rows.append(_cells(best_rows[-1]))
    out.append(detail)
    # METHOD+joint controls (_with_joint_variants): one column, the cell's best of them.
    joint_best = []
    for group in cells.values():
        controls = [r for r in group if r["method"].endswith("+joint") and not r["oom"] and not r["invalid"]]
        if controls:
            joint_best.append({**min(controls, key=lambda r: r["step_time_s"]), "method": JOINT_CONTROL})
    rows = [*rows, *joint_best]
    for row in joint_best:
        cells[(row["workload"], row["devices"])].append(row)
    learned = [m for m in dict.fromkeys(r["method"] for r in rows) if m not in classical and not m.endswith("+joint")]
    compact = Table("per cell: step ms (x human expert); * = no worse than the best classical", ["workload", "devices", "nodes", "human expert", "best classical", *learned], numeric=frozenset())
    best_of = {(r["workload"], r["devices"]): r for r in best_rows}
    for (workload, devices), group in cells.items():
        by = {r["method"]: r for r in group}
        best = best_of.get((workload, devices))
        line = [workload, devices, str(group[0]["nodes"]), f"{by['human-expert']['step_time_s'] * 1e3:.2f}" if "human-expert" in by else "-",
                f"{best['method'][len('best classical ('):-1]} {best['step_time_s'] * 1e3:.2f} ({best['vs_expert']:.3f})" if best else "-"]
        for method in learned:
            row = by.get(method)
            mark = "*" if row and best and row["step_time_s"] <= best["step_time_s"] * 1.000001 else ""
            line.append(f"{row['step_time_s'] * 1e3:.2f} ({row['vs_expert']:.3f}){mark}" if row and math.isfinite(row["step_time_s"]) else "-")
        compact.rows.append(line)
    out.append(compact)
    methods = ["human-expert", *learned]
    summary = Table("geometric mean over cells", ["method", "cells", "vs expert", "vs bound", "wins (<= best classical)", "mean CPU s"], numeric=frozenset({1, 2, 3, 4, 5}))
    for method in [*methods, "best classical", *sorted(classical - {"human-expert"})]:
        mine = [r for r in rows if r["method"] == method] if method != "best classical" else best_rows
        mine = [r for r in mine if math.isfinite(r["step_time_s"])]
        if not mine:
            continue
        wins = compared = 0
        for (w, d), group in cells.items():
            steps = [r["step_time_s"] for r in group if r["method"] in classical and not r["oom"]]
            here = [r for r in mine if r["workload"] == w and r["devices"] == d]
            if steps and here:  # a cell without classical rows (GO rows run alone) is not counted
                compared += 1
                wins += any(r["step_time_s"] <= min(steps) * 1.000001 for r in here)
        geo = lambda key: math.exp(np.mean([math.log(r[key]) for r in mine]))  # noqa: E731
        won = f"{wins}/{compared}" if compared else "-"
        summary.rows.append([method, str(len(mine)), f"{geo('vs_expert'):.3f}", f"{geo('vs_bound'):.2f}", won, f"{np.mean([r['seconds'] for r in mine]):.1f}"])
    out.append(summary)
    speed = Table("CPU seconds to reach HDP's final quality", ["workload", "devices", "hdp best ms", "hdp s", "go-fine-tune s", "speed-up"], numeric=frozenset(range(2, 6)))
    for (workload, devices), group in cells.items():
        by = {r["method"]: r for r in group}
        if "hdp" in by and "go-fine-tune" in by and by["hdp"]["curve"]:
            target = by["hdp"]["step_time_s"]
            hdp_t = time_to_reach(by["hdp"]["curve"], target)
            go_t = time_to_reach(seed_curve(by["go-fine-tune"]), target)
            ratio = f"{hdp_t / go_t:.1f}x" if hdp_t and go_t else "never" if go_t is None else "-"
            speed.rows.append([workload, devices, f"{target * 1e3:.4f}", f"{hdp_t:.1f}" if hdp_t else "-", f"{go_t:.1f}" if go_t is not None else "not reached", ratio])
    if speed.rows:
        out.append(speed)
    warm = Table(
        "warm start: best seed, PPO's best and the polished answer (x human expert)",
        ["workload", "devices", "method", "best seed", "seed x expert", "PPO x expert", "answer x expert", "gain", "seed CPU s", "PPO iterations", "polish evals"],
        numeric=frozenset(range(4, 11)),
    )
    for row in rows:
        if row.get("seeds") and row.get("best_seed_s"):
            ref = row["step_time_s"] / row["vs_expert"]
            head = min((s for s in row["seeds"] if s[3]), key=lambda s: s[1])
            gain = 1 - row["step_time_s"] / row["best_seed_s"]
            before = row.get("pre_polish_s")
            warm.rows.append([
                row["workload"], row["devices"], row["method"], head[0], f"{row['best_seed_s'] / ref:.3f}",
                f"{before / ref:.3f}" if before else "-", f"{row['vs_expert']:.3f}", f"{gain * 100:.1f}%",
                f"{row['seed_cpu_seconds']:.1f}", str(row.get("iterations", "")), str(row.get("polish_evaluations") or "-"),
            ])
    if warm.rows:
        out.append(warm)
    return out


def _cells(row: dict) -> list[str]:
    step = "OOM" if row["oom"] else "invalid" if row["invalid"] else f"{row['step_time_s'] * 1e3:.4f}"
    return [row["workload"], row["devices"], row["method"], step, f"{row['vs_expert']:.3f}", f"{row['vs_bound']:.2f}", f"{row['seconds']:.1f}", str(row["evaluations"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=["inception-v3:inference", "amoebanet:inference", "rnnlm-8:inference", "gnmt-8:inference"])
    parser.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    parser.add_argument("--paper-sizes", action="store_true", help="suite workloads at their paper sizes")
    parser.add_argument("--rows", nargs="+", default=list(ROW_GROUPS), choices=ROW_GROUPS)
    parser.add_argument("--checkpoint", default="default")
    parser.add_argument("--cycle-check", choices=("limited", "exact"), default="exact",
                        help="GO's fusion decoder: the exact cycle check, or the 4096-node search used before RESULTS.md h19 (limited)")
    parser.add_argument("--seconds", type=float, default=60.0, help="CPU seconds of go-fine-tune, go-one, placement-only, sa, random per cell")
    parser.add_argument("--hdp-seconds", type=float, default=240.0, help="CPU seconds of hdp per cell")
    parser.add_argument("--hdp-groups", type=int, default=64)
    parser.add_argument("--samples", type=int, default=6, help="episodes per PPO / REINFORCE iteration")
    parser.add_argument("--zero-shot-samples", type=int, default=8, help="samples of the cold zero-shot: the go-zero-shot rows'")
    parser.add_argument("--decoded-start-samples", type=int, default=TrainConfig.decoded_start_samples,
                        help="samples of the policy's decoded start of fine-tune / go-one's polish (default: TrainConfig's, 0; "
                             "the forty-seventh session's rows and earlier used --zero-shot-samples, 8)")
    parser.add_argument("--zero-shot-polish-seconds", type=float, default=5.0, help="go-zero-shot-polish: CPU seconds of local search from the zero-shot's answer")
    parser.add_argument("--zero-shot-seed-seconds", type=float, default=WARM_ZERO_SHOT_SEED_SECONDS, help="go-zero-shot-warm-polish: CPU seconds of the seeds")
    parser.add_argument("--zero-shot-warm-polish-seconds", type=float, default=WARM_ZERO_SHOT_POLISH_SECONDS, help="go-zero-shot-warm-polish: CPU seconds of local search")
    parser.add_argument("--no-partition", action="store_true", help="zero-shot without the partitioned decodings of its answer (the placement distributions cut by METIS, policy/partitioned.py)")
    parser.add_argument("--no-joint", action="store_true", help="zero-shot without the joint variants (merged fusion, bottom-level priorities) of its fastest candidates (rl/joint.py)")
    parser.add_argument("--no-coarsen", action="store_true", help="zero-shot without the coarsened decodings of its answer (fewer stages down to one device, policy/coarsen.py)")
    parser.add_argument("--no-smoothing", action="store_true", help="zero-shot without the smoothed decodings of its greedy answer (policy/smoothing.py)")
    parser.add_argument("--classical-budget", type=int, default=1000, help="dp-ls evaluations")
    parser.add_argument("--cp-sat-seconds", type=float, default=20.0)
    parser.add_argument("--lr", type=float, default=TrainConfig.learning_rate, help="PPO learning rate (default: TrainConfig's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--polish-starts", type=int, default=TrainConfig.polish_starts, help="start placements the final local search races: the answer's and the fastest distinct seeds' (1: the answer's only)")
    parser.add_argument("--policy-starts", type=int, default=TrainConfig.policy_starts, help="of the polish's starts, how many are the policy's own answers, before the seeds: the cold zero-shot's, then the greedy answer's partitioned / coarsened decodings (0: seeds only)")
    parser.add_argument("--polish-move-order", choices=MOVE_ORDERS, default=TrainConfig.polish_move_order, help="the final local search's move order (slack: least-slack groups first)")
    parser.add_argument("--polish-first-seeds", nargs="*", default=list(TrainConfig.polish_first_seeds),
                        help="warm-start seeds whose placements the polish races right after the policy's starts, before the fastest seeds (RESULTS.md h20)")
    parser.add_argument("--polish-start-order", choices=START_ORDERS, default=TrainConfig.polish_start_order,
                        help="which seeds the polish races: the fastest by their own scores (seed) or as its search scores their placements (polish; RESULTS.md h22)")
    parser.add_argument("--polish-priorities", choices=POLISH_PRIORITIES, default=TrainConfig.polish_priorities,
                        help="the priorities the polish's search scores with: the answer's, the default ones, or both (every start raced under each)")
    parser.add_argument("--polish-race", choices=POLISH_RACES, default=TrainConfig.polish_race,
                        help="how the polish's starts share its seconds: successive halving, or one after another, each until its search stalls")
    parser.add_argument("--ppo-patience", type=float, default=TrainConfig.ppo_patience_cpu,
                        help="go-fine-tune/go-one: PPO stops after this many CPU s without a better answer and the polish gets the rest (0: off; RESULTS.md h23)")
    parser.add_argument("--polish-node-moves", action="store_true", help="the final local search moves single nodes, not whole fusion groups (the sixth/seventh sessions' polish)")
    parser.add_argument("--polish-fraction", type=float, default=TrainConfig.polish_fraction, help="share of --seconds for the final local search of go-fine-tune/go-one (0: off)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="ignore rows already in --json")
    parser.add_argument("--table-only", action="store_true", help="print the tables of --json and exit")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown (for RESULTS.md)")
    parser.add_argument("--also", nargs="*", default=[], help="more JSON files of this script whose rows join the tables (runs split across processes)")
    parser.add_argument("--classical-methods", nargs="*", default=[], help="the classical row group's methods (default: all of bench's); METHOD+fused runs METHOD with option fused, dp-ls+fused+groups adds group_moves; a +timed suffix makes a search stop after --seconds CPU seconds (pass option cpu_seconds)")
    parser.add_argument("--classical-from", nargs="*", default=[], help="bench_placement.py / `compiler-opt bench` JSON files (RESULTS.md (d)) whose rows for GO's cells join the tables as the classical rows")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_go.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bench = Bench(args)
    if not args.table_only:
        bench.run()
    rows = list(bench.rows)
    cells = dict(bench.cells)
    for extra in args.also:
        data = json.loads(Path(extra).read_text())
        rows += data["rows"]
        cells.update(data.get("cells", {}))
    rows = merge_rows(rows + bench_rows(args.classical_from, cells))
    if args.markdown:
        for table in tables(rows):
            print(f"\n{table.title}\n")
            print("| " + " | ".join(table.headers) + " |")
            print("|" + "---|" * len(table.headers))
            for cells in table.rows:
                print("| " + " | ".join(cells) + " |")
    else:
        render_tables(tables(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
