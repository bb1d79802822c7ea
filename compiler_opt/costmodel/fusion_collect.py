"""Random legal fusion configurations of HLO graphs, run for real, as layout-form `.npz` files.

A configuration (`passes.autotune.fusion.random_fusion`, shared with the fusion autotuner):
`fuse-by-priority` with uniform random per-node priorities and a random threshold (so any draw
is legal under `fuse`'s rules), all on device 0, groups scheduled in a topological order of the
group graph. Its runtime: the whole graph executed as those groups
(`GroupExecutor.plan(...).run`), cached in SQLite keyed by the graph's signature and the grouping
(the autotuner's keys: it reuses these measurements). Features: `cost_model.learned.fusion_features`.

Timing protocol (eighth session; `benchmarks/bench_fusion_noise.py` measured each part):
- XLA with synchronous CPU dispatch and one Eigen thread (`cost_model.measure.xla_timing`): with
  async dispatch every kernel paid a worker-thread hand-off on the one pinned core;
- a sample loops the configuration for >= 2 ms (`passes.autotune.fusion.fusion_runner`) and is
  divided by the calls; min of 11 interleaved rounds; the 3 apparent winners get 11 more;
- `isolate`: every graph in a fresh process. The raw `LoadedExecutable.execute` path leaks a
  little native memory per call and a process gets steadily slower while it runs plans (+15-20%
  over 30 s of timing); a fresh process per graph gives every graph, and a retest pass, the same
  process age.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from cost_model.decisions import Decisions
from cost_model.learned.conv_features import fusion_conv_features
from cost_model.learned.fusion_features import NODE_CONFIG_FEATURES, fusion_config_features, fusion_graph_arrays
from cost_model.learned.tpugraphs import KernelRecord, load_npz, save_npz
from cost_model.measure.harness import noise_floor
from cost_model.measure.machine import machine_record
from cost_model.profiling.cache import ProfileCache
from graph_ir.io.atomic import atomic_path
from passes.autotune.fusion import (FUSION_REPEATS, MIN_SAMPLE_S, draw_fusions, fusion_config_text as _config_text, fusion_harness, fusion_runner,
                                    random_fusion)

__all__ = ["collect_fusion_dataset", "fusion_record", "measure_fusion_graph", "random_fusion", "reference_runner", "scale_to_seconds",
           "NODE_CONFIG_FEATURES"]

logger = logging.getLogger(__name__)

SCALE_QUANTILE = 0.1  # of the per-graph reference times: the collection's seconds per reference ratio
DEFAULT_REFERENCE = "mlp@1"  # the CLI's paired reference graph


def fusion_record(graph_name: str, nodes: Sequence[Any], configs: Sequence[Decisions], runtimes: Sequence[float], meta: dict[str, Any]) -> KernelRecord:
    feats, opcodes, edges = fusion_graph_arrays(nodes)
    node_config = np.stack([fusion_config_features(nodes, d.fusion_group) for d in configs]).astype(np.float32)
    runtime = np.asarray(runtimes, dtype=np.float64)
    return KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()), node_config_ids=np.arange(len(nodes)),
                        node_config_feat=node_config, config_text=[_config_text(d) for d in configs], node_conv_feat=fusion_conv_features(nodes),
                        meta=meta | {"kernel": graph_name, "program": graph_name.split("@")[0]})


def reference_runner(reference_graph: str, *, seed: int = 0, min_sample_s: float = MIN_SAMPLE_S) -> Any:
    """The paired reference of a collection: one fixed random fusion of a built-in graph (the same
    kind of work as every configuration: a chain of small XLA executables), as a timed runner."""
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.profiling.calibration import GroupExecutor

    graph = fusion_graph(reference_graph)
    nodes = node_order(graph)
    decisions = next(iter(draw_fusions(graph, nodes, np.random.default_rng(seed), 1).values()))
    return fusion_runner(GroupExecutor(graph, nodes, seed=seed).plan(decisions), min_sample_s)


def measure_fusion_graph(name: str, graph: Any, out_dir: str | os.PathLike[str], *, cache: ProfileCache, configs: int = 30, seed: int = 0,
                         repeats: int = FUSION_REPEATS, min_sample_s: float = MIN_SAMPLE_S, retest_fraction: float = 0.1,
                         reference_graph: str | None = None, machine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure `configs` random fusions of one graph (a Graph, or a zero-argument builder of one)
    into `out_dir/<name>.npz`. Returns {"retest": [(t1, t2)...], "reference_s": median seconds of
    the paired reference or None}.

    With `reference_graph` every sample is divided by a sample of `reference_runner` taken right
    after it, the label is the median of those ratios (the min of a ratio would pick the samples
    whose reference was disturbed), and the file holds ratios until `collect_fusion_dataset`
    scales the whole collection by one reference time."""
    from cost_model.decisions import node_order
    from cost_model.profiling.calibration import GroupExecutor
    from cost_model.profiling.host import host_topology
    from cost_model.profiling.signature import graph_signature
    from cost_model.simulator import SimulationProblem, simulate

    if callable(graph):
        graph = graph()
    nodes = node_order(graph)
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little"))
    drawn = draw_fusions(graph, nodes, rng, configs)
    signature = graph_signature(graph)
    harness = fusion_harness(cache, seed=seed, repeats=repeats, retest_fraction=retest_fraction)
    if reference_graph:
        harness.reference = reference_runner(reference_graph, seed=seed, min_sample_s=min_sample_s)
        harness.reference_s, harness.statistic = 1.0, "median"
        harness.backend = f"{harness.backend}/ref={reference_graph}"  # ratios: never mixed with seconds
    executor = GroupExecutor(graph, nodes, seed=seed)
    runners = {}
    for text, decisions in drawn.items():  # compile every plan first, then time
        runners[text] = fusion_runner(executor.plan(decisions), min_sample_s) if harness.cached(signature, text) is None else None
    measured = harness.measure(signature, runners)
    texts = list(drawn)
    # The analytical baseline beside it: the simulator with roofline kernels of this host.
    problem = SimulationProblem.from_graph(graph, host_topology(1))
    roofline = [simulate(problem, drawn[t]).step_time_s for t in texts]
    retest = [(float(a), float(b)) for a, b in measured.retest.values()]
    reference_s = float(np.median([m.median_s for m in measured.reference.values()])) if measured.reference else None
    meta = {"machine": machine or {}, "seed": seed, "retest": [list(p) for p in retest], "nodes": len(nodes), "roofline_s": roofline,
            "config_runtime_median": [measured.measurements[t].median_s for t in texts], "statistic": harness.statistic}
    if reference_graph:
        meta |= {"reference": {"graph": reference_graph, "graph_reference_s": reference_s, "scale": None},
                 "config_runtime_min": [measured.measurements[t].min_s for t in texts]}
    record = fusion_record(name, nodes, [drawn[t] for t in texts], [harness.value(measured.measurements[t]) for t in texts], meta)
    save_npz(record, Path(out_dir) / f"{name}.npz")
    return {"retest": retest, "reference_s": reference_s}


def scale_to_seconds(path: str | os.PathLike[str], scale_s: float) -> None:
    """Multiply a reference-normalized file's labels (ratios) by `scale_s`, the collection's
    reference time, once (files already scaled are left alone)."""
    record = load_npz(path)
    reference = record.meta.get("reference")
    if not reference or reference.get("scale") is not None:
        return
    record.config_runtime = np.asarray(record.config_runtime, dtype=np.float64) * scale_s
    record.config_runtime_normalizers = np.full_like(record.config_runtime, record.config_runtime.min())
    for key in ("config_runtime_median", "config_runtime_min"):
        record.meta[key] = [float(v) * scale_s for v in record.meta.get(key, [])]
    record.meta["retest"] = [[float(a) * scale_s, float(b) * scale_s] for a, b in record.meta.get("retest", [])]
    record.meta["reference"] = reference | {"scale": scale_s}
    save_npz(record, path)


def _isolated(name: str, graph: Any, out_dir: str, cache_path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`measure_fusion_graph` in a fresh process (the child sets XLA up for timing first)."""
    from cost_model.measure.xla_timing import configure_xla_timing

    settings = configure_xla_timing()
    # What the child ran with goes into the graph's file and back to dataset.json.
    kwargs = kwargs | {"machine": dict(kwargs.get("machine") or {}) | {f"xla_{k}": v for k, v in settings.items()}}
    with ProfileCache(cache_path) as cache:
        return measure_fusion_graph(name, graph, out_dir, cache=cache, **kwargs) | {"xla_timing": settings}


def collect_fusion_dataset(graphs: Mapping[str, Any], out_dir: str | os.PathLike[str], *, cache: ProfileCache, configs: int = 30, seed: int = 0,
                           repeats: int = FUSION_REPEATS, min_sample_s: float = MIN_SAMPLE_S, retest_fraction: float = 0.1,
                           reference_graph: str | None = None, isolate: bool = False, progress: bool = True) -> dict[str, Any]:
    """Measure `configs` random fusions of every graph (name -> HLO-imported Graph, or a picklable
    zero-argument builder such as `functools.partial(fusion_graph, name)`); one .npz per graph.

    With `isolate` every graph is built and measured in a fresh (spawned) process; the graphs must
    then be builders. A graph XLA cannot run in pieces is logged and skipped. With
    `reference_graph` (see `measure_fusion_graph`) the labels are ratios to a paired reference,
    turned into seconds at the end by one scale for the whole collection: the `SCALE_QUANTILE`
    quantile over graphs of the reference's median time in that graph's process (a low quantile:
    the reference as it runs in the machine's quieter phases, which recur in every pass, while the
    share of slow phases does not), so a slow or fast phase of the machine while one graph was
    measured moves neither its ranking nor its level."""
    import multiprocessing

    from tqdm import tqdm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timing: dict[str, Any] = {"isolated": isolate}
    if not isolate:
        from cost_model.measure.xla_timing import configure_xla_timing

        timing |= configure_xla_timing()
    machine = machine_record(repeats=repeats, statistic="median of reference ratios" if reference_graph else "min", min_sample_s=min_sample_s,
                             reference_graph=reference_graph or "", timer="per-call, batched samples",
                             runtime="xla-cpu, one group per executable, sync dispatch", **{f"xla_{k}": v for k, v in timing.items()})
    kwargs = {"configs": configs, "seed": seed, "repeats": repeats, "min_sample_s": min_sample_s, "retest_fraction": retest_fraction,
              "reference_graph": reference_graph, "machine": machine}
    retest: list[tuple[float, float]] = []
    references: dict[str, float] = {}
    done = 0
    context = multiprocessing.get_context("spawn")
    for name, graph in tqdm(graphs.items(), desc="fusion graphs", unit="graph", disable=not progress):
        try:
            if isolate:
                with context.Pool(1) as pool:
                    result = pool.apply(_isolated, (name, graph, str(out), str(cache.path), kwargs))
            else:
                result = measure_fusion_graph(name, graph, out, cache=cache, **kwargs)
        except Exception as error:  # a graph XLA cannot run in pieces is skipped, the run goes on
            logger.warning("%s: skipped (%s: %s)", name, type(error).__name__, error)
            continue
        retest += result["retest"]
        if "xla_timing" in result:
            timing |= {f"child_{k}": v for k, v in result["xla_timing"].items()}
        if result["reference_s"] is not None:
            references[name] = result["reference_s"]
        done += 1
    summary = {"kernels": done, "configs_per_kernel": configs, "seed": seed, "machine": machine, "xla_timing": timing}
    if reference_graph and references:
        scale = float(np.quantile(list(references.values()), SCALE_QUANTILE))
        for name in references:
            scale_to_seconds(out / f"{name}.npz", scale)
        retest = [(a * scale, b * scale) for a, b in retest]
        summary["reference"] = {"graph": reference_graph, "scale_s": scale, "per_graph_s": references}
    summary["noise_floor"] = noise_floor(retest)
    with atomic_path(out / "dataset.json") as tmp:  # never a half-written summary beside the files
        tmp.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary
