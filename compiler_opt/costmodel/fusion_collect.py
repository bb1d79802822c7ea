"""Random legal fusion configurations of HLO graphs, run for real, as layout-form `.npz` files.

A configuration: `fuse-by-priority` with uniform random per-node priorities and a random
threshold (so any draw is legal under `fuse`'s rules), all on device 0, groups scheduled in a
topological order of the group graph. Its runtime: the whole graph executed as those groups
(`GroupExecutor.plan(...).run`), min of the harness's interleaved rounds, cached in SQLite
keyed by the graph's signature and the grouping. Per node, the configuration features are:
fused (group of more than one node), log2 group size, position in the group (0..1), and
whether the node's output leaves the group.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.decisions import Decisions
from cost_model.learned.features import node_features, opcode_id
from cost_model.learned.tpugraphs import KernelRecord, save_npz
from cost_model.measure.harness import Harness, noise_floor, wall_timer
from cost_model.measure.machine import machine_record
from cost_model.profiling.cache import ProfileCache

__all__ = ["collect_fusion_dataset", "fusion_record", "random_fusion", "NODE_CONFIG_FEATURES"]

logger = logging.getLogger(__name__)

NODE_CONFIG_FEATURES = 4


def random_fusion(graph: Any, nodes: Sequence[Any], rng: np.random.Generator, *, max_nodes: int = 16) -> Decisions:
    """One legal random fusion of `graph` (nodes in `nodes` order) as `Decisions` on device 0."""
    from passes.fusion.by_priority import FuseByPriority

    index = {node: i for i, node in enumerate(nodes)}
    priorities = tuple(float(p) for p in rng.uniform(0.0, 1.0, len(nodes)))
    threshold = float(rng.uniform(0.0, 1.0))
    saved = {n: n.fusion_group for n in nodes}
    # The pass only writes node.fusion_group: run it in place and put the old groups back.
    FuseByPriority(priorities=priorities, threshold=threshold, max_nodes=max_nodes).call(graph)
    groups = np.array([n.fusion_group if n.fusion_group is not None else -1 for n in nodes])
    for node, group in saved.items():
        node.fusion_group = group
    return Decisions(np.zeros(len(nodes)), groups, _topological_priorities(nodes, groups, index))


def _topological_priorities(nodes: Sequence[Any], groups: np.ndarray, index: dict) -> np.ndarray:
    # Kernel = a group, or a node alone; Kahn's algorithm over the kernel graph; priority falls along it.
    kernel = np.where(groups >= 0, groups, -1 - np.arange(len(nodes)))
    keys = sorted(set(kernel.tolist()), key=lambda k: int(np.flatnonzero(kernel == k)[0]))
    succ: dict[int, set[int]] = {k: set() for k in keys}
    indeg = {k: 0 for k in keys}
    for i, node in enumerate(nodes):
        for value in node.inputs:
            producer = getattr(value, "producer", None) if value is not None else None
            if producer in index and kernel[index[producer]] != kernel[i] and kernel[i] not in succ[kernel[index[producer]]]:
                succ[kernel[index[producer]]].add(kernel[i])
                indeg[kernel[i]] += 1
    ready = [k for k in keys if indeg[k] == 0]
    order: list[int] = []
    while ready:
        k = ready.pop(0)
        order.append(k)
        for s in sorted(succ[k], key=keys.index):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(order) != len(keys):
        raise ValueError("fusion groups form a cycle")
    rank = {k: r for r, k in enumerate(order)}
    return np.array([-float(rank[k]) for k in kernel.tolist()])


def _config_text(decisions: Decisions) -> str:
    return json.dumps([int(g) for g in decisions.fusion_group])


def fusion_record(graph_name: str, nodes: Sequence[Any], configs: Sequence[Decisions], runtimes: Sequence[float], meta: dict[str, Any]) -> KernelRecord:
    from cost_model.flops import node_flops

    index = {node: i for i, node in enumerate(nodes)}
    feats, opcodes, edges = [], [], []
    for i, node in enumerate(nodes):
        out = node.outputs[0].type if node.outputs else None
        shape = tuple(int(d) for d in getattr(out, "shape", ()) if isinstance(d, int)) if out is not None else ()
        dtype = str(getattr(out, "dtype", "float32")).lower().replace("f32", "float32")
        feats.append(node_features(shape, dtype=dtype, flops=float(node_flops(node) or 0)))
        opcodes.append(opcode_id(node.kind.value))
        for value in node.inputs:
            producer = getattr(value, "producer", None) if value is not None else None
            if producer in index:
                edges.append([i, index[producer]])
    node_config = np.zeros((len(configs), len(nodes), NODE_CONFIG_FEATURES), dtype=np.float32)
    for c, decisions in enumerate(configs):
        groups = decisions.fusion_group
        for g in set(groups.tolist()) - {-1}:
            members = np.flatnonzero(groups == g)
            for position, i in enumerate(members.tolist()):
                leaves = any(index.get(u.node) is None or groups[index[u.node]] != g for v in nodes[i].outputs for u in v.uses) if nodes[i].outputs else True
                node_config[c, i] = [1.0 if members.size > 1 else 0.0, math.log2(members.size), position / max(members.size - 1, 1), float(leaves)]
        node_config[c, groups < 0, 3] = 1.0
    runtime = np.asarray(runtimes, dtype=np.float64)
    return KernelRecord(np.stack(feats), np.array(opcodes), np.array(edges, dtype=np.int64).reshape(-1, 2), runtime,
                        np.full_like(runtime, runtime.min()), node_config_ids=np.arange(len(nodes)), node_config_feat=node_config,
                        config_text=[_config_text(d) for d in configs], meta=meta | {"kernel": graph_name, "program": graph_name.split("@")[0]})


def collect_fusion_dataset(graphs: dict[str, Any], out_dir: str | os.PathLike[str], *, cache: ProfileCache, configs: int = 30, seed: int = 0,
                           repeats: int = 5, progress: bool = True) -> dict[str, Any]:
    """Measure `configs` random fusions of every graph (name -> HLO-imported Graph); one .npz per graph."""
    from tqdm import tqdm

    from cost_model.decisions import node_order
    from cost_model.profiling.calibration import GroupExecutor
    from cost_model.profiling.host import host_topology
    from cost_model.simulator import SimulationProblem, simulate
    from cost_model.profiling.signature import graph_signature, machine_fingerprint

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    machine = machine_record(repeats=repeats, statistic="min", runtime="xla-cpu, one group per executable")
    harness = Harness(cache=cache, backend="xla-fusion-config", machine=machine_fingerprint(), timer=wall_timer, repeats=repeats, warmup=1, seed=seed)
    retest: list[tuple[float, float]] = []
    done = 0
    for name, graph in tqdm(graphs.items(), desc="fusion graphs", unit="graph", disable=not progress):
        nodes = node_order(graph)
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little"))
        drawn: dict[str, Decisions] = {}
        for _ in range(configs * 4):
            if len(drawn) >= configs:
                break
            decisions = random_fusion(graph, nodes, rng)
            drawn.setdefault(_config_text(decisions), decisions)
        signature = graph_signature(graph)
        try:
            executor = GroupExecutor(graph, nodes, seed=seed)
            runners = {}
            for text, decisions in drawn.items():
                runners[text] = executor.plan(decisions).run if harness.cached(signature, text) is None else None
            measured = harness.measure(signature, runners)
        except Exception as error:  # a graph XLA cannot run in pieces is skipped, the run goes on
            logger.warning("%s: skipped (%s)", name, error)
            continue
        texts = list(drawn)
        # The analytical baseline beside it: the simulator with roofline kernels of this host.
        problem = SimulationProblem.from_graph(graph, host_topology(1))
        roofline = [simulate(problem, drawn[t]).step_time_s for t in texts]
        record = fusion_record(name, nodes, [drawn[t] for t in texts], [measured.measurements[t].min_s for t in texts],
                               {"machine": machine, "seed": seed, "retest": [list(p) for p in measured.retest.values()], "nodes": len(nodes),
                                "roofline_s": roofline})
        save_npz(record, out / f"{name}.npz")
        retest += list(measured.retest.values())
        done += 1
    summary = {"kernels": done, "configs_per_kernel": configs, "seed": seed, "noise_floor": noise_floor(retest), "machine": machine}
    (out / "dataset.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary
