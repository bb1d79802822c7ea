"""Fusion autotuning of an HLO or ONNX graph, and the `autotune-fusion` pass.

Candidates: the default fusion (`fuse`'s greedy loop + epilogue fusion) and up to `budget`
distinct random legal fusions drawn with `fuse-by-priority` (random per-node priorities and
threshold; `random_fusion`, the same draw the fusion dataset is made of). A learned model ranks
them all (`cost_model.learned.predictor.load_fusion_ranker`: by default the additive model over
the roofline simulator's step time of each candidate, `AdditiveFusionPredictor`; or a GraphSAGE
layout-form model, `FusionPredictor`); the `top_k` predicted
fastest and the default are run for real, the whole graph executed as those groups, each group
one XLA executable (`cost_model.profiling.calibration.GroupExecutor`; ONNX graphs: one
onnxruntime session per group, `cost_model.profiling.ort_groups`), timed by the `Harness`
(interleaved rounds, min; SQLite cache keyed by the graph signature and the grouping, the fusion
dataset's keys, so a rerun or a graph the dataset measured measures nothing twice). The fastest
measured configuration wins, so the result is never slower than the measured default; its
outputs are compared with the original graph's on the same seeded inputs (the whole graph as one
executable / session; the unfused plan where the backend refuses that; outputs two reference
runs disagree on are random and skipped; a few ulps of the output's type allowed, exact for
integers and strings) before its groups are written into the graph (`node.fusion_group`; the HLO and ONNX exporters turn them into fused
computations / functions).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from graph_ir.compare import close, excess, tolerances
from passes.autotune.search import TuneOutcome, tune_candidates
from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from cost_model.decisions import Decisions
    from cost_model.measure.harness import Harness
    from graph_ir.graph import Graph

__all__ = ["AutotuneFusion", "FusionTuner", "FusionTuning", "default_fusion", "draw_fusions", "fusion_config_text", "fusion_harness", "fusion_runner",
           "random_fusion"]

logger = logging.getLogger(__name__)

# The fusion dataset's cache backends (measurements are shared with the autotuner). The suffix
# names the timing protocol of the eighth session (samples of >= MIN_SAMPLE_S, time per call,
# XLA with sync dispatch): rows of the older one-call protocol are never mixed in.
BACKEND = "xla-fusion-config/batched"
ORT_BACKEND = "ort-fusion-config/batched"
MIN_SAMPLE_S = 2e-3  # a timed sample loops a configuration until it lasts this long
FUSION_REPEATS = 11  # interleaved rounds per configuration (min over them)


# Copies of the random inputs one measured configuration holds at once: the host draw, the
# executor's device array, and each plan's placed copy (the default and a candidate).
INPUT_COPIES = 4


def executor_for(graph: Graph, nodes: Sequence[Any], *, seed: int = 0) -> tuple[Any, str]:
    """(group executor, cache backend name): XLA for HLO graphs, onnxruntime for ONNX graphs.
    Refused (a PassError) when random data for the inputs would not fit in free memory."""
    from cost_model.profiling.host_memory import memory_shortfall, values_nbytes

    need = INPUT_COPIES * values_nbytes(graph.inputs)
    free = memory_shortfall(need)
    if free is not None:
        raise PassError(f"autotune-fusion: timing this graph needs at least {need / 2**30:.1f} GiB (random data for every input "
                        f"and parameter, copied per configuration), more than the {free / 2**30:.1f} GiB available",
                        pass_name=AutotuneFusion.name)
    domains = {node.domain for node in nodes}
    if domains <= {"hlo"}:
        from cost_model.profiling.calibration import GroupExecutor

        return GroupExecutor(graph, nodes, seed=seed), BACKEND
    if all(d in ("", "ai.onnx", "ai.onnx.ml", "com.microsoft") for d in domains):
        from cost_model.profiling.ort_groups import OrtGroupExecutor

        return OrtGroupExecutor(graph, nodes, seed=seed), ORT_BACKEND
    raise PassError(f"autotune-fusion runs HLO graphs (XLA) and ONNX graphs (onnxruntime); this graph has ops of domains {sorted(domains)}",
                    pass_name=AutotuneFusion.name)


def fusion_config_text(decisions: Decisions) -> str:
    """The configuration's cache key part: the group id of every node in node order."""
    return json.dumps([int(g) for g in decisions.fusion_group])


def _decisions_of(graph: Graph, nodes: Sequence[Any], write: Callable[[], object], *, cleared: bool) -> Decisions:
    # Fusion passes only write node.fusion_group: run one in place, read the groups, restore.
    from cost_model.decisions import Decisions

    index = {node: i for i, node in enumerate(nodes)}
    saved = {n: n.fusion_group for n in nodes}
    try:
        if cleared:
            for n in nodes:
                n.fusion_group = None
        write()
        groups = np.array([n.fusion_group if n.fusion_group is not None else -1 for n in nodes])
    finally:
        for node, group in saved.items():
            node.fusion_group = group
    return Decisions(np.zeros(len(nodes)), groups, topological_priorities(nodes, groups, index))


def random_fusion(graph: Graph, nodes: Sequence[Any], rng: np.random.Generator, *, max_nodes: int = 16) -> Decisions:
    """One legal random fusion of `graph` (nodes in `nodes` order) as `Decisions` on device 0."""
    from passes.fusion.by_priority import FuseByPriority

    priorities = tuple(float(p) for p in rng.uniform(0.0, 1.0, len(nodes)))
    threshold = float(rng.uniform(0.0, 1.0))
    return _decisions_of(graph, nodes, lambda: FuseByPriority(priorities=priorities, threshold=threshold, max_nodes=max_nodes).call(graph), cleared=False)


def default_fusion(graph: Graph, nodes: Sequence[Any], *, max_nodes: int = 16) -> Decisions:
    """What `fuse` would do (greedy loop + epilogue fusion), as `Decisions` on device 0."""
    from passes.fusion.fuse import greedy_fuse
    from passes.fusion.groups import FusionGroups

    def write() -> None:
        groups = FusionGroups(graph, max_nodes=max_nodes)
        greedy_fuse(groups)
        groups.write()

    return _decisions_of(graph, nodes, write, cleared=True)


def draw_fusions(graph: Graph, nodes: Sequence[Any], rng: np.random.Generator, count: int, *, tries: int = 4) -> dict[str, Decisions]:
    """Up to `count` distinct random fusions (config text -> decisions), in draw order; a graph
    with few legal fusions gives fewer (at most `tries * count` draws)."""
    drawn: dict[str, Decisions] = {}
    for _ in range(count * tries):
        if len(drawn) >= count:
            break
        decisions = random_fusion(graph, nodes, rng)
        drawn.setdefault(fusion_config_text(decisions), decisions)
    return drawn


def topological_priorities(nodes: Sequence[Any], groups: np.ndarray, index: dict) -> np.ndarray:
    """Scheduling priorities that run kernels (groups, or single nodes) in a topological order of
    the kernel graph (Kahn's algorithm, FIFO, ties by first node); higher runs first. Linear in
    nodes and edges (was quadratic: minutes on a 22k-node LLM step)."""
    from collections import deque

    kernel = np.where(groups >= 0, groups, -1 - np.arange(len(nodes))).tolist()
    first: dict[int, int] = {}
    for i, k in enumerate(kernel):
        first.setdefault(k, i)
    keys = list(first)  # in order of first node
    position = {k: j for j, k in enumerate(keys)}
    succ: dict[int, set[int]] = {k: set() for k in keys}
    indeg = dict.fromkeys(keys, 0)
    for i, node in enumerate(nodes):
        for value in node.inputs:
            producer = getattr(value, "producer", None) if value is not None else None
            if producer in index:
                source, target = kernel[index[producer]], kernel[i]
                if source != target and target not in succ[source]:
                    succ[source].add(target)
                    indeg[target] += 1
    ready = deque(k for k in keys if indeg[k] == 0)
    order: list[int] = []
    while ready:
        k = ready.popleft()
        order.append(k)
        for s in sorted(succ[k], key=position.__getitem__):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(order) != len(keys):
        raise ValueError("fusion groups form a cycle")
    rank = {k: r for r, k in enumerate(order)}
    return np.array([-float(rank[k]) for k in kernel])


@dataclass
class FusionTuning:
    outcome: TuneOutcome
    candidates: list[str]  # config texts, candidate order (0: the default fusion)
    default_seconds: float
    groups: int = 0  # fused groups of two or more nodes written
    checked: bool = False  # outputs equal to the original graph's
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup_over_default(self) -> float:
        return self.default_seconds / self.outcome.best_seconds


class FusionTuner:
    """Tunes one graph's fusion with a fusion ranker (`predict_log(nodes, groups)`: an
    `AdditiveFusionPredictor` or a `FusionPredictor`) and a `Harness` (measuring)."""

    def __init__(self, predictor: Any, harness: Harness, *, budget: int = 100, top_k: int = 10, seed: int = 0,
                 rtol: float = 1e-3, atol: float = 1e-4) -> None:
        if budget < 1 or top_k < 1:
            raise ValueError(f"budget and top_k must be >= 1, got {budget} and {top_k}")
        self.predictor, self.harness = predictor, harness
        self.budget, self.top_k, self.seed, self.rtol, self.atol = budget, top_k, seed, rtol, atol

    def candidates(self, graph: Graph, nodes: Sequence[Any]) -> dict[str, Decisions]:
        rng = np.random.default_rng(self.seed)
        default = default_fusion(graph, nodes)
        out = {fusion_config_text(default): default}
        for text, decisions in draw_fusions(graph, nodes, rng, self.budget).items():
            out.setdefault(text, decisions)
        return out

    def tune(self, graph: Graph, *, progress: bool = False) -> FusionTuning:
        from tqdm import tqdm

        from cost_model.decisions import node_order
        from cost_model.profiling.signature import graph_signature

        from passes.basic.shape_inference import ShapeInference

        ShapeInference().call(graph)  # in place; each group runs as its own model, so every value it reads needs a type
        nodes = node_order(graph)
        if not nodes:
            raise PassError("autotune-fusion: the graph has no nodes to fuse", pass_name=AutotuneFusion.name)
        executor, backend = executor_for(graph, nodes, seed=self.seed)  # first: it refuses what cannot run or fit
        drawn = self.candidates(graph, nodes)
        texts = list(drawn)
        if self.harness.backend != backend:  # XLA and onnxruntime timings never share cache rows
            self.harness.backend = backend
        signature = graph_signature(graph)
        use_cache = getattr(self.predictor, "use_measurement_cache", None)
        if use_cache is not None:  # a ranker that times the graph's convs alone keeps them in the tuner's cache
            use_cache(self.harness.cache)
        scores = np.asarray(self.predictor.predict_log(nodes, [drawn[t].fusion_group for t in texts]), dtype=np.float64)
        top = set(np.argsort(scores, kind="stable")[: self.top_k].tolist()) | {0}
        # The bar counts the groups still to compile: on a large graph one configuration is
        # thousands of executables and minutes of work, which a per-configuration count hides.
        to_build = set().union(*(executor.uncompiled(drawn[texts[i]]) for i in top if self.harness.cached(signature, texts[i]) is None))
        with tqdm(total=len(to_build), desc="autotune fusion: compile groups", unit="group", disable=not progress) as bar:  # closed on errors too
            executor.on_compile = lambda: bar.update(1)
            default_time: dict[str, float] = {}

            def measure(chosen: Sequence[str]) -> list[float]:
                # The default fusion is timed in the same interleaved rounds: the reference the result
                # is reported against, and a floor (the tuner keeps it when nothing ranked beats it).
                batch = list(chosen) + ([texts[0]] if texts[0] not in chosen else [])
                runners = {}
                for done, text in enumerate(batch, 1):  # compile every plan first, then time
                    runners[text] = fusion_runner(executor.plan(drawn[text])) if self.harness.cached(signature, text) is None else None
                    bar.set_postfix_str(f"{done}/{len(batch)} configurations", refresh=True)
                # timing has no count of its own: the bar keeps the compiled groups without a rate that would decay while it times
                bar.bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} groups compiled [{elapsed}{postfix}]"
                bar.set_description_str("autotune fusion: timing", refresh=True)
                measured = self.harness.measure(signature, runners)
                default_time["s"] = measured.measurements[texts[0]].min_s
                return [measured.measurements[t].min_s for t in chosen]

            try:
                outcome = tune_candidates(texts, rank=lambda _: scores, measure=measure, top_k=self.top_k)
            finally:
                executor.on_compile = None  # the check compiles its reference after the bar is closed
            default_seconds = default_time["s"]
            if 0 not in outcome.measured:
                outcome.measured[0] = default_seconds
                if default_seconds < outcome.best_seconds:
                    outcome.best, outcome.best_seconds = texts[0], default_seconds
        best = drawn[outcome.best]
        checked = self._check(executor, nodes, best)
        for node, group in zip(nodes, best.fusion_group.tolist()):
            node.fusion_group = int(group) if group >= 0 else None
        sizes = np.bincount(best.fusion_group[best.fusion_group >= 0]) if (best.fusion_group >= 0).any() else np.zeros(0)
        return FusionTuning(outcome, texts, default_seconds, int((sizes > 1).sum()), checked)

    def _check(self, executor: Any, nodes: Sequence[Any], best: Decisions) -> bool:
        from cost_model.decisions import Decisions

        chosen = executor.plan(best)
        got = [np.asarray(a) for a in chosen.run()]
        got_again = [np.asarray(a) for a in chosen.run()]  # a stateful RNG moves per run of an executable
        # The reference is the original graph as one executable (XLA) / session (onnxruntime):
        # independent of the executor's routing, and one compile where the unfused plan needs one
        # per node. Where the backend refuses the whole graph, or returns its outputs in another
        # shape (a nested tuple), the unfused plan is the reference.
        try:
            want = [np.asarray(a) for a in executor.run_whole()]
            again = [np.asarray(a) for a in executor.run_whole()]  # outputs two runs disagree on are random (an RNG state)
        except Exception as err:  # the backends raise their own types
            logger.info("autotune-fusion: the whole graph does not run as one executable (%s); the unfused plan is the reference", err)
            want = []
        if len(want) != len(got):
            unfused = np.full(len(nodes), -1)
            reference = Decisions(np.zeros(len(nodes)), unfused, topological_priorities(nodes, unfused, {n: i for i, n in enumerate(nodes)}))
            plan = executor.plan(reference)
            want = [np.asarray(a) for a in plan.run()]
            again = [np.asarray(a) for a in plan.run()]
        for i, (a, b) in enumerate(zip(want, got)):
            if not close(a, again[i], self.rtol, self.atol) or not close(b, got_again[i], self.rtol, self.atol):
                continue  # random: two runs of one executable disagree
            ratio, gap = excess(a, b, self.rtol, self.atol)  # a few ulps of a bf16 / f16 output allowed
            if ratio > 1.0:
                rtol, atol = tolerances(a.dtype, self.rtol, self.atol)
                what = f"shape {b.shape} instead of {a.shape}" if a.shape != b.shape else ("values differ" if np.isnan(gap) else f"max |diff| {gap:g}")
                raise PassError(f"autotune-fusion: output {i} of the chosen fusion differs from the original graph ({what}, rtol {rtol:g}, atol {atol:g})",
                                pass_name=AutotuneFusion.name)
        return True


def fusion_harness(cache: Any, *, seed: int = 0, repeats: int = FUSION_REPEATS, retest_fraction: float = 0.0) -> Harness:
    """A harness with the fusion dataset's cache keys (backend, machine) and timing protocol:
    runners from `fusion_runner`, timed per call, min of `repeats` interleaved rounds."""
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.profiling.signature import machine_fingerprint

    return Harness(cache=cache, backend=BACKEND, machine=machine_fingerprint(), timer=per_call_timer, repeats=repeats, warmup=1,
                   retest_fraction=retest_fraction, seed=seed)


def fusion_runner(plan: Any, min_sample_s: float = MIN_SAMPLE_S) -> Any:
    """A configuration's timed runner: `plan.run` looped so that one sample lasts >= `min_sample_s`
    (a single 50-500 us run is at the mercy of one interrupt or scheduler tick)."""
    from cost_model.measure.harness import batched

    return batched(plan.run, min_sample_s)


@register_pass
@dataclass(frozen=True)
class AutotuneFusion(Pass):
    """Pick fusion groups with the learned layout model, measuring the top-k for real (XLA / onnxruntime)."""

    name = "autotune-fusion"
    model: str = option("", "trained fusion cost model (.json: additive, .pt: GraphSAGE layout model); empty: the packaged additive one")
    budget: int = option(100, "random legal fusions ranked by the model (plus the default fusion)")
    top_k: int = option(10, "configurations run for real")
    cache: str = option("", "measurement cache (SQLite); empty: the profile cache folder")
    seed: int = option(0, "seed of the candidate draw")

    def call(self, graph: Graph) -> PassResult:
        from cost_model.learned.predictor import load_fusion_ranker
        from cost_model.profiling.cache import ProfileCache

        predictor = load_fusion_ranker(self.model or None)
        with ProfileCache(self.cache or None) as cache:
            tuning = FusionTuner(predictor, fusion_harness(cache, seed=self.seed), budget=self.budget, top_k=self.top_k, seed=self.seed).tune(graph)
        graph.meta["autotune_fusion"] = {"seconds": tuning.outcome.best_seconds, "default_seconds": tuning.default_seconds,
                                         "measured": tuning.outcome.measurements, "candidates": len(tuning.candidates), "groups": tuning.groups}
        return PassResult(graph, True)
