"""`compiler-opt simulate`: run the execution simulator on a model file or a named workload.

MODEL is a file (any importable format, chosen by extension) or a workload name from
`compiler-opt workloads`, optionally with a mode: `resnet-50`, `resnet-50:inference`.

Decisions, in order of precedence: a `--decisions` JSON file, then the decisions already on the
graph's nodes (ONNX metadata, TF `NodeDef.device`, ...), then the default: every node on the
fastest device of the topology (highest fp32 peak FLOP/s, the first of equals), unfused, priority 0.

The decisions file is a JSON object keyed by node name; every field is optional:

    {"dot.12": {"device": "gpu1", "fusion_group": 3, "priority": 2.5},
     "tanh.4": {"device": 2}}

`device` is a device name of the topology (TF-style "/device:GPU:1" works) or its index;
`fusion_group` an integer >= 0 (or null: unfused), nodes sharing a group on one device run as
one kernel; `priority` a number, higher runs first among ready kernels. Nodes the file does not
name keep their own decisions or the default. Unknown node names or fields are an error.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Mapping

from compiler_opt.cli._render import Table, human_bytes, human_count

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from graph_ir import Graph, Node

__all__ = ["OBJECTIVES", "apply_decisions_file", "fastest_device", "load_simulation_graph", "simulate_model", "simulate_tables", "parse_sizes"]

logger = logging.getLogger(__name__)

OBJECTIVES = ("latency", "throughput", "memory")
_DECISION_FIELDS = ("device", "fusion_group", "priority")


def parse_sizes(items: list[str] | None) -> dict[str, str]:
    """`["batch=8", "steps=40"]` -> {"batch": "8", "steps": "40"} (the registry coerces types)."""
    from graph_ir.errors import CompilerOptError

    sizes: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CompilerOptError(f"--size expects KEY=VALUE, got {item!r}", field="--size")
        sizes[key.strip()] = value.strip()
    return sizes


def load_simulation_graph(
    model: str, *, sizes: Mapping[str, Any] | None = None, paper: bool = False, module: int | None = None
) -> tuple[Graph, str]:
    """The graph for MODEL (a file, `FILE#N` for module N of a multi-module HLO file, else a
    workload name) and a label for reports."""
    from graph_ir.io.formats import split_module_spec

    path, spec_module = split_module_spec(model)
    if spec_module is not None:
        if module is not None and module != spec_module:
            from graph_ir.errors import CompilerOptError

            raise CompilerOptError(f"module {spec_module} in the name and --module {module} disagree", file=path)
        module, model = spec_module, path
    if not os.path.exists(model):
        from compiler_opt.workloads.registry import (
            WorkloadError, is_cached, list_workloads, parse_workload_spec, workload_spec_label, workload_spec_sizes,
        )

        parsed = parse_workload_spec(model)
        if parsed is None:
            if ":" in model or "." not in os.path.basename(model):  # looks like a name, not a path
                known = ", ".join(w.name for w in list_workloads())
                raise WorkloadError(f"{model!r} is neither a file nor a workload (workloads: {known})", file=model)
            raise FileNotFoundError(2, "no such file", model)
        workload, mode = parsed
        label = workload_spec_label(model)
        sizes = {**workload_spec_sizes(model), **(sizes or {})}
        if not is_cached(workload.name, mode, paper=paper, **sizes) and sys.stderr.isatty():
            from rich.console import Console

            # Only uncached builds take long (seconds to a minute); cached ones import in < 1 s.
            with Console(file=sys.stderr).status(f"building {label} (first use; cached afterwards)"):
                return workload.build(mode, paper=paper, **sizes), label
        return workload.build(mode, paper=paper, **sizes), label
    if sizes or paper:
        from graph_ir.errors import CompilerOptError

        raise CompilerOptError("--size and --paper-sizes apply to workloads, not to model files", file=model)
    from graph_ir.io import load

    graph = load(model, module)
    return graph, os.path.basename(model) + ("" if spec_module is None else f"#{spec_module}")


def apply_decisions_file(path: str, graph: Graph, nodes: list[Node], topology: Topology) -> int:
    """Write the file's decisions onto the named nodes; returns how many nodes it named."""
    from cost_model.decisions import DecisionError
    from graph_ir.errors import CompilerOptError

    try:
        with open(path, encoding="utf-8") as handle:
            payload = json.load(handle)
    except json.JSONDecodeError as err:
        raise DecisionError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}", file=path) from None
    except UnicodeDecodeError:
        raise DecisionError("not valid JSON: the file is not UTF-8 text", file=path) from None
    if not isinstance(payload, dict):
        raise DecisionError(f"expected a JSON object keyed by node name, got {type(payload).__name__}", file=path)
    by_name = {node.name: node for node in nodes}
    unknown = [name for name in payload if name not in by_name]
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise DecisionError(f"{len(unknown)} unknown node name(s): {shown} (the graph has {len(nodes)} nodes)", file=path, node=unknown[0])
    for name, entry in payload.items():
        if not isinstance(entry, dict):
            raise DecisionError(f"expected an object with {', '.join(_DECISION_FIELDS)}", file=path, node=name)
        extra = set(entry) - set(_DECISION_FIELDS)
        if extra:
            raise DecisionError(f"unknown field(s) {sorted(extra)} (allowed: {', '.join(_DECISION_FIELDS)})", file=path, node=name)
        node = by_name[name]
        if "device" in entry:
            device = entry["device"]
            if isinstance(device, bool) or not isinstance(device, (int, str)):
                raise DecisionError(f"device must be a name or an index, got {device!r}", file=path, node=name, field="device")
            if isinstance(device, int):
                if not 0 <= device < topology.num_devices:
                    raise DecisionError(f"device index {device} out of range [0, {topology.num_devices})", file=path, node=name, field="device")
                device = topology.device_names[device]
            try:
                node.device = topology.device_names[topology.device_index(device)]
            except CompilerOptError as err:
                raise DecisionError(err.message, file=path, node=name, field="device") from None
        if "fusion_group" in entry:
            group = entry["fusion_group"]
            if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
                raise DecisionError(f"fusion_group must be an integer >= 0 or null, got {group!r}", file=path, node=name, field="fusion_group")
            node.fusion_group = group
        if "priority" in entry:
            priority = entry["priority"]
            if isinstance(priority, bool) or not isinstance(priority, (int, float)):
                raise DecisionError(f"priority must be a number, got {priority!r}", file=path, node=name, field="priority")
            node.priority = float(priority)
    return len(payload)


