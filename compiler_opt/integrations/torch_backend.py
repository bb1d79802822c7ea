"""A `torch.compile` backend: `torch.compile(model, backend="compiler_opt", options={...})`.

How torch finds it: the `torch_dynamo_backends` entry-point group (pyproject; torch's
`lookup_backend` loads it on first use of the name), or `register_torch_backend()` for a
process where the package is not installed (it calls `torch._dynamo.register_backend`).

What happens to each graph dynamo captures:
1. executor "fx" (default): AOTAutograd lowers the graph to aten ops (forward, and backward when
   gradients are needed) with fake example inputs; each aten graph is imported into our IR
   (`graph_ir.io.torch_import.import_fx_graph_module`) and the pipeline runs (default: placement
   over the target's devices, `fuse`, `schedule{reorder=true}`). The decisions go back onto the
   fx nodes (`node.meta["compiler_opt"]`) and the fx graph's node order becomes the schedule's
   order; the callable is that re-ordered aten GraphModule.
   What this changes at run time, honestly: on one CPU only the order in which the aten ops run
   (which changes when intermediates are freed, i.e. peak memory, not the arithmetic). The fused
   groups are recorded, not executed as fused kernels: the aten ops of a group run one by one as
   before, and with one device the placement is trivially "all on the CPU".
2. executor "onnxruntime" (inference only): the dynamo graph goes through
   `torch.onnx.export(dynamo=True)` into our IR (`torch_to_onnx_graph`), the pipeline runs, the
   model is exported with each fused group as an ONNX local function and the schedule as the
   node order, and an onnxruntime session runs it. onnxruntime inlines local functions when it
   loads a model, so a fused group is again a grouping, not a kernel of its own; the kernels are
   onnxruntime's (with its own graph optimizations), which is what changes the speed.
Outputs equal eager mode (tests check it). A graph the backend cannot handle (an import,
pipeline or export failure; gradients with the onnxruntime executor) runs eagerly after ONE
warning (`CompilerOptFallbackWarning`) naming the graph and the reason; it never raises, unless
`options={"fallback": False}` asks for the error.

Options (`torch.compile(..., options={...})`): `pipeline` (a pipeline string; default above),
`target` ("host" = this process's CPU, or a device spec; the pipeline's `Target`), `executor` ("fx" |
"onnxruntime"), `fallback` (True), `threads` (onnxruntime's intra-op threads; 0: its default).
An unknown option, executor or pass name is an error (the
caller's mistake), not a fallback.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = [
    "BACKEND_NAME",
    "CompilerOptFallbackWarning",
    "BackendOptions",
    "compiler_opt_backend",
    "register_torch_backend",
    "last_compile_stats",
]

logger = logging.getLogger(__name__)

BACKEND_NAME = "compiler_opt"
_EXECUTORS = ("fx", "onnxruntime")


class CompilerOptFallbackWarning(UserWarning):
    """The backend could not handle a graph; it runs eagerly (the message says why)."""


@dataclass(frozen=True)
class BackendOptions:
    pipeline: str | None = None
    target: str = "host"
    executor: str = "fx"
    fallback: bool = True
    threads: int = 0  # onnxruntime intra-op threads (0: onnxruntime's default)

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> BackendOptions:
        from passes.infra.base import PassError

        options = dict(options or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(options) - known)
        if unknown:
            raise PassError(
                f"torch.compile backend '{BACKEND_NAME}': unknown option(s) {', '.join(unknown)} "
                f"(options: {', '.join(sorted(known))})"
            )
        made = cls(**options)
        if made.executor not in _EXECUTORS:
            raise PassError(f"torch.compile backend '{BACKEND_NAME}': executor must be one of {_EXECUTORS}, got {made.executor!r}")
        # the caller's mistakes, not graphs to run eagerly (forty-ninth session: threads="many" fell back with a TypeError,
        # fallback="no" counted as true)
        if not isinstance(made.fallback, bool):
            raise PassError(f"torch.compile backend '{BACKEND_NAME}': fallback must be True or False, got {made.fallback!r}")
        if isinstance(made.threads, bool) or not isinstance(made.threads, int) or made.threads < 0:
            raise PassError(f"torch.compile backend '{BACKEND_NAME}': threads must be an integer >= 0 (0: onnxruntime's default), "
                            f"got {made.threads!r}")
        if made.pipeline is not None and not isinstance(made.pipeline, str):
            raise PassError(f"torch.compile backend '{BACKEND_NAME}': pipeline must be a pipeline string, got {type(made.pipeline).__name__}")
        return made


@dataclass
class CompileStats:
    """What the backend did for the graphs it compiled (for tests, benchmarks and curious users)."""

    graphs: int = 0
    fallbacks: list[str] = field(default_factory=list)
    nodes: int = 0
    fused_groups: int = 0
    reordered: int = 0
    seconds: float = 0.0


_STATS = CompileStats()


def last_compile_stats(reset: bool = False) -> CompileStats:
    """Counters since the last reset: graphs compiled, fallbacks (reasons), nodes, fused groups,
    graphs whose node order changed, seconds spent in the backend."""
    global _STATS
    stats = _STATS
    if reset:
        _STATS = CompileStats()
    return stats


def compiler_opt_backend(gm: Any, example_inputs: Sequence[Any], *, options: dict[str, Any] | None = None, mode: str | None = None) -> Callable[..., Any]:
    """The dynamo backend (see the module docstring)."""
    opts = BackendOptions.from_options(options)  # a bad option is the caller's error: raise
    if mode not in (None, "default"):
        logger.info("torch.compile mode %r has no meaning for the %s backend; ignored", mode, BACKEND_NAME)
    from compiler_opt.integrations._target import build_pipeline, resolve_target

    target = resolve_target(opts.target)
    passes = build_pipeline(opts.pipeline, target)  # a bad pipeline string raises too
    name = _graph_name(gm)
    if opts.executor == "onnxruntime":
        return _guarded(name, opts, gm, lambda: _compile_onnxruntime(gm, example_inputs, passes, name, opts.threads, target))
    return _guarded(name, opts, gm, lambda: _compile_aot(gm, example_inputs, passes, opts, name, target))


def _guarded(name: str, opts: BackendOptions, gm: Any, build: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    try:
        return build()
    except Exception as err:
        if not opts.fallback:
            raise
        return _fall_back(name, gm, _reason(err))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _reason(err: BaseException) -> str:
    """One line: the error and, when it only wraps another (torch.onnx's ConversionError), the cause."""
    def line(e: BaseException) -> str:
        text = _ANSI.sub("", str(e)).strip()
        return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"

    cause = err.__cause__
    reason = f"{line(err)} (caused by {line(cause)})" if cause is not None else line(err)
    return reason + _hint(reason)


# torch's fused inference fast paths (nn.TransformerEncoderLayer / nn.MultiheadAttention in eval mode under no_grad):
# single aten ops with no ONNX translation. With the fast path off, dynamo traces their decomposed code instead.
_FAST_PATH_OPS = ("_transformer_encoder_layer_fwd", "_native_multi_head_attention", "_transformer_decoder_only_layer_fwd")


def _hint(reason: str) -> str:
    """What the user can do about a failure, where we know (appended to the one-line reason)."""
    op = next((name for name in _FAST_PATH_OPS if name in reason), None)
    if op is None:
        return ""
    return f"; hint: torch's fused fast path {op} has no ONNX translation: call torch.backends.mha.set_fastpath_enabled(False) before compiling"


def _fall_back(name: str, gm: Any, reason: str) -> Callable[..., Any]:
    first = reason.strip().splitlines()[0] if reason.strip() else reason
    _STATS.fallbacks.append(f"{name}: {first}")
    warnings.warn(
        f"compiler_opt backend: graph {name} runs eagerly: {first}", CompilerOptFallbackWarning, stacklevel=2
    )
    return gm.forward


def _graph_name(gm: Any) -> str:
    count = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_module", "call_method"))
    return f"'{type(gm).__name__}' ({count} ops)"


# ---- executor "fx": AOTAutograd -> aten graphs -> decisions -> re-ordered GraphModules ----------


def _compile_aot(
    gm: Any, example_inputs: Sequence[Any], passes: list[Any], opts: BackendOptions, name: str, target: Any = None
) -> Callable[..., Any]:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def compile_aten(aten_gm: Any, aten_inputs: Sequence[Any]) -> Any:
        # Inside AOTAutograd a failure would break the whole compile: fall back per graph here,
        # with the aten graph as the eager path (it is exactly what eager computes).
        try:
            return make_boxed_func(optimize_fx_graph(aten_gm, passes, target))
        except Exception as err:
            if not opts.fallback:
                raise
            return make_boxed_func(_fall_back(f"{name} (aten)", aten_gm, _reason(err)))

    return aot_autograd(fw_compiler=compile_aten, bw_compiler=compile_aten)(gm, example_inputs)


def optimize_fx_graph(aten_gm: Any, passes: list[Any], target: Any = None) -> Any:
    """Import an aten GraphModule, run `passes` on `target` (default: this host), write the
    decisions into `node.meta["compiler_opt"]` and re-order its nodes into the IR's final order.
    Returns the (same, recompiled) GraphModule."""
    from compiler_opt.integrations._target import resolve_target, run_passes
    from graph_ir.io.torch_import import import_fx_graph_module

    start = time.perf_counter()
    graph = import_fx_graph_module(aten_gm)
    result = run_passes(graph, passes, resolve_target(target))
    graph = result.graph
    graph.verify()
    fx_nodes = {n.name: n for n in aten_gm.graph.nodes}
    ir_nodes = list(graph)
    names = {n.name for n in ir_nodes}
    missing = sorted(names - set(fx_nodes))
    dropped = sorted(
        n.name for n in aten_gm.graph.nodes
        if n.op == "call_function" and n.name not in names and not _is_tuple_getitem(n)
    )
    if missing or dropped:
        raise ValueError(
            "the pipeline changed the graph's structure (added: "
            f"{', '.join(missing[:5]) or 'none'}; removed: {', '.join(dropped[:5]) or 'none'}); the fx executor "
            "applies decisions only: use passes that decide (placement, fuse, schedule) or executor='onnxruntime'"
        )
    groups = set()
    for node in ir_nodes:
        fx_node = fx_nodes[node.name]
        fx_node.meta["compiler_opt"] = {"device": node.device, "fusion_group": node.fusion_group, "priority": node.priority}
        if node.fusion_group is not None:
            groups.add(node.fusion_group)
    before = [n.name for n in aten_gm.graph.nodes]
    _reorder(aten_gm, [fx_nodes[n.name] for n in ir_nodes])
    after = [n.name for n in aten_gm.graph.nodes]
    _STATS.graphs += 1
    _STATS.nodes += len(ir_nodes)
    _STATS.fused_groups += len(groups)
    _STATS.reordered += int(before != after)
    _STATS.seconds += time.perf_counter() - start
    logger.debug("compiler_opt: %d aten nodes, %d fused groups, order changed: %s", len(ir_nodes), len(groups), before != after)
    return aten_gm


def _is_tuple_getitem(fx_node: Any) -> bool:
    import operator

    return fx_node.target is operator.getitem


def _reorder(gm: Any, ordered_ops: list[Any]) -> None:
    """Move the fx nodes into `ordered_ops`' order: placeholders and get_attrs first, each op
    followed by the getitems reading its tuple, the output last; lint, recompile."""
    graph = gm.graph
    nodes = list(graph.nodes)
    head = [n for n in nodes if n.op in ("placeholder", "get_attr")]
    output = [n for n in nodes if n.op == "output"]
    order: list[Any] = list(head)
    placed = set(order)

    def place(node: Any) -> None:
        if node in placed:
            return
        order.append(node)
        placed.add(node)
        for user in node.users:
            if _is_tuple_getitem(user):
                place(user)

    for node in ordered_ops:
        place(node)
    rest = [n for n in nodes if n not in placed and n.op != "output"]
    for node in rest:  # nodes the IR had no node for (none expected): keep them, in source order
        place(node)
    order.extend(output)
    position = {n: i for i, n in enumerate(order)}
    for node in order:
        for arg in node.all_input_nodes:
            if position[arg] >= position[node]:
                raise ValueError(f"the schedule puts {node.name} before its input {arg.name}")
    anchor = order[0]
    for node in order[1:]:
        anchor.append(node)  # moves the node right after the anchor
        anchor = node
    graph.lint()
    gm.recompile()


# ---- executor "onnxruntime": torch.onnx (dynamo) -> IR -> decisions -> onnxruntime ----------------


def _compile_onnxruntime(
    gm: Any, example_inputs: Sequence[Any], passes: list[Any], name: str, threads: int = 0, target: Any = None
) -> Callable[..., Any]:
    import numpy as np
    import onnxruntime as ort
    import torch

    from graph_ir.io.onnx_export import export_onnx
    from compiler_opt.integrations._target import resolve_target, run_passes
    from graph_ir.io.torch_import import torch_to_onnx_graph

    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
        raise ValueError("the onnxruntime executor runs inference only; gradients are needed here (use torch.no_grad() or executor='fx')")
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise ValueError("the onnxruntime executor needs tensor inputs only (dynamic shapes give symbolic sizes)")
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.onnx's own chatter; failures still raise
        graph = torch_to_onnx_graph(gm, tuple(t.detach() for t in example_inputs))
    result = run_passes(graph, passes, resolve_target(target))
    result.graph.verify()
    model = export_onnx(result.graph, fused_groups_as_functions=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads > 0:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    input_names = [i.name for i in session.get_inputs()]
    if len(input_names) != len(example_inputs):
        raise ValueError(f"the ONNX export has {len(input_names)} inputs, dynamo's graph {len(example_inputs)}")
    eager_out = gm(*example_inputs)
    as_tuple = isinstance(eager_out, (tuple, list))
    groups = {n.fusion_group for n in result.graph if n.fusion_group is not None}
    _STATS.graphs += 1
    _STATS.nodes += len(list(result.graph))
    _STATS.fused_groups += len(groups)
    _STATS.seconds += time.perf_counter() - start

    def run(*args: Any) -> Any:
        feeds = {n: np.asarray(a.detach().cpu().numpy()) for n, a in zip(input_names, args)}
        outs = [torch.from_numpy(o) for o in session.run(None, feeds)]
        return type(eager_out)(outs) if as_tuple else outs[0]

    return run


_registered = False


def register_torch_backend() -> None:
    """Register `compiler_opt` with `torch._dynamo` (for processes where the entry point is not
    installed); a second call does nothing."""
    global _registered
    if _registered:
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if _COMPILER_FNS.get(BACKEND_NAME) is not compiler_opt_backend:
        if BACKEND_NAME in _COMPILER_FNS:  # an entry point loaded another copy of this function
            return
        register_backend(compiler_fn=compiler_opt_backend, name=BACKEND_NAME)
    _registered = True
