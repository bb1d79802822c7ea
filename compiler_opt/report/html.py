"""One self-contained HTML report of an `optimize()` result: no scripts, no external files.

- the graph drawn with nodes coloured by device (an SVG: nodes in topological layers, left to
  right, as the placement papers draw them; at most `MAX_DRAWN_NODES` nodes, the rest summarised);
- a Gantt timeline of the simulated step per device (an SVG of the simulator's events);
- before/after tables: step time, lower bound, nodes and op counts per op type, peak memory per
  device, the placement candidates tried;
- the per-pass change log (node counts before/after, time, modified).
"""

from __future__ import annotations

import html
import logging
import os
from typing import TYPE_CHECKING

from graph_ir.io.atomic import atomic_path

if TYPE_CHECKING:
    from compiler_opt.api.optimize import OptimizeResult

__all__ = ["MAX_DRAWN_NODES", "render_report", "write_report"]

logger = logging.getLogger(__name__)

MAX_DRAWN_NODES = 600
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def _colour(devices: list[str], device: str | None) -> str:
    if device is None or device not in devices:
        return "#cccccc"
    return PALETTE[devices.index(device) % len(PALETTE)]


def _graph_svg(result: OptimizeResult) -> str:
    from cost_model.decisions import node_order

    graph = result.graph
    devices = list(result.peak_memory_bytes)
    order = node_order(graph)[:MAX_DRAWN_NODES]
    index = {node: i for i, node in enumerate(order)}
    layer: dict[int, int] = {}
    for i, node in enumerate(order):
        preds = [index[v.producer] for v in node.inputs if v is not None and v.producer in index]
        layer[i] = 1 + max((layer[p] for p in preds), default=-1)
    rows: dict[int, int] = {}
    pos: dict[int, tuple[float, float]] = {}
    for i in range(len(order)):
        column = layer[i]
        row = rows.get(column, 0)
        rows[column] = row + 1
        pos[i] = (20 + column * 26, 20 + row * 22)
    width = 40 + 26 * (max(layer.values(), default=0) + 1)
    height = 40 + 22 * max(rows.values(), default=1)
    parts = [f'<svg class="placement" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, node in enumerate(order):
        x2, y2 = pos[i]
        for v in node.inputs:
            if v is not None and v.producer in index:
                x1, y1 = pos[index[v.producer]]
                parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#999" stroke-width="0.6"/>')
    for i, node in enumerate(order):
        x, y = pos[i]
        title = html.escape(f"{node.name} ({node.op_type}) on {node.device or 'default'}" + (f", group {node.fusion_group}" if node.fusion_group is not None else ""))
        stroke = ' stroke="#000" stroke-width="1.5"' if node.fusion_group is not None else ""
        parts.append(f'<circle cx="{x}" cy="{y}" r="7" fill="{_colour(devices, node.device)}"{stroke}><title>{title}</title></circle>')
    parts.append("</svg>")
    legend = " ".join(f'<span class="swatch" style="background:{_colour(devices, d)}"></span>{html.escape(d)}' for d in devices)
    more = "" if len(order) == sum(1 for _ in graph) else f"<p>First {len(order)} of {sum(1 for _ in graph)} nodes drawn.</p>"
    return f'<div class="legend">{legend} (black ring: fused)</div>{more}<div class="scroll">{"".join(parts)}</div>'


def _gantt_svg(simulation, devices: list[str]) -> str:
    events = simulation.events()
    if not events:
        return "<p>(no events)</p>"
    end = max(e.end_s for e in events) or 1e-12
    width, lane = 1000, 26
    rows = {d: i for i, d in enumerate(devices)}
    links = sorted({e.resource for e in events if e.kind != "compute"})
    for link in links:
        rows[link] = len(rows)
    height = 30 + lane * len(rows)
    parts = [f'<svg class="gantt" xmlns="http://www.w3.org/2000/svg" width="{width + 130}" height="{height}">']
    for name, row in rows.items():
        parts.append(f'<text x="2" y="{20 + row * lane + 14}" font-size="11">{html.escape(name)}</text>')
    for event in events:
        row = rows[devices[event.device]] if event.kind == "compute" else rows[event.resource]
        x = 120 + width * event.start_s / end
        w = max(width * (event.end_s - event.start_s) / end, 0.5)
        colour = _colour(devices, devices[event.device]) if event.kind == "compute" else "#888"
        label = html.escape(f"{event.name}: {event.start_s * 1e6:.1f}-{event.end_s * 1e6:.1f} us")
        parts.append(f'<rect x="{x:.2f}" y="{20 + row * lane}" width="{w:.2f}" height="{lane - 6}" fill="{colour}"><title>{label}</title></rect>')
    parts.append(f'<text x="120" y="14" font-size="11">0</text><text x="{width + 60}" y="14" font-size="11">{end * 1e6:.1f} us</text></svg>')
    return f'<div class="scroll">{"".join(parts)}</div>'


def _table(headers: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_report(result: OptimizeResult, title: str = "compiler-opt optimize") -> str:
    """The report as one HTML string."""
    devices = list(result.peak_memory_bytes)
    summary = [
        ["devices", result.devices],
        ["method", result.method or "-"],
        ["simulated step time before", f"{result.step_time_before_s * 1e6:.2f} us"],
        ["simulated step time after", f"{result.step_time_after_s * 1e6:.2f} us ({result.speedup:.2f}x)"],
        ["lower bound", f"{result.lower_bound_s * 1e6:.2f} us (after / bound = {result.step_time_after_s / result.lower_bound_s:.2f})" if result.lower_bound_s else "-"],
        ["search seconds", f"{result.search_seconds:.2f}"],
        ["numerical check", "not run" if result.numerics is None else result.numerics.one_line()],
    ]
    ops = sorted(set(result.ops_before) | set(result.ops_after), key=lambda o: -result.ops_before.get(o, 0))
    op_rows = [[o, result.ops_before.get(o, 0), result.ops_after.get(o, 0)] for o in ops]
    op_rows.append(["total", sum(result.ops_before.values()), sum(result.ops_after.values())])
    memory = [[d, f"{result.peak_memory_bytes[d] / 2**20:.2f} MiB", f"{result.memory_capacity_bytes[d] / 2**30:.0f} GiB"] for d in devices]
    candidates = [[m, f"{t * 1e6:.2f} us"] for m, t in sorted(result.candidates.items(), key=lambda kv: kv[1])]
    log = [[p.stage, p.name, p.nodes_before, p.nodes_after, "yes" if p.modified else "no", f"{p.seconds * 1e3:.1f} ms"] for p in result.passes]
    style = (
        "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}th{background:#f3f3f3}"
        ".scroll{overflow:auto;max-height:600px;border:1px solid #eee}.swatch{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}"
    )
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        _table(["", ""], summary),
        "<h2>Placement</h2>", _graph_svg(result),
        "<h2>Simulated timeline (after)</h2>", _gantt_svg(result.simulation_after, devices),
        "<h2>Op counts</h2>", _table(["op type", "before", "after"], op_rows),
        "<h2>Peak memory per device</h2>", _table(["device", "peak", "capacity"], memory),
    ]
    if candidates:
        sections += ["<h2>Placement methods tried</h2>", _table(["method", "simulated step time"], candidates)]
    sections += ["<h2>Passes</h2>", _table(["stage", "pass", "nodes before", "nodes after", "modified", "time"], log)]
    if result.notes:
        sections += ["<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in result.notes) + "</ul>"]
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{style}</style></head><body>{"".join(sections)}</body></html>'


def write_report(result: OptimizeResult, directory: str | os.PathLike[str], title: str = "compiler-opt optimize") -> str:
    """Write `report.html` into `directory` (made if missing), atomically; its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "report.html")
    with atomic_path(path) as tmp:
        tmp.write_text(render_report(result, title), encoding="utf-8")
    return path
