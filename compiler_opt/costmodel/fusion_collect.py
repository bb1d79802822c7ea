"""Random legal fusion configurations of HLO graphs, run for real, as layout-form `.npz` files.

A configuration (`passes.autotune.fusion.random_fusion`, shared with the fusion autotuner):
`fuse-by-priority` with uniform random per-node priorities and a random threshold (so any draw
is legal under `fuse`'s rules), all on device 0, groups scheduled in a topological order of the
group graph. Its runtime: the whole graph executed as those groups
(`GroupExecutor.plan(...).run`), min of the harness's interleaved rounds, cached in SQLite
keyed by the graph's signature and the grouping (the autotuner's keys: it reuses these
measurements). Features: `cost_model.learned.fusion_features`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.decisions import Decisions
from cost_model.learned.fusion_features import NODE_CONFIG_FEATURES, fusion_config_features, fusion_graph_arrays
from cost_model.learned.tpugraphs import KernelRecord, save_npz
from cost_model.measure.harness import Harness, noise_floor, wall_timer
from cost_model.measure.machine import machine_record
from cost_model.profiling.cache import ProfileCache
from passes.autotune.fusion import draw_fusions, fusion_config_text as _config_text, random_fusion

__all__ = ["collect_fusion_dataset", "fusion_record", "random_fusion", "NODE_CONFIG_FEATURES"]

logger = logging.getLogger(__name__)


def fusion_record(graph_name: str, nodes: Sequence[Any], configs: Sequence[Decisions], runtimes: Sequence[float], meta: dict[str, Any]) -> KernelRecord:
    feats, opcodes, edges = fusion_graph_arrays(nodes)
    node_config = np.stack([fusion_config_features(nodes, d.fusion_group) for d in configs]).astype(np.float32)
    runtime = np.asarray(runtimes, dtype=np.float64)
    return KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()), node_config_ids=np.arange(len(nodes)),
                        node_config_feat=node_config, config_text=[_config_text(d) for d in configs],
                        meta=meta | {"kernel": graph_name, "program": graph_name.split("@")[0]})


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
        drawn = draw_fusions(graph, nodes, rng, configs)
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
