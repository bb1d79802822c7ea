"""Timeline exports: Chrome trace JSON (chrome://tracing, Perfetto) and a PNG Gantt chart."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from graph_ir.io.atomic import atomic_path

if TYPE_CHECKING:
    from cost_model.simulator.result import SimulationResult

__all__ = ["to_chrome_trace", "chrome_trace_events", "plot_gantt"]


def chrome_trace_events(result: SimulationResult) -> list[dict]:
    """Trace events: one process per device (pid = device index). Kernels run on thread 0
    ("compute"); a transfer hop shows on its source device's thread 1 + destination index
    ("copy -> dst"). Times in microseconds."""
    topo = result.problem.topology
    names = topo.device_names
    events: list[dict] = []
    threads: set[tuple[int, int]] = set()
    for event in result.events():
        if event.kind == "compute":
            pid, tid = event.device, 0
            args = {"nodes": len(event.nodes)}
        else:
            link = topo.links[result.tasks.hop_link[event.task - result.tasks.num_kernels]]
            pid, tid = event.device, 1 + topo.device_index(link.dst)
            args = {"link": event.resource}
        threads.add((pid, tid))
        events.append(
            {
                "name": event.name,
                "cat": event.kind,
                "ph": "X",
                "ts": event.start_s * 1e6,
                "dur": (event.end_s - event.start_s) * 1e6,
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
    meta: list[dict] = []
    for pid, name in enumerate(names):
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
    for pid, tid in sorted(threads):
        label = "compute" if tid == 0 else f"copy -> {names[tid - 1]}"
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
    return meta + events


def to_chrome_trace(result: SimulationResult, path: str | os.PathLike[str]) -> None:
    """Write the timeline as Chrome trace JSON, atomically."""
    payload = {"traceEvents": chrome_trace_events(result), "displayTimeUnit": "ms"}
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload), encoding="utf-8")


def plot_gantt(result: SimulationResult, path: str | os.PathLike[str], *, title: str | None = None) -> None:
    """A PNG Gantt chart: one row per device, then one per directed link that carried data."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tasks = result.tasks
    topo = result.problem.topology
    start, end = result.task_start, result.task_end
    rows: list[tuple[str, list[tuple[float, float]], str]] = []
    k = tasks.num_kernels
    for device, name in enumerate(topo.device_names):
        ids = (tasks.kernel_device == device).nonzero()[0]
        rows.append((name, list(zip((start[ids] * 1e3).tolist(), ((end[ids] - start[ids]) * 1e3).tolist())), "tab:blue"))
    for link_index, link in enumerate(topo.links):
        ids = k + (tasks.hop_link == link_index).nonzero()[0]
        if ids.size:
            spans = list(zip((start[ids] * 1e3).tolist(), ((end[ids] - start[ids]) * 1e3).tolist()))
            rows.append((link.name, spans, "tab:orange"))
    height = max(2.5, 0.35 * len(rows) + 1.2)
    figure = Figure(figsize=(12, height), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for row, (_, spans, color) in enumerate(rows):
        if spans:
            axes.broken_barh(spans, (row - 0.4, 0.8), facecolors=color, edgecolor="none")
    axes.set_yticks(range(len(rows)), [r[0] for r in rows])
    axes.invert_yaxis()
    axes.set_xlabel("time (ms)")
    axes.set_xlim(0, max(result.step_time_s * 1e3, 1e-9))
    axes.set_title(title or f"{topo.name}: step {result.step_time_s * 1e3:.3f} ms")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")
