"""`compiler-opt bench`: every placement method on every workload, as in the placement papers' tables.

Workloads (`--workloads`, mixed freely):
- suite names from `compiler-opt workloads` with an optional mode (`resnet-50:train`), built at
  default sizes, and model files of any importable format: placed on each `--devices` topology
  (default 2xV100, 4xV100, 8xV100) and scored by the simulator with the `--costs` kernel cost
  source (default roofline; `profiled` times kernels on this machine, for `Nxhost` topologies)
  (objective default: latency);
- profiled-workload JSON files (Tarnawski et al.; `cost_model.profiled.is_profiled_workload_file`):
  placed at the file's own accelerator count and memory (`accelerators`/`memory` override them)
  and scored by the paper's cost models (objective default: throughput, latency for files under
  a `latency-inputs` folder). `expert` is a split file, or a folder holding `<name>_expert.json`
  (a training workload falls back to its inference split, as in the README); it runs as method
  `expert` and is the reference of `vs_expert` (else the `human-expert` heuristic is).
Suite names are built at their **paper sizes** (`Workload.paper_sizes`, the placement papers'
settings) unless `paper_sizes=False` (`--default-sizes`: the small sizes tests use); each graph row
carries the launch share of the workload's one-GPU step (`bench_cells.launch_share`).
Per (workload, devices, method) one row: the objective value, the lower bound and the ratio to
it, the ratio to the expert, peak memory and OOM, search seconds and evaluations. Searching
methods (sa, random, dp-ls) get `budget` objective evaluations; on graph workloads `sa` and
`random` run last in each cell and, with `equal_time` (default), get more when the slowest other
method of the cell ran longer (CPU seconds) than `budget` evaluations take (`bench_cells.equal_time_budget`);
cp-sat gets `time_limit_s`. On the README's profiled files at their own k the rows also carry the README's
reference optimum and expert numbers.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler_opt.cli._render import Table

__all__ = ["BenchSpec", "GO_METHODS", "LEARNED_METHODS", "README_REFERENCES", "bench_tables", "objective_unit", "run_bench"]

logger = logging.getLogger(__name__)

DEFAULT_DEVICES = ("2xV100", "4xV100", "8xV100")
SEARCHING = ("sa", "random", "dp-ls")
# The learned GO policy (joint placement, fusion and priorities), on graph workloads only and only
# when asked for: zero-shot takes 8 samples beside its greedy answer, fine-tune and one take
# budget // 100 PPO iterations (at least 1) of 8 episodes each.
GO_METHODS = ("go-zero-shot", "go-fine-tune", "go-one")
# The HDP-style reference (grouper + placer, REINFORCE; compiler_opt/rl/hdp.py), graph workloads
# only, when asked for: budget // 8 updates of 8 episodes; it places only (default fusion, as the
# classical rows).
LEARNED_METHODS = ("hdp", *GO_METHODS)

# shared/testdata/placement/README.md, k = 6, throughput-inputs/LayerGraphs:
# (one device, work/6 bound, contiguous DP optimum, human expert, best known non-contiguous)
README_REFERENCES: dict[str, tuple[float, float, float, float, float | None]] = {
    "resnet50_inference": (201.45, 33.58, 33.77, 43.92, None),
    "resnet50_training": (462.38, 77.06, 78.63, 112.11, None),
    "gnmt_inference": (182.56, 30.43, 32.91, 46.21, None),
    "gnmt_training": (520.45, 86.74, 107.00, 137.15, 90.95),
    "bert24_inference": (92.41, 15.40, 17.79, 20.08, None),
}


@dataclass
class BenchSpec:
    workloads: list[str]
    devices: list[str] = field(default_factory=lambda: list(DEFAULT_DEVICES))
    methods: list[str] | None = None  # None: every method (+ expert when a split is given)
    objective: str | None = None  # None: per workload kind (module docstring)
    budget: int = 1000
    time_limit_s: float = 20.0
    expert: str | None = None
    accelerators: int | None = None
    memory: float | None = None
    seed: int = 0
    costs: str = "roofline"  # kernel cost source of suite/model workloads (cost_model.costs)
    default_fusion: bool = True  # the framework's default GPU fusion before placing (suite/model workloads)
    paper_sizes: bool = True  # suite names at their paper sizes; False: the small default sizes
    equal_time: bool = True  # sa/random get at least the slowest other method's wall time (graph workloads)
    # Graphs above this many nodes get one error row per (devices, method) instead of a run: a
    # paper-size graph too large for the machine at hand says so in the table.
    max_nodes: int | None = None
    # Placement methods score the default fusion kept within each device (`fused` option) instead
    # of the unfused graph: searches then optimise the step the row reports.
    fusion_aware: bool = False


def _bench_error(message: str, **context: Any) -> Exception:
    from graph_ir.errors import CompilerOptError

    return CompilerOptError(message, **context)


def _is_reference_file(path: str, accelerators: int) -> str | None:
    parts = Path(path).resolve().parts
    stem = Path(path).stem
    if accelerators == 6 and stem in README_REFERENCES and "throughput-inputs" in parts and "LayerGraphs" in parts:
        return stem
    return None


def expert_file(workload_path: str, expert: str | None) -> str | None:
    """The expert split for a profiled workload: `expert` itself, or `<expert>/<name>_expert.json`
    (training: the inference split when there is no training one)."""
    if expert is None:
        return None
    if not os.path.isdir(expert):
        return expert
    stem = Path(workload_path).stem
    for name in (stem, stem.replace("_training", "_inference")):
        candidate = os.path.join(expert, f"{name}_expert.json")
        if os.path.isfile(candidate):
            return candidate
    return None


def _methods(spec: BenchSpec, has_expert: bool) -> list[str]:
    from passes.placement import METHODS

    known = list(METHODS) + ["expert", *LEARNED_METHODS]
    methods = spec.methods if spec.methods else list(METHODS) + (["expert"] if has_expert else [])
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise _bench_error(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(known)}", field="--methods")
    return methods


def _options(method: str, spec: BenchSpec, budget: int | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"seed": spec.seed}
    if method in SEARCHING:
        options["budget"] = spec.budget if budget is None else budget
    if method == "cp-sat":
        options["time_limit_s"] = spec.time_limit_s
    return options


def _finish(rows: list[dict[str, Any]]) -> None:
    """vs_expert and vs_lower_bound per row, against the group's expert row."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["workload"], row["devices"]), []).append(row)
    for group in groups.values():
        by_method = {r["method"]: r for r in group}
        # The expert split when it scored (it may not fit the workload, e.g. another k), else the heuristic.
        expert = by_method.get("expert")
        if expert is None or expert.get("objective_value") is None:
            expert = by_method.get("human-expert")
        reference = expert["objective_value"] if expert and expert.get("objective_value") is not None else None
        for row in group:
            value, bound = row.get("objective_value"), row.get("lower_bound")
            row["vs_expert"] = value / reference if value is not None and reference else None
            row["expert_reference"] = expert["method"] if expert else None
            row["vs_lower_bound"] = value / bound if value is not None and bound else None


def _profiled_rows(path: str, spec: BenchSpec, progress: Any) -> list[dict[str, Any]]:
    from cost_model.profiled import load_profiled_workload
    from passes.placement.profiled import place_profiled

    workload = load_profiled_workload(path, accelerators=spec.accelerators, memory=spec.memory)
    objective = spec.objective or ("latency" if "latency-inputs" in Path(path).resolve().parts else "throughput")
    expert = expert_file(path, spec.expert)
    if spec.expert is not None and expert is None:
        logger.warning("no expert split for %s in %s", path, spec.expert)
    reference = _is_reference_file(path, workload.accelerators) if objective == "throughput" else None
    label = f"{Path(path).parent.name}/{Path(path).stem}" if Path(path).parent.name else Path(path).stem
    rows = []
    for method in _methods(spec, expert is not None):
        progress.set_postfix_str(f"{Path(path).stem} {method}")
        row: dict[str, Any] = {
            "workload": label, "kind": "profiled", "path": path, "method": method,
            "devices": f"{workload.accelerators}acc+cpu", "num_devices": workload.devices, "objective": objective,
        }
        try:
            outcome = place_profiled(workload, method, objective, expert=expert, **_options(method, spec))
        except Exception as err:  # one failing method must not sink the table
            if not _is_user_error(err):
                raise
            row.update(objective_value=None, lower_bound=None, search_seconds=None, error=str(err).splitlines()[0])
        else:
            row.update(
                objective_value=outcome.value, lower_bound=outcome.lower_bound, search_seconds=outcome.seconds,
                evaluations=outcome.evaluations, oom=outcome.oom, peak_memory_fraction=outcome.peak_memory_fraction,
                valid=not outcome.violations, violations=outcome.violations,
                cpu_nodes=int((outcome.assignment == 0).sum()),
            )
            if reference:
                one, bound, optimum, expert_value, best_known = README_REFERENCES[reference]
                row.update(reference_optimum=optimum, reference_expert=expert_value, reference_best_known=best_known,
                           vs_reference_optimum=outcome.value / optimum)
        rows.append(row)
        progress.update(1)
    return rows


def _is_user_error(err: BaseException) -> bool:
    from graph_ir.errors import CompilerOptError

    return isinstance(err, (CompilerOptError, OSError, ValueError))


def _graph_rows(name: str, spec: BenchSpec, progress: Any, on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    from compiler_opt.cli.simulate_lib import load_simulation_graph
    from graph_ir.io.formats import split_module_spec
    from cost_model.costs import Target, simulate, throughput_objective
    from cost_model.lower_bound import step_time_lower_bound, work_bound
    from passes.placement import place_outcome

    from cost_model.decisions import Decisions, node_order
    from passes.fusion.defaults import apply_default_fusion, colocated_groups

    from compiler_opt.cli.bench_cells import EQUAL_TIME_METHODS, equal_time_budget, evaluation_seconds, launch_share, order_methods
    from compiler_opt.workloads.registry import parse_workload_spec

    paper = spec.paper_sizes and not os.path.exists(split_module_spec(name)[0]) and parse_workload_spec(name) is not None
    graph, label = load_simulation_graph(name, paper=paper)
    sizes = "paper" if paper else ("default" if "workload" in graph.meta else "file")
    # The framework's default fusion is applied after placement, within each device (a group the
    # placement splits stays unfused): methods place the unfused graph, the row reports the fused run.
    fusion = apply_default_fusion(graph).name if spec.default_fusion else "none"
    default_groups = np.array([-1 if n.fusion_group is None else n.fusion_group for n in node_order(graph)], dtype=np.int32)
    fusion_aware = fusion != "none" and spec.fusion_aware
    if fusion != "none" and not fusion_aware:
        for node in graph.all_nodes():
            node.fusion_group = None
    if spec.max_nodes is not None and len(graph) > spec.max_nodes:
        return _too_large_rows(graph, label, sizes, spec, progress, on_row)
    one = launch_share(graph, default_groups, costs=spec.costs)
    logger.info("%s (%s sizes, %d nodes): one-GPU step %.4g s, %d kernels, launch share %.3f",
                label, sizes, len(graph), one.step_s, one.kernels, one.share)
    objective = spec.objective or "latency"
    rows = []
    methods = [m for m in _methods(spec, False) if m != "expert"]
    if spec.equal_time:
        methods = order_methods(methods)
    for devices in spec.devices:
        target = Target.resolve(devices=devices, costs=spec.costs, objective=objective)
        topology = target.topology
        bound = None
        slowest_other = 0.0
        per_evaluation: float | None = None
        for method in methods:
            progress.set_postfix_str(f"{label} {devices} {method}")
            row: dict[str, Any] = {
                "workload": label, "kind": "graph", "method": method, "devices": devices,
                "num_devices": topology.num_devices, "objective": objective, "nodes": len(graph), "costs": spec.costs, "default_fusion": fusion,
                "sizes": sizes, "fusion_aware": fusion_aware, "one_gpu_step_s": one.step_s, "one_gpu_kernels": one.kernels, "launch_share": one.share,
            }
            budget = None
            if spec.equal_time and method in EQUAL_TIME_METHODS:
                if per_evaluation is None:
                    per_evaluation = evaluation_seconds(graph, target, seed=spec.seed)
                budget = equal_time_budget(spec.budget, slowest_other, per_evaluation)
                row.update(budget=budget, budget_rule={"minimum": spec.budget, "slowest_other_cpu_s": slowest_other, "evaluation_cpu_s": per_evaluation})
            cpu_began = time.process_time()
            try:
                if method in GO_METHODS:
                    outcome = _go_outcome(graph, method, target, spec)
                elif method == "hdp":
                    outcome = _hdp_outcome(graph, label, target, spec)
                else:
                    options = _options(method, spec, budget)
                    if fusion_aware:
                        options["fused"] = True
                    outcome = place_outcome(graph, method, target, objective, **options)
            except Exception as err:
                if not _is_user_error(err):
                    raise
                row.update(objective_value=None, lower_bound=None, search_seconds=None, error=str(err).splitlines()[0])
                rows.append(row)
                if on_row is not None:
                    on_row(row)
                progress.update(1)
                continue
            cpu_seconds = time.process_time() - cpu_began
            problem = outcome.context.problem
            decisions = outcome.decisions
            if fusion != "none" and method not in GO_METHODS:  # GO decides its own fusion groups
                decisions = Decisions(decisions.device, colocated_groups(default_groups, decisions.device), decisions.priority)
            result = simulate(problem, decisions)
            fraction = result.peak_memory_bytes / result.memory_capacity_bytes
            if bound is None:
                bound = {"latency": step_time_lower_bound(problem, fusion=fusion != "none"), "throughput": work_bound(problem)}.get(objective)
            value = {
                "latency": result.step_time_s,
                "throughput": throughput_objective(problem, decisions),
                "memory": float(fraction.max()),
            }[objective]
            row.update(
                objective_value=float(value), lower_bound=bound, search_seconds=outcome.seconds,
                evaluations=outcome.evaluations, oom=bool(result.any_oom),
                peak_memory_bytes=int(result.peak_memory_bytes.max()), peak_memory_fraction=float(fraction.max()),
            )
            row["search_cpu_seconds"] = cpu_seconds
            if method not in EQUAL_TIME_METHODS:
                slowest_other = max(slowest_other, cpu_seconds)
            rows.append(row)
            if on_row is not None:
                on_row(row)
            progress.update(1)
    return rows


def _too_large_rows(graph: Any, label: str, sizes: str, spec: BenchSpec, progress: Any, on_row: Any) -> list[dict[str, Any]]:
    rows = []
    message = f"not run: {len(graph)} nodes at {sizes} sizes, above max_nodes={spec.max_nodes} (too large for this run)"
    logger.warning("%s: %s", label, message)
    for devices in spec.devices:
        for method in [m for m in _methods(spec, False) if m != "expert"]:
            row = {"workload": label, "kind": "graph", "method": method, "devices": devices, "objective": spec.objective or "latency",
                   "nodes": len(graph), "sizes": sizes, "objective_value": None, "lower_bound": None, "search_seconds": None,
                   "error": message}
            rows.append(row)
            if on_row is not None:
                on_row(row)
            progress.update(1)
    return rows


@dataclass(frozen=True)
class _GoProblem:
    problem: Any


@dataclass(frozen=True)
class _GoOutcome:
    """What a bench row needs of a GO run, shaped like a PlacementOutcome."""

    context: _GoProblem
    decisions: Any
    seconds: float
    evaluations: int | None = None


def _go_outcome(graph: Any, method: str, target: Any, spec: BenchSpec) -> _GoOutcome:
    """Run the `go` pass on a copy of `graph` on `target`; its decisions aligned with `graph`."""
    import compiler_opt.rl.go_pass  # noqa: F401 - registers `go` where the entry point is not installed
    from compiler_opt.rl.go_pass import GoPass
    from cost_model.decisions import Decisions
    from graph_ir.order import node_order
    from passes.infra.context import PassContext

    mode = method[len("go-"):]
    budget = 8 if mode == "zero-shot" else max(1, spec.budget // 100)
    copy = graph.clone()
    began = time.perf_counter()
    GoPass(mode=mode, budget=budget, seed=spec.seed)(copy, PassContext(target))
    seconds = time.perf_counter() - began
    problem = target.problem(graph)
    decisions = Decisions.from_graph(copy, problem.topology, nodes=node_order(copy))
    if decisions.num_nodes != problem.num_nodes:
        raise _bench_error(f"go changed the node count ({problem.num_nodes} -> {decisions.num_nodes})")
    return _GoOutcome(_GoProblem(problem), decisions, seconds)


def _hdp_outcome(graph: Any, label: str, target: Any, spec: BenchSpec) -> _GoOutcome:
    """Train the HDP-style reference on `graph` (budget // 8 REINFORCE updates of 8 episodes);
    its best placement, unfused (the row applies the default fusion like a classical one's)."""
    from compiler_opt.rl.environment import GraphEnvironment
    from compiler_opt.rl.hdp import HdpConfig, train_hdp
    from cost_model.decisions import Decisions

    problem = target.problem(graph)
    env = GraphEnvironment(label, graph, target.topology, problem=problem)
    samples = 8
    result = train_hdp(env, HdpConfig(samples=samples, iterations=max(1, spec.budget // samples), seed=spec.seed))
    n = problem.num_nodes
    decisions = Decisions(result.decisions.device, np.full(n, -1, dtype=np.int32), np.zeros(n))
    return _GoOutcome(_GoProblem(problem), decisions, result.seconds, result.evaluations)


def run_bench(
    spec: BenchSpec, *, progress: bool = True, on_row: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """Rows for every (workload, devices, method); see the module docstring. `on_row` sees each
    graph row as soon as it is scored (a long run can save partial results); `vs_expert` and
    `vs_lower_bound` are filled in only at the end."""
    from tqdm import tqdm

    from cost_model.profiled import is_profiled_workload_file

    if not spec.workloads:
        raise _bench_error("no workloads given", field="--workloads")
    if spec.objective is not None and spec.objective not in ("latency", "throughput", "memory"):
        raise _bench_error(f"objective must be latency, throughput or memory, got {spec.objective!r}", field="--objective")
    from cost_model.costs import COST_SOURCES

    if spec.costs not in COST_SOURCES:
        raise _bench_error(f"unknown cost source {spec.costs!r}; known: {', '.join(COST_SOURCES)}", field="--costs")
    if spec.budget < 1:
        raise _bench_error(f"--budget must be at least 1, got {spec.budget}", field="--budget")
    if spec.expert is not None and not os.path.exists(spec.expert):
        raise FileNotFoundError(2, "no such file or directory", spec.expert)
    kinds = []
    for item in spec.workloads:
        profiled = os.path.exists(item) and is_profiled_workload_file(item)
        kinds.append(profiled)
        if not profiled and os.path.isdir(item):
            raise _bench_error(f"{item} is a directory, not a model or profiled workload file", file=item)
    count_methods = len(_methods(spec, spec.expert is not None))
    total = sum(count_methods if p else count_methods * len(spec.devices) for p in kinds)
    rows: list[dict[str, Any]] = []
    began = time.perf_counter()
    with tqdm(total=total, desc="bench", unit="run", disable=None if progress else True, leave=False) as bar:
        for item, profiled in zip(spec.workloads, kinds):
            rows += _profiled_rows(item, spec, bar) if profiled else _graph_rows(item, spec, bar, on_row)
    _finish(rows)
    logger.info("bench: %d rows in %.1fs", len(rows), time.perf_counter() - began)
    return rows


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:.4e}"
    return str(value)


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def objective_unit(objective: str, kind: str) -> str:
    """The unit of an objective's numbers: simulated seconds for graphs; profiled workloads
    keep their files' own time unit; memory is the peak as a fraction of device capacity."""
    if objective == "memory":
        return "x capacity"
    if kind == "profiled":
        return "profiled time units" if objective == "latency" else "profiled time units per sample"
    return "s" if objective == "latency" else "s per step"


def bench_tables(rows: list[dict[str, Any]]) -> list[Table]:
    """One table per (objective, kind): a row per run, then a geometric-mean row per method."""
    tables = []
    keys = list(dict.fromkeys((r["objective"], r["kind"]) for r in rows))
    for objective, kind in keys:
        subset = [r for r in rows if r["objective"] == objective and r["kind"] == kind]
        reference = any("reference_optimum" in r for r in subset)
        unit = objective_unit(objective, kind)
        headers = [
            "workload", "devices", "method", f"{objective} ({unit})", f"lower bound ({unit})", "x bound", "x expert",
            "peak mem (x capacity)", "OOM", "search (s)", "evals",
        ]
        if reference:
            headers += ["README optimum", "README expert", "x optimum"]
        table = Table(f"placement benchmark: {objective} ({kind} workloads; lower is better)", headers, numeric=frozenset(range(3, len(headers))))
        for r in subset:
            cells = [
                r["workload"], r["devices"], r["method"],
                _fmt(r.get("objective_value")) if "error" not in r else f"error: {r['error'][:60]}",
                _fmt(r.get("lower_bound")), _fmt(r.get("vs_lower_bound"), 3), _fmt(r.get("vs_expert"), 3),
                _fmt(r.get("peak_memory_fraction"), 3), _fmt(r.get("oom")), _fmt(r.get("search_seconds"), 3),
                _fmt(r.get("evaluations")),
            ]
            if reference:
                cells += [_fmt(r.get("reference_optimum")), _fmt(r.get("reference_expert")), _fmt(r.get("vs_reference_optimum"), 4)]
            table.rows.append(cells)
        for method in dict.fromkeys(r["method"] for r in subset):
            mine = [r for r in subset if r["method"] == method]
            cells = [
                "geomean", "", method, "", "", _fmt(_geomean([r.get("vs_lower_bound") for r in mine]), 3),
                _fmt(_geomean([r.get("vs_expert") for r in mine]), 3), "", str(sum(bool(r.get("oom")) for r in mine)),
                _fmt(sum(r.get("search_seconds") or 0.0 for r in mine), 3), "",
            ]
            if reference:
                cells += ["", "", _fmt(_geomean([r.get("vs_reference_optimum") for r in mine]), 4)]
            table.rows.append(cells)
        tables.append(table)
    return tables
