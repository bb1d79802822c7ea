"""Whole-graph calibration: real fused/placed steps of >= 200-node graphs against the simulator.

    whole = suite_graph("resnet-50")                     # the suite's inference graph, small sizes
    configs = configurations(whole, problem, rng, num_devices=2)
    study = run_study(whole, host_topology(2, shared_executor=False))  # whole_study.py

A graph is prepared once (`prepare_graph`): the framework's default fusion is applied (for HLO it
inlines cheap calls first, which changes the node list), its groups are read off and the nodes
are left unfused. A configuration is a fusion grouping (none, the default fusion, or a random
legal `fuse-by-priority` draw) times a placement onto the host devices (all on one; a
topological split balanced by roofline time; each kernel on a random device). Every
configuration's schedule is the same rule: kernels in a topological order of the kernel graph,
ties by first node, so the executor's dispatch order and the simulator's priorities agree.

Measured (`whole_study.run_study`): `GroupExecutor` runs every kernel as one XLA executable on
its device in that order, the whole step timed in an interleaved scoring pass; the profiled
kernel table is timed in its own earlier pass, on inputs drawn from another seed and on separate
runner objects, so no profiled sample is also a scored one. Naive baselines for the same configurations:
kernel count, total FLOPs (fusion and placement do not change it, so it only ranks across
graphs) and total kernel bytes (boundary bytes of fused kernels, every operand of lone ones).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cost_model.decisions import Decisions, node_order

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.graph import Graph

__all__ = [
    "SUITE_SIZES",
    "TESTDATA_MODULES",
    "WholeGraph",
    "Configuration",
    "prepare_graph",
    "suite_graph",
    "testdata_graph",
    "kernel_order_priorities",
    "fusion_variants",
    "placements",
    "configurations",
    "naive_baselines",
]

logger = logging.getLogger(__name__)

# The suite's inference graphs at sizes where one whole step runs in milliseconds on 2 cores
# while keeping the model's structure (every layer of ResNet-50, two BERT layers, ...).
SUITE_SIZES: dict[str, dict[str, Any]] = {
    "resnet-50": {"batch": 1, "image_size": 32, "classes": 10},
    "bert-base": {"layers": 2, "hidden": 64, "heads": 2, "d_ff": 256, "vocab": 500, "seq_len": 32, "masked": 4, "batch": 2},
    "gnmt-2": {"hidden": 64, "vocab": 500, "src_len": 6, "tgt_len": 6, "batch": 4},
    "wavenet-2x18": {"residual_channels": 16, "skip_channels": 32, "classes": 32, "length": 256, "batch": 1},
    "nasnet": {"filters": 8, "image_size": 16, "classes": 10, "batch": 2},
}
# HLO test data modules of >= 200 top-level nodes whose tensors fit a quick CPU run (relative to
# the shared test data folder).
TESTDATA_MODULES: dict[str, str] = {
    "mass-matrix-35": "external/hlo/openxla-xla__xla__backends__cpu__benchmarks__hlo__bench_mass_matrix_35.hlo",
    "dynamic-slice-loop": "external/hlo/openxla-xla__xla__backends__cpu__benchmarks__hlo__dynamic_slice_loop_1x2048x768_bf16.hlo",
}


@dataclass(eq=False)
class WholeGraph:
    """A graph ready for configurations: unfused nodes, and the default fusion's groups beside."""

    name: str
    origin: str  # "suite" or "testdata"
    graph: Graph
    nodes: list[Any]
    default_groups: np.ndarray  # int32 (N,): the default fusion's groups (-1: unfused)
    default_fusion: str = ""


@dataclass(eq=False)
class Configuration:
    label: str  # "<fusion>/<placement>"
    fusion: str
    placement: str
    decisions: Decisions
    extra: dict[str, Any] = field(default_factory=dict)


