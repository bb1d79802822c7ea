"""`compiler-opt optimize IN -o OUT`: the whole job in one command (compiler_opt.api.optimize),
then the summary tables, the output file (written atomically), `--report DIR` (one HTML file),
`--report-json FILE`, and with `--check` a numerical comparison that fails with exit status 3.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from compiler_opt.cli._render import Table, human_bytes

if TYPE_CHECKING:
    from compiler_opt.api.optimize import OptimizeResult

__all__ = ["NUMERICS_EXIT", "OptimizeRequest", "optimize_tables", "run_optimize"]

logger = logging.getLogger(__name__)

NUMERICS_EXIT = 3  # --check did not pass (a difference, or no check possible): nothing is written


@dataclass
class OptimizeRequest:
    input: str
    output: str
    devices: str = "4xV100"
    method: str = "auto"
    tasks: Sequence[str] = ("placement", "fusion", "schedule")
    budget_s: float = 30.0
    report_dir: str | None = None
    report_json: str | None = None
    check: bool = False
    seed: int = 0
    opt_level: int | None = None
    input_shapes: Sequence[str] = ()
    module: int | None = None
    progress: bool = True


def run_optimize(request: OptimizeRequest, out: Any, err: Any) -> int:
    """Run the command; returns the exit code (0, or 3 when `--check` finds a difference)."""
    from tqdm import tqdm

    from compiler_opt.api import optimize, parse_input_shape
    from compiler_opt.cli._render import render_tables
    from graph_ir.io.formats import check_writable_path

    check_writable_path(request.output)  # a bad output name or folder fails before the work
    shapes = dict(parse_input_shape(text) for text in request.input_shapes)
    with tqdm(desc="optimize", unit="step", disable=None if request.progress else True, leave=False, file=err) as bar:

        def progress(stage: str) -> None:
            bar.set_postfix_str(stage[:60])
            bar.update(1)

        result = optimize(
            request.input, target=request.devices, tasks=tuple(request.tasks), method=request.method,
            budget_s=request.budget_s, check=request.check, seed=request.seed, opt_level=request.opt_level,
            input_shapes=shapes or None, module=request.module, progress=progress,
        )
    render_tables(optimize_tables(result), out)
    if request.report_json:
        from graph_ir.io.atomic import atomic_path

        with atomic_path(request.report_json) as tmp:
            tmp.write_text(json.dumps(result.to_json(), indent=2))
    if request.report_dir:
        from compiler_opt.report import write_report

        path = write_report(result, request.report_dir, title=f"compiler-opt optimize {request.input}")
        out.write(f"report: {path}\n")
    if result.numerics is not None and not result.numerics.ok:
        hint = "" if result.numerics.ran else " (rerun without --check to write it unchecked)"
        err.write(f"compiler-opt: error: {request.input}: {result.numerics.one_line()}; {request.output} not written{hint}\n")
        return NUMERICS_EXIT
    import graph_ir

    graph_ir.save(result.graph, request.output)
    out.write(f"wrote {request.output}\n")
    return 0


def optimize_tables(result: OptimizeResult) -> list[Table]:
    ratio = result.step_time_after_s / result.lower_bound_s if result.lower_bound_s else float("nan")
    summary = Table("optimize", ["", "before", "after"], numeric=frozenset({1, 2}))
    summary.rows += [
        ["nodes", str(sum(result.ops_before.values())), str(sum(result.ops_after.values()))],
        ["simulated step time (us)", f"{result.step_time_before_s * 1e6:.2f}", f"{result.step_time_after_s * 1e6:.2f}"],
        ["x lower bound", f"{result.step_time_before_s / result.lower_bound_s:.2f}" if result.lower_bound_s else "-", f"{ratio:.2f}"],
    ]
    facts = Table("decisions", ["", ""])
    facts.rows += [
        ["devices", result.devices], ["method", result.method or "-"],
        ["lower bound (us)", f"{result.lower_bound_s * 1e6:.2f}"], ["search (s)", f"{result.search_seconds:.2f}"],
        ["numerical check", "not run" if result.numerics is None else result.numerics.one_line()],
    ]
    facts.rows += [["note", n] for n in result.notes]
    ops = Table("op counts", ["op type", "before", "after"], numeric=frozenset({1, 2}))
    for op in sorted(set(result.ops_before) | set(result.ops_after), key=lambda o: (-result.ops_before.get(o, 0), o)):
        ops.rows.append([op, str(result.ops_before.get(op, 0)), str(result.ops_after.get(op, 0))])
    memory = Table("peak memory per device (after)", ["device", "peak", "capacity"], numeric=frozenset({1, 2}))
    for device, peak in result.peak_memory_bytes.items():
        memory.rows.append([device, human_bytes(peak), human_bytes(result.memory_capacity_bytes[device])])
    per_pass: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for record in result.passes:
        name = record.name.split("{")[0]
        per_pass[name][0] += record.seconds
        per_pass[name][1] += record.nodes_before - record.nodes_after
    times = Table("time per pass", ["pass", "time (ms)", "nodes removed"], numeric=frozenset({1, 2}))
    for name, (seconds, removed) in sorted(per_pass.items(), key=lambda kv: -kv[1][0]):
        times.rows.append([name, f"{seconds * 1e3:.1f}", str(int(removed))])
    return [summary, facts, ops, memory, times]
