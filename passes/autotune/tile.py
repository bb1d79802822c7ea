"""Tile-size autotuning of a graph's kernels, and the `autotune-tiles` pass.

For every dot / MatMul / Gemm, convolution and reduce node (`kernels_from_node`), `budget`
random configurations of its TVM schedule space are ranked by a learned model (`ranker`: the
XGBoost rank + relative ensemble `GbdtEnsembleTilePredictor` by default, the rank model alone
`GbdtTilePredictor`, or the GraphSAGE `TilePredictor`), the `top_k` (`TILE_TOP_K`, 7)
best predicted are compiled, checked against the unscheduled kernel and measured for real
through the `Harness` (SQLite cache: a rerun measures nothing twice) — `extra_k` more in the
ranker's order when the measured top-k disagree with its order of them (`search.tune_candidates`'s
gate; `TILE_EXTRA_K` by default, RESULTS (i), twenty-first session) — and the fastest is written
into the graph: `node.tile` (the flat knob vector) and `node.meta["tile_config"]` (its JSON
text). Nodes with the same kernel signature are tuned once. Left untuned, and named in
`TileTuner.skipped` (thirtieth session): ops whose element types the kernels do not build (integers,
complex, fp8, operands of two types; `kernel_types`), and kernels whose buffers for measuring exceed
the share of free memory a job may plan on (`host_memory.RESERVE`). Kernels are built in the op's own
element types (float32, float64, bf16, f16; thirty-first session: before, only float32 was tuned);
the main ranker was fitted on float32 kernels, so another type's candidates are ranked as the float32
twin of the kernel (the same loop nest and knobs), unless a ranker fitted on that type ships for this
CPU (`type_rankers`: f16 on rocketlake, f16 and bf16 on znver5), which ranks the kernel's own code; all are measured as they
are. A kernel with more than `max_gflop` of work per run is left untuned and named too.

A ranker that compiles every candidate for its code features (the gbdt-ens host files: 0.2-0.5 s a
candidate, most of a kernel's tuning time) is given a prefilter (`prefilter` < 1, twenty-fifth
session; `TILE_PREFILTER` = 0.75 by default): the packaged code-blind XGBoost rank model (`tile_gbdt.ubj`, no compile) orders all the
candidates first and only the best `prefilter` fraction of them (at least top_k + extra_k) are compiled
and ranked by the ranker; the rest follow in the prefilter's order. (A "+z" code feature set's z-scores
are then taken over the kept candidates; the shipped files use "s18", which has none.)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from cost_model.measure.tile.kernels import DTYPES
from graph_ir.errors import CompilerOptError
from passes.autotune.search import TuneOutcome, tune_candidates
from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from cost_model.measure.harness import Harness
    from cost_model.measure.tile.kernels import KernelSpec
    from graph_ir.graph import Graph

__all__ = ["KERNEL_TYPES", "TILE_EXTRA_K", "TILE_MAX_GFLOP", "TILE_PREFILTER", "TILE_TOP_K", "AutotuneTiles", "KernelTooLarge", "KernelTuning", "TileTuner", "compiles_candidates", "kernel_types", "prefilter_keep", "prefiltered_scores", "tvm_threads"]

logger = logging.getLogger(__name__)
TILE_TOP_K = 7  # configurations measured per kernel (the k was 5; 7 by a pre-registered test, RESULTS (i), twenty-first session)
TILE_EXTRA_K = 0  # candidates measured past the top-k when the gate opens (0: the plain top-k; `autotune --extra-k`'s help says 0)
TILE_MAX_GFLOP = 50.0  # a kernel with more work per run is left untuned (thirty-first session: an LLM's 16 x 4096^3 bf16 dot, 2.2 TFLOP, ran for hours)
TILE_PREFILTER = 0.75  # fraction of the candidates a compiling ranker ranks after the code-blind prefilter (1: no prefilter; 3/4 by a pre-registered test, RESULTS (i), twenty-fifth session: the same picks on 50 real-size inception_v1 kernels, a quarter fewer compiles)


def prefilter_keep(count: int, fraction: float, at_least: int) -> int:
    """How many of `count` candidates a prefilter keeping `fraction` passes on: at least `at_least` (what
    will be measured), at most all of them."""
    import math

    return min(count, max(at_least, math.ceil(fraction * count)))


def prefiltered_scores(first: Any, rank_kept: Callable[[Any], Any], keep: int) -> Any:
    """Scores (lower = better) of all candidates: the `keep` best by `first` (the prefilter's scores)
    get `rank_kept(their indices)`, the rest follow every kept one in `first`'s order."""
    import numpy as np

    order = np.argsort(np.asarray(first, dtype=np.float64), kind="stable")
    kept = order[:keep]
    scores = np.empty(len(order), dtype=np.float64)
    ranked = np.asarray(rank_kept(kept), dtype=np.float64)
    scores[kept] = ranked
    scores[order[keep:]] = ranked.max() + 1.0 + np.arange(len(order) - keep)
    return scores


def compiles_candidates(predictor: Any) -> bool:
    """Whether `predictor.rank` compiles each candidate (a ranker fitted with compiled-code features)."""
    members = getattr(predictor, "members", None)
    extra = members[0].extra if members else getattr(predictor, "extra", None)
    return bool(isinstance(extra, dict) and extra.get("code_features"))


def tvm_threads() -> int:
    """TVM's runtime threads: TVM_NUM_THREADS, set to 1 here when unset (timings on a shared
    machine; the cache's machine key records it)."""
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    return int(os.environ["TVM_NUM_THREADS"])


# Element types the tile kernels build (graph_ir short name -> the kernels' name, `kernels.DTYPES` read backwards).
KERNEL_TYPES = {short: name for name, short in DTYPES.items()}


def _element_types(node: Any) -> tuple[set[str], str | None]:
    """Short names (f32, bf16, c128, ...) of the element types a node's tile kernel reads, and of its
    result (None when unknown): a dot's or convolution's two operands, a reduction's data (not its
    axes or init value: TF's Sum and ONNX's ReduceSum take their axes as an int tensor)."""
    from graph_ir.op_kinds import OpKind

    operands = node.inputs[:1] if node.kind is OpKind.REDUCE else node.inputs[:2]
    reads = {v.type.dtype.short_name for v in operands if v is not None and getattr(v.type, "dtype", None) is not None}
    result = node.outputs[0] if node.outputs else None
    return reads, (result.type.dtype.short_name if result is not None and getattr(result.type, "dtype", None) is not None else None)


def kernel_types(node: Any) -> tuple[str, str] | str:
    """(dtype, out_dtype) of a node's tile kernel (`KernelSpec` names; out_dtype "" = dtype), or why
    it has none: operands of two types, or a type the kernels do not build (integers, complex, fp8).
    Unknown types (a graph without them) read as float32."""
    reads, result = _element_types(node)
    if len(reads) > 1:
        return f"operands of two element types ({'/'.join(sorted(reads))})"
    read = next(iter(reads), result or "f32")
    unknown = sorted({read, result or read} - set(KERNEL_TYPES))
    if unknown:
        return f"values of type {'/'.join(unknown)}"
    dtype, out = KERNEL_TYPES[read], KERNEL_TYPES[result or read]
    return dtype, "" if out == dtype else out


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


class KernelTooLarge(CompilerOptError):
    """A kernel whose buffers for measuring do not fit in this host's free memory, or whose one run is more
    work than `max_gflop` (it is left untuned)."""


@dataclass
class KernelTuning:
    spec: KernelSpec
    outcome: TuneOutcome
    nodes: list[str] = field(default_factory=list)
    rank_s: float = 0.0  # wall seconds ranking the candidates (a compiling ranker compiles each one)
    measure_s: float = 0.0  # wall seconds compiling, checking and timing the measured ones
    ranked_as: str = ""  # "" (its own code, the main ranker), "as its float32 twin" (another type, no ranker for it) or "its own <type> code, by the <type> ranker"


class TileTuner:
    """Tunes tile kernels with a ranker (`TilePredictor` or `GbdtTilePredictor`: `rank(space,
    configs)`, lower = predicted faster) and a `Harness` (measuring)."""

    def __init__(self, predictor: Any, harness: Harness, *, budget: int = 200, top_k: int = TILE_TOP_K, seed: int = 0, target: Any = None, finetune_steps: int = 0,
                 extra_k: int = TILE_EXTRA_K, sample_s: float | None = None, prefilter: float = TILE_PREFILTER,
                 type_rankers: Callable[[str], Any] | None = None, max_gflop: float = TILE_MAX_GFLOP) -> None:
        from cost_model.measure.tile.collect import TILE_PROTOCOL

        if not 0.0 < prefilter <= 1.0:
            raise ValueError(f"prefilter must be a fraction in (0, 1], got {prefilter:g}")
        if not max_gflop > 0:
            raise ValueError(f"max_gflop must be positive, got {max_gflop:g}")
        self.max_gflop = max_gflop

        self.predictor, self.harness = predictor, harness
        self.sample_s = TILE_PROTOCOL.sample_s if sample_s is None else sample_s  # calls batched per timed sample, as the collector does
        if predictor is not None:
            from cost_model.learned.predictor import host_mismatch

            note = host_mismatch(predictor)
            if note:
                logger.warning("autotune: %s", note)
        self.budget, self.top_k, self.seed, self.target, self.extra_k = budget, top_k, seed, target, extra_k
        self.finetune_steps = finetune_steps  # > 0: update the model on each kernel's top-k measurements
        self.prefilter = prefilter
        self.type_rankers = type_rankers  # element type -> a ranker fitted on kernels of that type, or None (rank the float32 twin)
        self._prefilter_ranker: Any = None  # the code-blind model, loaded on first use
        self._checked: tuple[str, Any, Any] | None = None  # (signature, inputs, unscheduled output) of the kernel being tuned
        self.seconds: dict[str, float] = {}  # wall seconds of the last `tune` call's steps: rank_s, measure_s
        self.ranked_as = ""  # how the last `tune` call ranked (`KernelTuning.ranked_as`)
        self._store: Any = None  # compiled-code features kept beside the measurement cache (opened on first use)
        self.skipped: dict[str, str] = {}  # what the last `tune_graph` left untuned (a signature, or "kernel, values of type i32") -> why

    def measure(self, space: Any, configs: Sequence[Any]) -> list[float]:
        from cost_model.measure.harness import per_call_timer
        from cost_model.measure.tile.collect import batch_to
        from cost_model.measure.tile.runner import check_against, compile_config, inputs_for, reference_output

        signature = space.kernel.spec.signature
        runners: dict[str, Any] = {}
        missing = [c for c in configs if self.harness.cached(signature, c.text()) is None]
        if missing:
            if self._checked is None or self._checked[0] != signature:  # once per kernel, though the gate measures twice
                arrays = inputs_for(space.kernel)
                self._checked = (signature, arrays, reference_output(space, arrays, target=self.target))
            _, arrays, reference = self._checked
            for config in missing:  # each config's runtime tensors are its own copies of the inputs
                run = compile_config(space, config, target=self.target, arrays=arrays)
                check_against(run, reference)
                runners[config.text()] = batch_to(run, self.sample_s)
        for config in configs:
            runners.setdefault(config.text(), None)
        self.harness.timer = per_call_timer
        measured = self.harness.measure(signature, runners)
        return [self.harness.value(measured.measurements[c.text()]) for c in configs]

    def memory_need(self, kernel: Any) -> int:
        """Bytes measuring `kernel` holds at its peak: the inputs and the reference output, the
        reference run's own buffers, and one set of runtime buffers per configuration measured in
        one call (the top-k and the gate's extra ones), plus the float64 draw of the largest input
        (and its float32 copy, for an input type other than float32)."""
        import numpy as np

        from cost_model.measure.tile.runner import numpy_dtype

        spec = kernel.spec
        counts = [int(np.prod(shape, dtype=np.int64)) for shape in kernel.arg_shapes]
        sizes = [n * numpy_dtype(spec.dtype).itemsize for n in counts[:-1]] + [counts[-1] * numpy_dtype(spec.result_dtype).itemsize]
        draw = max(counts[:-1], default=0) * (8 + (4 if spec.dtype != "float32" else 0))
        return sum(sizes) * (self.top_k + self.extra_k + 2) + sizes[-1] + draw

    def tune(self, spec: KernelSpec) -> TuneOutcome:
        from cost_model.measure.tile.collect import kernel_configs
        from cost_model.measure.tile.kernels import build_kernel
        from cost_model.measure.tile.space import TileSpace
        from cost_model.profiling.host_memory import RESERVE, memory_shortfall

        self.seconds = {}
        if self._checked is not None and self._checked[0] != spec.signature:
            self._checked = None  # the last kernel's inputs are not held while this one's are drawn
        if spec.flops > self.max_gflop * 1e9:  # the unscheduled reference run alone would take minutes to hours, then (1 + rounds) x top-k runs
            raise KernelTooLarge(f"{spec.signature} is {spec.flops / 1e9:,.0f} GFLOP a run, more than the {self.max_gflop:g} GFLOP a kernel may be "
                                 f"(--max-gflop): its reference run and {self.top_k + self.extra_k} measured configurations would take hours on a CPU")
        kernel = build_kernel(spec)
        need = self.memory_need(kernel)
        free = memory_shortfall(need)
        if free is not None:  # an LLM's 4096 x 128256 x 4096 logits matmul: 4 GiB a buffer set; the kernel would kill the process
            raise KernelTooLarge(f"measuring {self.top_k + self.extra_k} configuration(s) of {spec.signature} at once needs about {_size(need)} "
                                 f"of buffers, more than {RESERVE:.0%} of the {_size(free)} available")
        space = TileSpace(kernel)
        # The main ranker was fitted on float32 kernels: another element type's candidates are drawn from
        # the float32 twin (the same loop nest and knobs) and ranked as the twin, unless a ranker fitted on
        # that type exists (`type_rankers`), which ranks the kernel's own code; all are measured as they are.
        twin = space if spec == spec.float32_twin else TileSpace(build_kernel(spec.float32_twin))
        typed = self.type_rankers(spec.dtype) if twin is not space and self.type_rankers is not None else None
        ranked_space, ranker = (twin, self.predictor) if typed is None else (space, typed)
        self.ranked_as = "" if twin is space else "as its float32 twin" if typed is None else f"its own {spec.dtype} code, by the {spec.dtype} ranker"
        candidates = kernel_configs(twin, self.seed, self.budget)
        outcome = tune_candidates(candidates, rank=lambda cs: self._timed("rank_s", self.rank, ranked_space, cs, ranker),
                                  measure=lambda cs: self._timed("measure_s", self.measure, space, cs), top_k=self.top_k, extra_k=self.extra_k)
        if self.finetune_steps > 0 and twin is space:  # another type's timings would teach the float32 ranker wrong labels
            chosen = list(outcome.measured)
            self.predictor.finetune(space, [candidates[i] for i in chosen], [outcome.measured[i] for i in chosen], steps=self.finetune_steps)
        return outcome

    def _timed(self, key: str, step: Callable[..., Any], *args: Any) -> Any:
        import time

        began = time.perf_counter()
        try:
            return step(*args)
        finally:
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - began

    def rank(self, space: Any, configs: Sequence[Any], predictor: Any = None) -> Any:
        """Scores (lower = predicted faster) of `configs`: the ranker's (`predictor`, default the tuner's),
        or with a prefilter the ranker's for the kept fraction and, after them, the prefilter's order for
        the rest (the code-blind prefilter reads the knobs only, the same for every element type)."""
        from cost_model.learned.code_feature_store import active

        predictor = self.predictor if predictor is None else predictor
        keep = prefilter_keep(len(configs), self.prefilter, self.top_k + self.extra_k)
        if not compiles_candidates(predictor):
            return predictor.rank(space, configs)
        with active(self._feature_store()):  # a rerun reads each candidate's code features back instead of compiling it
            if keep >= len(configs):
                return predictor.rank(space, configs)
            if self._prefilter_ranker is None:
                from cost_model.learned.predictor import load_tile_ranker

                self._prefilter_ranker = load_tile_ranker("gbdt", None)
            return prefiltered_scores(self._prefilter_ranker.rank(space, configs), lambda kept: predictor.rank(space, [configs[i] for i in kept]), keep)

    def _feature_store(self) -> Any:
        """The code-feature store beside the measurement cache's SQLite file (`<name>.code_features.sqlite`), or None."""
        from pathlib import Path

        if self._store is None:
            path = getattr(getattr(self.harness, "cache", None), "path", None)
            if path is None or str(path) == ":memory:":
                return None
            from cost_model.learned.code_feature_store import CodeFeatureStore

            path = Path(path)
            self._store = CodeFeatureStore(path.with_name(f"{path.stem}.code_features.sqlite"))
        return self._store

    def tune_graph(self, graph: Graph, *, progress: bool = False) -> list[KernelTuning]:
        from tqdm import tqdm

        from cost_model.measure.tile.shapes import _nodes, kernels_from_node

        by_signature: dict[str, KernelTuning] = {}
        self.skipped = {}
        found = [(node, spec) for node in _nodes(graph) if (spec := kernels_from_node(node)) is not None]
        # Each op's kernel is built in its own element types (an LLM's bf16 dots too); ops whose types
        # the kernels do not build (integers, complex, fp8, mixed operands) are named and left untuned.
        todo: list[tuple[Any, KernelSpec]] = []
        others: dict[str, list[str]] = {}  # "kernel, why" -> its nodes
        for node, spec in found:
            types = kernel_types(node)
            if isinstance(types, str):
                others.setdefault(f"{spec.kind}({','.join(str(d) for d in spec.dims)}), {types}", []).append(node.name)
            else:
                todo.append((node, replace(spec, dtype=types[0], out_dtype=types[1])))
        for key, names in others.items():
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            self.skipped[key] = f"{len(names)} node(s) ({shown}): the tile kernels build {', '.join(KERNEL_TYPES)} only"
        specs = {spec.signature: spec for _, spec in todo}
        with tqdm(specs.items(), desc="autotune tiles", unit="kernel", disable=not progress) as bar:  # closed on errors too
            for signature, spec in bar:
                try:
                    outcome = self.tune(spec)
                except KernelTooLarge as error:  # the other kernels are still tuned
                    self.skipped[signature] = str(error)
                    continue
                by_signature[signature] = KernelTuning(spec, outcome, rank_s=self.seconds.get("rank_s", 0.0), measure_s=self.seconds.get("measure_s", 0.0),
                                                       ranked_as=self.ranked_as)
        too_large = [s for s in self.skipped if s in specs]
        if too_large:
            names = {s: [n.name for n, t in todo if t.signature == s] for s in too_large}
            logger.warning("autotune: %d kernel(s) left untuned, too large to measure here: %s", len(too_large),
                           "; ".join(f"{', '.join(names[s][:3])}{' ...' if len(names[s]) > 3 else ''}: {self.skipped[s]}" for s in too_large))
        if others:
            logger.warning("autotune: %d op(s) left untuned: element types the tile kernels do not build (they build %s)",
                           sum(len(names) for names in others.values()), ", ".join(KERNEL_TYPES))
        for node, spec in todo:
            tuning = by_signature.get(spec.signature)
            if tuning is None:
                continue
            node.tile = tuning.outcome.best.flat()
            node.meta["tile_config"] = tuning.outcome.best.text()
            node.meta["tile_seconds"] = tuning.outcome.best_seconds
            tuning.nodes.append(node.name)
        return list(by_signature.values())


@register_pass
@dataclass(frozen=True)
class AutotuneTiles(Pass):
    """Pick each dot/conv/reduce kernel's tile configuration with the learned cost model, measuring the top-k."""

    name = "autotune-tiles"
    model: str = option("", "trained ranker (gnn: .pt, gbdt: .ubj, gbdt-ens: .json); empty: the packaged one")
    ranker: str = option("", "gnn (GraphSAGE), gbdt (XGBoost rank on flat features) or gbdt-ens (that + a per-kernel relative regression); empty: what model's suffix names, else gbdt-ens")
    budget: int = option(200, "configurations ranked by the model per kernel")
    top_k: int = option(TILE_TOP_K, "configurations measured for real per kernel")
    extra_k: int = option(TILE_EXTRA_K, "configurations measured past the top-k when the measured top-k disagree with the ranker's order (0: off)")
    prefilter: float = option(TILE_PREFILTER, "fraction of the candidates a compiling ranker (gbdt-ens) ranks, after the code-blind model keeps the best of them (1: all)")
    max_gflop: float = option(TILE_MAX_GFLOP, "a kernel with more work per run (GFLOP) is left untuned and named")
    cache: str = option("", "measurement cache (SQLite); empty: the profile cache folder")
    seed: int = option(0, "seed of the candidate draw")

    def call(self, graph: Graph) -> PassResult:
        from cost_model.learned.predictor import TILE_RANKERS, load_tile_ranker, packaged_type_ranker, tile_ranker_for
        from cost_model.measure.tile.collect import tile_harness
        from cost_model.profiling.cache import ProfileCache

        if self.ranker and self.ranker not in TILE_RANKERS:
            raise PassError(f"autotune-tiles: ranker must be one of {', '.join(TILE_RANKERS)}, got {self.ranker!r}")
        if self.top_k < 1 or self.extra_k < 0:
            raise PassError(f"autotune-tiles: top_k must be >= 1 and extra_k >= 0, got top_k={self.top_k}, extra_k={self.extra_k}")
        if not 0.0 < self.prefilter <= 1.0:
            raise PassError(f"autotune-tiles: prefilter must be a fraction in (0, 1], got {self.prefilter:g}")
        if not self.max_gflop > 0:
            raise PassError(f"autotune-tiles: max_gflop must be positive, got {self.max_gflop:g}")
        try:
            ranker = tile_ranker_for(self.model or None, self.ranker or None)
        except ValueError as error:
            raise PassError(f"autotune-tiles: {error}") from error
        try:
            predictor = load_tile_ranker(ranker, self.model or None)
        except ImportError as error:
            raise PassError(f"autotune-tiles needs the 'tune' extra (apache-tvm): {error}") from error
        with ProfileCache(self.cache or None) as cache:
            harness = tile_harness(cache, threads=tvm_threads(), retest_fraction=0.0)
            type_rankers = packaged_type_ranker if not self.model and ranker == "gbdt-ens" else None  # the package's, for its default only
            tuner = TileTuner(predictor, harness, budget=self.budget, top_k=self.top_k, seed=self.seed, extra_k=self.extra_k, prefilter=self.prefilter,
                              type_rankers=type_rankers, max_gflop=self.max_gflop)
            tunings = tuner.tune_graph(graph)
        graph.meta["autotune_tiles"] = {t.spec.signature: {"seconds": t.outcome.best_seconds, "measured": t.outcome.measurements, "nodes": len(t.nodes),
                                                           "extra_measured": t.outcome.extra_measured, "rank_s": t.rank_s, "measure_s": t.measure_s}
                                           for t in tunings} | {s: {"skipped": why} for s, why in tuner.skipped.items()}
        return PassResult(graph, bool(tunings))
