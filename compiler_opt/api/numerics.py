"""Run the original and the optimized graph on the same seeded random inputs and compare:
onnxruntime for ONNX, XLA's CPU backend for HLO and StableHLO, TensorFlow for GraphDefs.

Tolerance (`graph_ir.compare`): |got - want| <= atol + rtol * |want| element-wise, rtol 1e-4 and
atol 1e-5 for floating outputs (folding BatchNormalization into weights rounds once more in
float32; a real bug is orders of magnitude beyond), never below 4 ulps of the output's own type
(bf16, f16), exact for integers, booleans and strings. The worst output is the one
with the largest error relative to its tolerance. Random outputs are not compared, and are named:
those computed from a random op (`RANDOM_OPS`), and those two runs of the original disagree on (a
seed read from the runtime).

When the backend cannot run the original model (an opset onnxruntime dropped, an op XLA cannot
compile), nothing can be compared: the check reports `ran=False` and why, instead of failing as
if the rewrite were wrong. When it runs the original but not the optimized model, the rewrite
broke it: a failed check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_model.profiling.host_memory import RESERVE, available_memory_bytes, values_nbytes
from graph_ir.compare import excess, tolerances
from graph_ir.graph import Graph
from graph_ir.types import TensorType

__all__ = ["ATOL", "RANDOM_OPS", "RTOL", "WAITING_TF_OPS", "NumericsCheck", "available_memory_bytes", "check_memory_bytes", "check_numerics", "check_refusal", "random_outputs", "unshaped_feeds"]

logger = logging.getLogger(__name__)

RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class NumericsCheck:
    ok: bool
    backend: str
    worst_output: str | None
    max_abs_error: float
    rtol: float = RTOL
    atol: float = ATOL
    message: str = ""
    ran: bool = True  # False: the backend could not run the original, so nothing was compared
    varying_outputs: tuple[str, ...] = ()  # random outputs (a random op, or two runs of the original disagree): not compared

    def one_line(self) -> str:
        if self.ok:
            return (f"outputs equal in {self.backend} (max abs error {self.max_abs_error:.3g}, rtol {self.rtol:g}, "
                    f"atol {self.atol:g}){_left_out(self.varying_outputs)}")
        return self.message


def _left_out(names: Sequence[str]) -> str:
    """The clause naming outputs the check could not compare ('' when none)."""
    if not names:
        return ""
    return f"; not compared: {', '.join(repr(n) for n in names)}, which are random (a random op, or two runs of the original differ)"


def _random_array(value_type: TensorType, rng: np.random.Generator, name: str) -> np.ndarray:
    if value_type.shape is None or not value_type.shape.is_static:
        raise ValueError(f"input {name!r} has no static shape ({value_type}); give one with --input-shape")
    shape = tuple(value_type.shape)
    dtype = value_type.dtype
    if dtype.is_floating:
        return rng.standard_normal(shape).astype(dtype.numpy)
    if dtype.short_name == "pred" or dtype.numpy == np.bool_:
        return rng.random(shape) > 0.5
    return rng.integers(0, 8, shape).astype(dtype.numpy)


# Ops whose values are random by definition (ONNX, TensorFlow, HLO opcodes): outputs computed from
# one are not compared. onnxruntime seeds an unseeded op per session in a way that two sessions of
# one model agree but a rewritten model does not, so the second reference run cannot catch them.
RANDOM_OPS = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
    "RandomStandardNormal", "RandomUniformInt", "TruncatedNormal", "RandomShuffle", "RandomGamma", "RandomPoisson",
    "RandomPoissonV2", "ParameterizedTruncatedNormal",
    "rng", "rng-get-and-update-state",
})


def random_outputs(graph: Graph) -> set[str]:
    """Names of `graph`'s outputs computed (through any path) from a random op, here or inside a
    node's subgraphs."""
    def is_random(node: Any) -> bool:
        if node.op_type in RANDOM_OPS:
            return True
        return node.has_subgraphs and any(inner.op_type in RANDOM_OPS for sub in node.subgraphs() for inner in sub.all_nodes())

    frontier = [node for node in graph if is_random(node)]
    tainted: set[Any] = set(frontier)
    while frontier:
        for user in frontier.pop().users():
            if user not in tainted:
                tainted.add(user)
                frontier.append(user)
    return {value.name for value in graph.outputs if value.producer is not None and value.producer in tainted}