def simulate_model(
    model: str,
    devices: str,
    *,
    decisions: str | None = None,
    objective: str = "latency",
    trace: str | None = None,
    plot: str | None = None,
    sizes: Mapping[str, Any] | None = None,
    paper: bool = False,
    module: int | None = None,
    costs: str = "roofline",
    default_fusion: bool = True,
) -> dict[str, Any]:
    """Simulate MODEL on the `devices` topology with the `costs` kernel cost source; returns the
    report (what --json prints).

    With `default_fusion` (the default) the graph first gets the fusion its framework applies on
    a GPU (`passes.fusion.defaults`: xla-gpu for HLO/StableHLO, cudnn-runtime for TF/ONNX), unless
    it already carries fusion groups; a decisions file's `fusion_group` entries still override."""
    from cost_model.costs import Target, simulate, throughput_objective
    from cost_model.decisions import Decisions
    from cost_model.lower_bound import memory_feasible, step_time_lower_bound

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}")
    from graph_ir.errors import CompilerOptError

    try:
        # Before the (possibly long) build: fail fast on a typo.
        target = Target.resolve(devices=devices, costs=costs, objective=objective)
    except CompilerOptError as err:
        raise err.with_context(file=f"--devices {devices}" if err.field != "costs" else f"--costs {costs}") from None
    topology = target.topology
    if decisions is not None and not os.path.isfile(decisions):
        raise FileNotFoundError(2, "no such decisions file", decisions)
    graph, label = load_simulation_graph(model, sizes=sizes, paper=paper, module=module)
    from passes.fusion.defaults import DefaultFusion, apply_default_fusion

    own_decisions = _any_decision(list(graph.all_nodes()))  # before the default fusion writes groups
    fusion = apply_default_fusion(graph) if default_fusion else DefaultFusion("none", reason="--no-default-fusion")
    began = time.perf_counter()
    problem = target.problem(graph)
    fastest = fastest_device(topology)
    named = apply_decisions_file(decisions, graph, problem.nodes, topology) if decisions else 0
    chosen = Decisions.from_graph(graph, topology, default_device=fastest, nodes=problem.nodes)
    result = simulate(problem, chosen)
    # The per-op bound (launches, every op's bytes) is much tighter but holds only without fusion;
    # with fusion groups a kernel can cost less than its nodes, so the fusion-safe bound applies.
    fused = bool((chosen.fusion_group >= 0).any())
    lower = step_time_lower_bound(problem, fusion=fused)
    throughput = throughput_objective(problem, chosen)
    feasible = memory_feasible(problem)
    elapsed = time.perf_counter() - began
    if trace:
        from cost_model.simulator import to_chrome_trace

        to_chrome_trace(result, trace)
    if plot:
        from cost_model.simulator import plot_gantt

        plot_gantt(result, plot, title=f"{label} on {devices}")
    names = list(result.device_names)
    peak = [int(x) for x in result.peak_memory_bytes.tolist()]
    value = {"latency": result.step_time_s, "throughput": throughput, "memory": float(max(peak, default=0))}[objective]
    return {
        "model": label,
        "devices": names,
        "topology": devices,
        "costs": costs,
        "nodes": problem.num_nodes,
        "decisions": "file" if decisions else ("graph" if own_decisions else "default"),
        "decisions_file_nodes": named,
        "default_fusion": fusion.name,
        "default_fusion_groups": fusion.groups,
        "default_device": names[fastest] if names else None,
        "objective": objective,
        "objective_value": value,
        "step_time_s": result.step_time_s,
        "lower_bound_s": lower,
        "ratio_to_lower_bound": result.step_time_s / lower if lower > 0 else None,
        "throughput_s": throughput,
        "busy_s": dict(zip(names, result.busy_s.tolist())),
        "peak_memory_bytes": dict(zip(names, peak)),
        "memory_capacity_bytes": dict(zip(names, [int(x) for x in result.memory_capacity_bytes.tolist()])),
        "bytes_moved": int(result.bytes_moved),
        "oom": result.any_oom,
        "oom_devices": [n for n, flag in zip(names, result.oom.tolist()) if flag],
        "memory_feasible": bool(feasible),
        "memory_infeasible_reasons": list(feasible.reasons),
        "simulate_seconds": elapsed,
    }