def prepare_graph(name: str, origin: str, graph: Graph) -> WholeGraph:
    """Apply the default fusion, keep its groups as an array, leave the graph unfused."""
    from passes.fusion.defaults import apply_default_fusion

    _unpack_output_tuples(graph)
    done = apply_default_fusion(graph)
    nodes = node_order(graph)
    groups = np.array([-1 if n.fusion_group is None else int(n.fusion_group) for n in nodes], dtype=np.int32)
    for node in nodes:
        node.fusion_group = None
    return WholeGraph(name, origin, graph, nodes, groups, done.name)


def _unpack_output_tuples(graph: Graph) -> None:
    """A ROOT `tuple` that only packs the results becomes several graph outputs: the executor
    routes tensors between kernels, and the tuple is plumbing the simulator charges nothing for."""
    outputs = []
    for value in graph.outputs:
        node = value.producer
        if node is not None and node.op_type == "tuple" and not value.uses and all(v is not None for v in node.inputs):
            outputs.extend(v for v in node.inputs if v not in outputs)
            graph.set_outputs(outputs + [v for v in graph.outputs if v is not value and v not in outputs])
            graph.remove(node)
        elif value not in outputs:
            outputs.append(value)
    graph.set_outputs(outputs)


def suite_graph(name: str, sizes: dict[str, Any] | None = None) -> WholeGraph:
    """The suite workload's inference graph at `sizes` (default: `SUITE_SIZES[name]`)."""
    from compiler_opt.workloads import build_workload

    chosen = SUITE_SIZES.get(name, {}) if sizes is None else sizes
    return prepare_graph(name, "suite", build_workload(name, "inference", **chosen))


def testdata_graph(name: str, root: str | Path) -> WholeGraph:
    """An HLO module of the shared test data (`TESTDATA_MODULES[name]` under `root`)."""
    from graph_ir.io.hlo_import import import_hlo_text

    path = Path(root) / TESTDATA_MODULES[name]
    return prepare_graph(name, "testdata", import_hlo_text(path.read_text(encoding="utf-8")))


def _kernel_graph(problem: SimulationProblem, kernel_of_node: np.ndarray, num_kernels: int) -> list[set[int]]:
    src, dst = problem.node_edges()
    ks, kd = kernel_of_node[src], kernel_of_node[dst]
    succ: list[set[int]] = [set() for _ in range(num_kernels)]
    for a, b in zip(ks.tolist(), kd.tolist()):
        if a != b:
            succ[a].add(b)
    return succ


def kernel_order_priorities(problem: SimulationProblem, fusion_group: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Per-node priorities: every kernel's nodes share one value, descending along a topological
    order of the kernel graph (ties: the kernel whose first node comes first), so the executor's
    dispatch order (`kernel_groups`) and the simulator's list schedule see the same order."""
    import heapq

    from cost_model.simulator.tasks import kernels

    kernel_of_node, first, _ = kernels(problem, np.asarray(device, dtype=np.int64), np.asarray(fusion_group))
    num_kernels = int(first.shape[0])
    succ = _kernel_graph(problem, kernel_of_node, num_kernels)
    indegree = np.zeros(num_kernels, dtype=np.int64)
    for s in succ:
        for b in s:
            indegree[b] += 1
    ready = [(int(first[k]), k) for k in range(num_kernels) if indegree[k] == 0]
    heapq.heapify(ready)
    position = np.empty(num_kernels, dtype=np.int64)
    count = 0
    while ready:
        _, k = heapq.heappop(ready)
        position[k] = count
        count += 1
        for b in succ[k]:
            indegree[b] -= 1
            if indegree[b] == 0:
                heapq.heappush(ready, (int(first[b]), b))
    if count != num_kernels:
        raise ValueError("the fusion groups form a cycle between kernels")
    return (num_kernels - position[kernel_of_node]).astype(np.float64)


def _random_priority_groups(whole: WholeGraph, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, float]]:
    from passes.fusion.by_priority import fuse_by_priority

    priorities = rng.random(len(whole.nodes))
    threshold = float(rng.uniform(0.0, 0.9))
    max_nodes = int(rng.choice([4, 8, 16, 32]))
    try:
        fuse_by_priority(whole.graph, priorities, threshold=threshold, max_nodes=max_nodes)
        groups = np.array([-1 if n.fusion_group is None else int(n.fusion_group) for n in whole.nodes], dtype=np.int32)
    finally:
        for node in whole.nodes:
            node.fusion_group = None
    return groups, {"threshold": threshold, "max_nodes": float(max_nodes)}


def fusion_variants(whole: WholeGraph, rng: np.random.Generator, num_random: int) -> list[tuple[str, np.ndarray, dict[str, float]]]:
    """(label, fusion_group array, parameters): none, default, and `num_random` priority draws."""
    out = [("none", np.full(len(whole.nodes), -1, dtype=np.int32), {}), ("default", whole.default_groups.copy(), {})]
    for index in range(num_random):
        groups, params = _random_priority_groups(whole, rng)
        out.append((f"prio{index}", groups, params))
    return out


def placements(
    problem: SimulationProblem, fusion_group: np.ndarray, rng: np.random.Generator, num_devices: int, kinds: tuple[str, ...]
) -> list[tuple[str, np.ndarray]]:
    """Whole kernels onto devices: `one` (device 0), `split` (a topological cut of the kernels at
    half the roofline time: a two-stage pipeline), `random` (each kernel on a random device)."""
    from cost_model.simulator.tasks import kernels

    n = problem.num_nodes
    zero = np.zeros(n, dtype=np.int64)
    kernel_of_node, first, _ = kernels(problem, zero, np.asarray(fusion_group))
    num_kernels = int(first.shape[0])
    out = []
    for kind in kinds:
        if kind == "one" or num_devices == 1:
            out.append(("one", zero.copy()))
        elif kind == "split":
            order = kernel_order_priorities(problem, fusion_group, zero)
            position = (order.max() - order)[first]  # kernel -> position in the schedule
            work = np.bincount(kernel_of_node, weights=problem.node_time[:, 0], minlength=num_kernels)
            cumulative = np.cumsum(work[np.argsort(position)])
            # at least one kernel on each side, however lopsided the work
            cut = min(int(np.searchsorted(cumulative, cumulative[-1] / 2.0)), max(num_kernels - 2, 0))
            out.append(("split", (position[kernel_of_node] > cut).astype(np.int64)))
        elif kind == "random":
            out.append(("random", rng.integers(0, num_devices, size=num_kernels)[kernel_of_node].astype(np.int64)))
        else:
            raise ValueError(f"placement must be one, split or random, got {kind!r}")
    return out


def configurations(
    whole: WholeGraph,
    problem: SimulationProblem,
    rng: np.random.Generator,
    *,
    num_random: int = 4,
    num_devices: int = 2,
    kinds: tuple[str, ...] = ("one", "split", "random"),
) -> list[Configuration]:
    """Every fusion variant under every placement kind (module docstring)."""
    out = []
    for fusion, groups, params in fusion_variants(whole, rng, num_random):
        for placement, device in placements(problem, groups, rng, num_devices, kinds):
            priority = kernel_order_priorities(problem, groups, device)
            decisions = Decisions(device, groups, priority)
            out.append(Configuration(f"{fusion}/{placement}", fusion, placement, decisions, dict(params)))
    return out


def naive_baselines(problem: SimulationProblem, decisions: Decisions) -> dict[str, float]:
    """Kernel count, total FLOPs, total kernel bytes (boundary bytes of fused kernels)."""
    from cost_model.simulator.tasks import kernel_bytes, kernels

    kernel_of_node, first, size = kernels(problem, decisions.device.astype(np.int64), decisions.fusion_group)
    kbytes = kernel_bytes(problem, kernel_of_node, first, size)
    return {"kernels": float(first.shape[0]), "flops": float(problem.flops.sum()), "bytes": float(kbytes.sum())}