def _compare(names: list[str], want: list[Any], got: list[Any], backend: str, again: list[Any] | None = None,
             random: set[str] | frozenset[str] = frozenset()) -> NumericsCheck:
    """Compare every output; outputs in `random` (computed from a random op) and, with `again` (a
    second run of the original on the same inputs), outputs the two reference runs disagree on (a
    seed read from the runtime) cannot be checked: they are left out, named in the message."""
    worst, worst_ratio, worst_abs, worst_tol = None, -1.0, 0.0, (RTOL, ATOL)
    varying: list[str] = []
    for index, (name, w, g) in enumerate(zip(names, want, got)):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape:
            return NumericsCheck(False, backend, name, float("inf"), message=f"output {name!r}: shape {g.shape} instead of {w.shape}")
        if w.size == 0:
            continue
        if name in random or (again is not None and excess(w, np.asarray(again[index]), RTOL, ATOL)[0] > 1.0):
            varying.append(name)
            continue
        ratio, abs_error = excess(w, g, RTOL, ATOL)
        if ratio > worst_ratio:
            worst, worst_ratio, worst_abs, worst_tol = name, ratio, abs_error, tolerances(w.dtype, RTOL, ATOL)
    if varying and worst is None and len(varying) == sum(np.asarray(w).size > 0 for w in want):
        return NumericsCheck(False, backend, None, float("nan"), ran=False,
                             message=f"numerical check not possible: every output is random in {backend} (a random op, or two runs of the original differ)")
    ok = worst_ratio <= 1.0
    gap = "values differ" if np.isnan(worst_abs) else f"differs by up to {worst_abs:.3g}"
    message = "" if ok else (
        f"numerical check failed in {backend}: output {worst!r} {gap} "
        f"(tolerance rtol {worst_tol[0]:g}, atol {worst_tol[1]:g}){_left_out(varying)}"
    )
    return NumericsCheck(ok, backend, worst, worst_abs, worst_tol[0], worst_tol[1], message=message, varying_outputs=tuple(varying))


def _feeds(graph: Graph, fmt: str) -> list[Any]:
    """The values the check feeds random data to, per format (as the `_check_*` functions do)."""
    if fmt == "tf_graphdef":
        from graph_ir.summary import feed_values

        return feed_values(graph)
    if fmt == "onnx":
        return [v for v in graph.inputs if v.name not in graph.initializers]
    return list(graph.inputs)


def unshaped_feeds(graph: Graph, fmt: str) -> list[str]:
    """`name: type` of each value the check must feed that has no static shape (it cannot make
    random data for them); asked before optimizing, so `--check` fails before the work."""
    return [
        f"{value.name}: {value.type}"
        for value in _feeds(graph, fmt)
        if value.type.shape is None or not value.type.shape.is_static
    ]


def check_memory_bytes(graph: Graph, fmt: str) -> int:
    """About what the check holds at its peak: the random feeds twice (ours, and the backend's
    copy), three sets of outputs (two reference runs and the result's) and the constants of two
    models. A floor, not a bound: the backend's intermediates come on top."""
    constants = values_nbytes(graph.initializers.values()) if fmt == "onnx" else 0
    return 2 * values_nbytes(_feeds(graph, fmt)) + 3 * values_nbytes(graph.outputs) + 2 * constants


def check_refusal(graph: Graph, fmt: str) -> tuple[str, str] | None:
    """(field, message) when the check cannot be run on `graph` at all, asked before optimizing:
    feeds without a static shape (no random data for them), or more memory than this machine has
    free (a 2B-parameter HLO module holds 10 GiB of parameters; their random copies got the check
    killed by the kernel after minutes of work). None when it can run."""
    unshaped = unshaped_feeds(graph, fmt)
    if unshaped:
        return "input_shapes", (
            f"the numerical check feeds random inputs and needs static shapes; {', '.join(unshaped[:5])}"
            f"{' ...' if len(unshaped) > 5 else ''} (give each with --input-shape NAME:DIMS, input_shapes= in Python,"
            " or leave the check off)"
        )
    need, free = check_memory_bytes(graph, fmt), available_memory_bytes()
    if free is not None and need > RESERVE * free:  # host_memory.RESERVE: the floor leaves things out
        return "check", (
            f"the numerical check needs at least {need / 2**30:.1f} GiB (random data for every input and parameter, "
            f"which the backend copies, and the outputs of three runs), more than the {free / 2**30:.1f} GiB available; "
            "leave the check off (optimizing needs far less) or run it on a larger machine"
        )
    return None