def fastest_device(topology: Topology) -> int:
    """The device with the highest fp32 peak FLOP/s (the first of equals): where undecided nodes run.

    By hardware, not by this graph: a small graph's total roofline time can favour the CPU (its
    launch overhead is lower), which is not what "everything on the default device" means.
    """
    peaks = [device.peak("fp32") for device in topology.devices]
    return peaks.index(max(peaks))


def _any_decision(nodes: list[Node]) -> bool:
    return any(n.device is not None or n.fusion_group is not None or n.priority is not None for n in nodes)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def simulate_tables(report: Mapping[str, Any]) -> list[Table]:
    ratio = report["ratio_to_lower_bound"]
    summary = Table(
        f"{report['model']} on {report['topology']} ({report.get('costs', 'roofline')} costs): "
        f"{human_count(report['nodes'])} nodes, decisions: {report['decisions']}, "
        f"default fusion: {report.get('default_fusion', 'none')}",
        ["metric", "value"],
        [
            ["step time", _ms(report["step_time_s"])],
            ["lower bound", _ms(report["lower_bound_s"]) + (f"  (step / bound {ratio:.2f})" if ratio else "")],
            ["throughput objective", _ms(report["throughput_s"])],
            ["bytes moved", human_bytes(report["bytes_moved"])],
            ["OOM", ", ".join(report["oom_devices"]) or "no"],
        ],
    )
    per_device = Table(
        "per device",
        ["device", "busy", "peak memory", "capacity", "OOM"],
        [
            [
                name,
                _ms(report["busy_s"][name]),
                human_bytes(report["peak_memory_bytes"][name]),
                human_bytes(report["memory_capacity_bytes"][name]),
                "yes" if name in report["oom_devices"] else "",
            ]
            for name in report["devices"]
        ],
        numeric=frozenset({1, 2, 3}),
    )
    return [summary, per_device]
