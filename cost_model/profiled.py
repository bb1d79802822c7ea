"""Profiled placement workloads (the JSON of Tarnawski et al., NeurIPS 2020) and their cost model.

A file gives, per node, a profiled latency on the CPU and on an accelerator, a memory size, whether
the accelerator supports it and a co-location class; per edge, the transfer cost of the source's
output; and the machine: `maxFPGAs` accelerators with `maxSizePerFPGA` bytes each, one CPU.

The cost model is the paper's max-load (see shared/testdata/placement/README.md): device 0 is the
CPU, devices 1..k accelerators. A device's load is the sum of its nodes' latencies plus, on
accelerators only, communication: a node u with an edge to another device pays its edge cost once
on its own device (sending) and once on each distinct other accelerator that consumes it
(receiving). The CPU pays no communication. The objective is the largest load. Nodes of one
colour class share a device; accelerator memory is the sum of its nodes' sizes.

`ProfiledWorkload` holds the arrays; `load_profiled_workload(path)` reads a file and
`to_graph()` gives the same workload as an IR graph (one node per profiled node, one value per
source, costs as attributes) so graph-level tools (inspect, passes) can read it too.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graph_ir.errors import CompilerOptError, CorruptModelError, EmptyModelError
from graph_ir.io.files import read_nonempty

__all__ = [
    "ProfiledWorkload",
    "ExpertSplit",
    "ProfiledWorkloadError",
    "load_profiled_workload",
    "load_expert_split",
    "max_load",
    "device_loads",
    "is_profiled_workload_file",
    "check_assignment",
    "topological_rows",
]

CPU = 0  # device index of the CPU; accelerators are 1..k


class ProfiledWorkloadError(CompilerOptError):
    """A profiled workload or expert split that does not follow the format."""


@dataclass
class ProfiledWorkload:
    name: str
    node_ids: np.ndarray  # int64 (N,): the file's ids, in file order
    cpu_latency: np.ndarray  # float64 (N,)
    accel_latency: np.ndarray  # float64 (N,)
    supported: np.ndarray  # bool (N,): may run on an accelerator
    backward: np.ndarray  # bool (N,)
    color: np.ndarray  # int64 (N,): co-location class (a node's own row when the file has none)
    size: np.ndarray  # float64 (N,): bytes on an accelerator
    edge_src: np.ndarray  # int64 (E,): row of the source
    edge_dst: np.ndarray  # int64 (E,): row of the destination
    send_cost: np.ndarray  # float64 (N,): transfer cost of the node's output (0 without out-edges)
    accelerators: int
    memory_per_accelerator: float
    path: str | None = None
    row_of: dict[int, int] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def devices(self) -> int:
        return self.accelerators + 1

    def single_device_load(self) -> float:
        """All nodes on one accelerator (the README's "one device" column)."""
        return float(self.accel_latency.sum())

    def work_bound(self) -> float:
        """Total accelerator work over k: no split can have a lower max-load than this."""
        return float(self.accel_latency.sum() / self.accelerators)

    def to_graph(self):  # type: ignore[no-untyped-def]
        """The workload as an IR graph (domain "placement"), e.g. for `compiler-opt inspect`."""
        from graph_ir import Attr, AttrKind, Graph, Node, Value

        graph = Graph(self.name)
        graph.opset_imports = {"placement": 1}
        order = _topological_rows(self)
        values: dict[int, Value] = {}
        consumers: dict[int, list[int]] = {}
        for src, dst in zip(self.edge_src.tolist(), self.edge_dst.tolist()):
            consumers.setdefault(dst, []).append(src)
        for row in order:
            inputs = [values[src] for src in dict.fromkeys(consumers.get(row, []))]
            node = Node(
                "profiled",
                inputs,
                outputs=[Value(f"n{int(self.node_ids[row])}")],
                domain="placement",
                name=f"node{int(self.node_ids[row])}",
                attrs=[
                    Attr("cpu_latency", AttrKind.FLOAT, float(self.cpu_latency[row])),
                    Attr("accel_latency", AttrKind.FLOAT, float(self.accel_latency[row])),
                    Attr("supported_on_accelerator", AttrKind.INT, int(self.supported[row])),
                    Attr("backward", AttrKind.INT, int(self.backward[row])),
                    Attr("color_class", AttrKind.INT, int(self.color[row])),
                    Attr("size", AttrKind.FLOAT, float(self.size[row])),
                    Attr("send_cost", AttrKind.FLOAT, float(self.send_cost[row])),
                ],
            )
            graph.append(node)
            values[row] = node.outputs[0]
        for row in order:
            if not values[row].has_uses():
                graph.add_output(values[row])
        return graph


@dataclass
class ExpertSplit:
    """A human-expert split: node ids per accelerator and on the CPU."""

    accelerators: list[list[int]]
    cpu: list[int]
    path: str | None = None

    def assignment(self, workload: ProfiledWorkload) -> np.ndarray:
        """Device per row. Nodes the split does not list (backward nodes when an inference split
        scores a training workload) go where their colour-class mates are."""
        assign = np.full(workload.num_nodes, -1, dtype=np.int64)
        for device, ids in [(CPU, self.cpu)] + [(i + 1, ids) for i, ids in enumerate(self.accelerators)]:
            for node_id in ids:
                row = workload.row_of.get(int(node_id))
                if row is not None:
                    assign[row] = device
        color_device: dict[int, int] = {}
        for row in np.flatnonzero(assign >= 0).tolist():
            color_device.setdefault(int(workload.color[row]), int(assign[row]))
        missing = []
        for row in np.flatnonzero(assign < 0).tolist():
            device = color_device.get(int(workload.color[row]))
            if device is None:
                missing.append(int(workload.node_ids[row]))
            else:
                assign[row] = device
        if missing:
            raise ProfiledWorkloadError(
                f"the split places neither {len(missing)} nodes nor their colour classes (e.g. {missing[:5]})",
                file=self.path,
            )
        return assign


def device_loads(workload: ProfiledWorkload, assign: np.ndarray) -> np.ndarray:
    """Load per device (index 0 the CPU) under the paper's cost model."""
    assign = np.asarray(assign, dtype=np.int64)
    devices = workload.devices
    on_cpu = assign == CPU
    loads = np.bincount(assign, weights=np.where(on_cpu, workload.cpu_latency, workload.accel_latency), minlength=devices)
    src = workload.edge_src
    src_dev = assign[src]
    dst_dev = assign[workload.edge_dst]
    cross = src_dev != dst_dev
    if cross.any():
        # Flags instead of np.unique: searches call this thousands of times.
        # Sending: once per source with any cross-device consumer, on the source's device.
        sender = np.zeros(workload.num_nodes, dtype=bool)
        sender[src[cross]] = True
        loads += np.bincount(assign[sender], weights=workload.send_cost[sender], minlength=devices)
        # Receiving: once per (source, other consuming device) pair.
        pair = np.zeros(workload.num_nodes * devices, dtype=bool)
        pair[src[cross] * devices + dst_dev[cross]] = True
        keys = np.flatnonzero(pair)
        loads += np.bincount(keys % devices, weights=workload.send_cost[keys // devices], minlength=devices)
    loads[CPU] = np.where(on_cpu, workload.cpu_latency, 0.0).sum()  # the CPU pays no communication
    return loads


def max_load(workload: ProfiledWorkload, assign: np.ndarray) -> float:
    return float(device_loads(workload, assign).max())


def check_assignment(workload: ProfiledWorkload, assign: np.ndarray) -> list[str]:
    """Constraint violations of a placement (empty when valid)."""
    assign = np.asarray(assign, dtype=np.int64)
    problems = []
    if assign.shape != (workload.num_nodes,) or assign.min() < 0 or assign.max() >= workload.devices:
        return [f"assignment must give each of {workload.num_nodes} nodes a device in 0..{workload.devices - 1}"]
    bad = np.flatnonzero((assign != CPU) & ~workload.supported)
    if len(bad):
        problems.append(f"{len(bad)} nodes not supported on accelerators are placed on one")
    for color in np.unique(workload.color):
        devices = np.unique(assign[workload.color == color])
        if len(devices) > 1:
            problems.append(f"colour class {int(color)} is split over devices {devices.tolist()}")
            break
    memory = np.zeros(workload.devices)
    np.add.at(memory, assign, workload.size)
    over = [d for d in range(1, workload.devices) if memory[d] > workload.memory_per_accelerator]
    if over:
        problems.append(f"accelerators {over} exceed {workload.memory_per_accelerator:.0f} bytes")
    return problems


def topological_rows(workload: ProfiledWorkload) -> list[int]:
    """Rows in a topological order (smallest row first among the ready ones)."""
    return _topological_rows(workload)


def _topological_rows(workload: ProfiledWorkload) -> list[int]:
    import heapq

    indegree = np.zeros(workload.num_nodes, dtype=np.int64)
    successors: list[list[int]] = [[] for _ in range(workload.num_nodes)]
    for src, dst in set(zip(workload.edge_src.tolist(), workload.edge_dst.tolist())):
        successors[src].append(dst)
        indegree[dst] += 1
    ready = [row for row in range(workload.num_nodes) if indegree[row] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        row = heapq.heappop(ready)
        order.append(row)
        for nxt in successors[row]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) != workload.num_nodes:
        raise ProfiledWorkloadError("the edges form a cycle", file=workload.path)
    return order


def is_profiled_workload_file(path: str | os.PathLike[str]) -> bool:
    """A cheap sniff: a .json file whose first kilobytes name the format's keys."""
    path = Path(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return b'"nodes"' in head and (b"maxFPGAs" in head or b"cpuLatency" in head or b"maxSizePerFPGA" in head)


def _read_json(path: str | os.PathLike[str]) -> Any:
    path = os.fspath(path)
    raw = read_nonempty(path)
    try:
        return json.loads(raw)
    except RecursionError:  # nesting under the limit can still exhaust Python's recursion
        raise CorruptModelError("JSON nests too deeply", file=path, field="max_nesting_depth") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        line = getattr(err, "lineno", None)
        column = getattr(err, "colno", None)
        raise CorruptModelError(f"not valid JSON: {getattr(err, 'msg', err)}", file=path, line=line, column=column) from None


def _field(record: dict[str, Any], key: str, kind: type, where: str, path: str, default: Any = None) -> Any:
    if key not in record:
        if default is not None:
            return default
        raise ProfiledWorkloadError(f"missing '{key}'", file=path, node=where, field=key)
    value = record[key]
    try:
        converted = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ProfiledWorkloadError(f"'{key}' is {value!r}, not a {kind.__name__}", file=path, node=where, field=key) from None
    if kind is int and not -(2**63) <= converted < 2**63:  # stored as int64 (found by fuzzing)
        raise ProfiledWorkloadError(f"'{key}' is {value!r}, outside the 64-bit integer range", file=path, node=where, field=key)
    return converted


def load_profiled_workload(
    path: str | os.PathLike[str], *, accelerators: int | None = None, memory: float | None = None
) -> ProfiledWorkload:
    """Read a profiled workload; `accelerators` overrides the file's `maxFPGAs`, `memory` its
    `maxSizePerFPGA` (bytes per accelerator)."""
    path = os.fspath(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not isinstance(data.get("edges"), list):
        raise ProfiledWorkloadError("expected an object with 'nodes' and 'edges' lists", file=path)
    nodes = data["nodes"]
    if not nodes:
        raise EmptyModelError("the workload has no nodes", file=path)
    from graph_ir.io import limits

    limits.check("max_nodes", len(nodes), "the workload's node count", file=path)
    ids, cpu, accel, supported, backward, color, size = [], [], [], [], [], [], []
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise ProfiledWorkloadError(f"nodes[{index}] is not an object", file=path)
        where = f"nodes[{index}]"
        node_id = _field(node, "id", int, where, path)
        where = f"node {node_id}"
        ids.append(node_id)
        cpu.append(_field(node, "cpuLatency", float, where, path))
        accel.append(_field(node, "fpgaLatency", float, where, path))
        supported.append(bool(_field(node, "supportedOnFpga", int, where, path, default=1)))
        backward.append(bool(_field(node, "isBackwardNode", int, where, path, default=0)))
        color.append(_field(node, "colorClass", int, where, path, default=-1 - index))
        size.append(_field(node, "size", float, where, path, default=0.0))
        if not all(math.isfinite(v) and v >= 0 for v in (cpu[-1], accel[-1], size[-1])):
            raise ProfiledWorkloadError("latencies and size must be finite and non-negative", file=path, node=where)
    row_of = {node_id: row for row, node_id in enumerate(ids)}
    if len(row_of) != len(ids):
        raise ProfiledWorkloadError("duplicate node ids", file=path, field="id")
    src, dst, cost = [], [], np.zeros(len(ids))
    for index, edge in enumerate(data["edges"]):
        where = f"edges[{index}]"
        if not isinstance(edge, dict):
            raise ProfiledWorkloadError(f"{where} is not an object", file=path)
        a, b = _field(edge, "sourceId", int, where, path), _field(edge, "destId", int, where, path)
        if a not in row_of or b not in row_of:
            raise ProfiledWorkloadError(f"{where} names a node id that does not exist ({a} -> {b})", file=path, field="sourceId")
        src.append(row_of[a])
        dst.append(row_of[b])
        edge_cost = _field(edge, "cost", float, where, path)
        cost[row_of[a]] = max(cost[row_of[a]], edge_cost)  # one output per node: one cost per source
    k = int(accelerators if accelerators is not None else _field(data, "maxFPGAs", int, "workload", path))
    if k < 1:
        raise ProfiledWorkloadError(f"needs at least one accelerator, got {k}", file=path, field="maxFPGAs")
    color_array = np.asarray(color, dtype=np.int64)
    workload = ProfiledWorkload(
        name=Path(path).stem,
        node_ids=np.asarray(ids, dtype=np.int64),
        cpu_latency=np.asarray(cpu),
        accel_latency=np.asarray(accel),
        supported=np.asarray(supported, dtype=bool),
        backward=np.asarray(backward, dtype=bool),
        color=color_array,
        size=np.asarray(size),
        edge_src=np.asarray(src, dtype=np.int64),
        edge_dst=np.asarray(dst, dtype=np.int64),
        send_cost=cost,
        accelerators=k,
        memory_per_accelerator=float(
            memory if memory is not None else _field(data, "maxSizePerFPGA", float, "workload", path, default=float("inf"))
        ),
        path=path,
        row_of=row_of,
    )
    _topological_rows(workload)  # rejects cycles now
    return workload


def load_expert_split(path: str | os.PathLike[str]) -> ExpertSplit:
    path = os.fspath(path)
    data = _read_json(path)
    try:
        accelerators = [[int(i) for i in device["nodes"]] for device in data["fpgas"]]
        cpus = data.get("cpus") or [{"nodes": []}]
        cpu = [int(i) for device in cpus for i in device["nodes"]]
    except (KeyError, TypeError, ValueError) as err:
        raise ProfiledWorkloadError(f"expected 'fpgas': [{{'nodes': [ids]}}, ...] and 'cpus': {err}", file=path) from None
    return ExpertSplit(accelerators, cpu, path)