def _reason(err: Exception) -> str:
    """The backend's own words, without TensorFlow's boilerplate lines ("Graph execution error:",
    "Detected at node ... defined at"), on one line."""
    lines = [line.strip() for line in str(err).splitlines()]
    useful = [
        line for line in lines
        if line and line != "Graph execution error:" and not line.startswith(("Detected at node", "Node: ", "[["))
    ]
    return " ".join(useful)[:300] if useful else type(err).__name__


def _cannot_run_original(backend: str, err: Exception) -> NumericsCheck:
    from cost_model.profiling.ort_backend import old_opset_hint

    reason = _reason(err)
    return NumericsCheck(
        False, backend, None, float("nan"), ran=False,
        message=f"numerical check not possible: {backend} cannot run the original model ({type(err).__name__}: {reason}){old_opset_hint(str(err))}",
    )


def _cannot_run_optimized(backend: str, err: Exception) -> NumericsCheck:
    reason = _reason(err)
    return NumericsCheck(
        False, backend, None, float("inf"),
        message=f"numerical check failed: {backend} runs the original model but not the optimized one ({type(err).__name__}: {reason})",
    )


def _run_both(backend: str, reference: Callable[[], Any], result: Callable[[], Any]) -> tuple[Any, Any, Any] | NumericsCheck:
    """(two runs of the original, one of the result), or the check that says which one the
    backend refused."""
    try:
        want, again = reference(), reference()
    except Exception as err:  # the backend's own exception types: any refusal of the input
        return _cannot_run_original(backend, err)
    try:
        got = result()
    except Exception as err:
        return _cannot_run_optimized(backend, err)
    return want, again, got


def check_numerics(original: Graph, optimized: Graph, fmt: str, *, seed: int = 0) -> NumericsCheck:
    """Compare `original` and `optimized` (module docstring)."""
    rng = np.random.default_rng(seed)
    if fmt == "onnx":
        return _check_onnx(original, optimized, rng)
    if fmt == "hlo":
        return _check_hlo(original, optimized, rng)
    if fmt == "stablehlo":
        return _check_stablehlo(original, optimized, rng)
    if fmt == "tf_graphdef":
        return _check_tf(original, optimized, rng)
    raise ValueError(f"no numerical check for format {fmt!r}")


def _check_onnx(original: Graph, optimized: Graph, rng: np.random.Generator) -> NumericsCheck:
    import onnxruntime as ort

    from graph_ir.io.onnx_export import export_onnx

    feeds = {v.name: _random_array(v.type, rng, v.name) for v in original.inputs if v.name not in original.initializers}
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: a refusal is caught and reported with its reason
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # compare our graphs, not ORT's

    def run(model: Any) -> tuple[list[str], list[Any]]:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        mine = {i.name for i in session.get_inputs()}
        return names, session.run(names, {k: v for k, v in feeds.items() if k in mine})

    backend = f"onnxruntime {ort.__version__}"
    reference = export_onnx(original)  # our exporter failing is our bug: not caught
    written = export_onnx(optimized, fused_groups_as_functions=True)  # as the file is written
    runs = _run_both(backend, lambda: run(reference), lambda: run(written))
    if isinstance(runs, NumericsCheck):
        return runs
    (names, want), (_, again), (_, got) = runs
    return _compare(names, want, got, backend, again, random_outputs(original))


def _check_hlo(original: Graph, optimized: Graph, rng: np.random.Generator) -> NumericsCheck:
    import jax

    from graph_ir.io.hlo_export import export_hlo_proto, export_hlo_text
    from graph_ir.io.xla_bridge import parse_hlo_text, run_hlo_module

    backend = f"XLA (jax {jax.__version__})"
    args = [_random_array(v.type, rng, v.name) for v in original.inputs]
    reference = export_hlo_proto(original, fusion_kinds="call")  # fusions the module came with run as calls, as the result's do
    # The file is written with kLoop fusions, which XLA's parser reads back here; the
    # module executed has each fused group outlined identically but called (`fusion_kinds=
    # "call"`): jaxlib compiles through MLIR, which drops fused computations' layouts, and
    # XLA:CPU aborts on a pre-made fusion without them (graph_ir.io.hlo_export).
    written = export_hlo_text(optimized, materialize_fusions=True)
    executed = export_hlo_proto(optimized, materialize_fusions=True, fusion_kinds="call")

    def result() -> list[Any]:
        parse_hlo_text(written)
        return run_hlo_module(executed, *args)

    runs = _run_both(backend, lambda: run_hlo_module(reference, *args), result)
    if isinstance(runs, NumericsCheck):
        return runs
    want, again, got = runs
    names = [f"output {i}" for i in range(len(want))]
    return _compare(names, want, got, backend, again)


def _check_stablehlo(original: Graph, optimized: Graph, rng: np.random.Generator) -> NumericsCheck:
    """A StableHLO graph is checked as it is written: both graphs printed as MLIR (what `save`
    writes for .mlir) and compiled by XLA from that text."""
    import jax

    from graph_ir.io.stablehlo_export import export_stablehlo_text
    from graph_ir.io.xla_bridge import run_stablehlo_text

    backend = f"XLA (jax {jax.__version__}, from StableHLO)"
    args = [_random_array(v.type, rng, v.name) for v in original.inputs]
    reference, written = export_stablehlo_text(original), export_stablehlo_text(optimized)
    runs = _run_both(backend, lambda: run_stablehlo_text(reference, *args), lambda: run_stablehlo_text(written, *args))
    if isinstance(runs, NumericsCheck):
        return runs
    want, again, got = runs
    names = [f"output {i}" for i in range(len(want))]
    return _compare(names, want, got, backend, again)


# TensorFlow ops that wait for data from outside the graph (a queue another step fills, a file
# reader, a dataset iterator, a send from another device): fed random inputs they block forever.
WAITING_TF_OPS = frozenset({
    "QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2", "QueueDequeueUpTo",
    "QueueDequeueUpToV2", "ReaderRead", "ReaderReadV2", "ReaderReadUpTo", "ReaderReadUpToV2",
    "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional", "Recv", "_Recv", "BarrierTakeMany",
})
TF_RUN_TIMEOUT_S = 300  # one run of one graph; past it the check is "not possible", not a hang


def _waiting_node(graph: Graph) -> str | None:
    """The first node an output depends on that waits for data from outside the graph."""
    frontier = [value.producer for value in graph.outputs if value.producer is not None]
    seen: set[Any] = set(frontier)
    while frontier:
        node = frontier.pop()
        if node.op_type in WAITING_TF_OPS:
            return node.name
        for before in node.predecessors():
            if before not in seen:
                seen.add(before)
                frontier.append(before)
    return None


def _check_tf(original: Graph, optimized: Graph, rng: np.random.Generator) -> NumericsCheck:
    import tensorflow as tf

    from graph_ir.io.tf_export import export_graphdef
    from graph_ir.io.tf_import import graphdef_without_devices
    from graph_ir.summary import feed_values

    backend = f"TensorFlow {tf.__version__}"
    waiting = _waiting_node(original)
    if waiting is not None:
        return NumericsCheck(
            False, backend, None, float("nan"), ran=False,
            message=f"numerical check not possible: node {waiting!r} waits for data from outside the graph "
                    "(a queue, reader or iterator), which random inputs cannot give",
        )
    feeds = {v.name: _random_array(v.type, rng, v.name) for v in feed_values(original)}
    fetches = [v.name for v in original.outputs]
    deadline = tf.compat.v1.RunOptions(timeout_in_ms=TF_RUN_TIMEOUT_S * 1000)

    def run(graph_def: Any) -> list[Any]:
        config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
        with tf.Graph().as_default() as tf_graph:
            tf.graph_util.import_graph_def(graph_def, name="")
            with tf.compat.v1.Session(graph=tf_graph, config=config) as session:
                return session.run(fetches, feeds, options=deadline)

    # Both run on this CPU: devices change no value, and a device string TensorFlow cannot parse
    # (a GraphDef from another cluster) would stop the run before it compares anything.
    reference = graphdef_without_devices(export_graphdef(original))
    written = graphdef_without_devices(export_graphdef(optimized))
    runs = _run_both(backend, lambda: run(reference), lambda: run(written))
    if isinstance(runs, NumericsCheck):
        return runs
    want, again, got = runs
    return _compare(fetches, want, got, backend, again, random_outputs(original))
