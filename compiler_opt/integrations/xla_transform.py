"""compiler-opt as a pass inside XLA's own compiler, for JAX:
`jax.extend.xla.register_hlo_module_transformation` (jax/jaxlib >= 0.10.2).

    with compiler_opt.integrations.xla_hook(pipeline="fuse,schedule", target="host"):
        y = jax.jit(f)(x)          # compiled with our fusion and schedule

XLA calls the hook with the serialized `HloModuleProto` of every module it compiles:
- PRE_SCHEDULER (after XLA's own fusion passes): the module is imported (`import_hlo_module`),
  XLA's fusions are dissolved (each fusion instruction replaced by its body's instructions), the
  pipeline runs, and the fused groups it chose are written back as XLA fusions
  (`export_hlo_proto(materialize_fusions=True)`, kLoop fusions as XLA:CPU accepts them). XLA then
  schedules and compiles OUR fusions.
- POST_SCHEDULER (XLA has scheduled the module): the pipeline's non-fusion passes run (fusion is
  fixed by now) and the priorities they write become the module's instruction sequences
  (`export_hlo_proto(schedule=True)`), which XLA's buffer assignment and code emission follow.
The hook returns None (XLA keeps its module) when the pipeline changed nothing.

Errors: anything that fails inside the hook (import, pipeline, export, a module our IR cannot
represent) is caught: XLA's module is left untouched (the hook returns None), the compile goes
on, and ONE warning (`XlaHookWarning`) per context says what failed, in which module and at which
stage (`strict=True` re-raises instead, which makes XLA fail the compile). Every failure is also
kept in `hook.errors`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from graph_ir.errors import CompilerOptError

__all__ = ["XlaHook", "XlaHookError", "XlaHookWarning", "xla_hook", "dissolve_fusions", "require_hlo_transform_api"]

logger = logging.getLogger(__name__)

HOOK_NAME = "compiler_opt"
_FUSION_PASSES = frozenset({"fuse", "fuse-by-priority"})
_STAGES = ("pre", "post")


class XlaHookError(CompilerOptError):
    """The installed jax cannot host the hook, or the hook was set up wrongly."""


class XlaHookWarning(UserWarning):
    """The hook failed on a module; XLA compiled its own module instead."""


def require_hlo_transform_api() -> Any:
    """`jax.extend.xla` with the HLO-module transformation API, or XlaHookError saying what is
    missing."""
    try:
        import jax
    except ImportError as err:
        raise XlaHookError("the XLA hook needs jax: pip install 'compiler-opt[jax]'") from err
    try:
        from jax.extend import xla as jax_xla
    except ImportError:
        jax_xla = None
    missing = [
        name for name in ("register_hlo_module_transformation", "clear_hlo_module_transformation", "PipelineStage")
        if jax_xla is None or not hasattr(jax_xla, name)
    ]
    if missing:
        raise XlaHookError(
            f"jax {jax.__version__} has no jax.extend.xla.{', '.join(missing)} (added in jax/jaxlib 0.10.2); "
            "upgrade jax and jaxlib to >= 0.10.2"
        )
    from jax._src.lib import _xla

    if _xla is None:  # jax's own guard: the jaxlib extension lacks the transform registry
        raise XlaHookError("the installed jaxlib has no XLA transform registry (needs jaxlib >= 0.10.2)")
    return jax_xla


@dataclass
class HookStats:
    modules: int = 0
    changed: int = 0
    seconds: float = 0.0


@dataclass
class XlaHook:
    """One installed hook (what `xla_hook` yields): its passes, counters and failures."""

    passes: list[Any]
    stages: tuple[str, ...]
    target: Any = None  # cost_model.costs.Target (None: this host)
    strict: bool = False
    name: str = HOOK_NAME
    stats: dict[str, HookStats] = field(default_factory=lambda: {s: HookStats() for s in _STAGES})
    errors: list[str] = field(default_factory=list)
    # The last module XLA handed in and the one handed back, per stage (serialized protos), so a
    # caller can see what changed; None where nothing was handed back.
    last_input: dict[str, bytes] = field(default_factory=dict)
    last_output: dict[str, bytes | None] = field(default_factory=dict)
    _warned: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def transform(self, stage: str, serialized: bytes) -> bytes | None:
        """The callback XLA calls (possibly from several compile threads at once)."""
        start = time.perf_counter()
        out: bytes | None = None
        try:
            out = _transform(serialized, stage, self.passes, self.target)
        except Exception as err:
            message = (
                f"compiler_opt XLA hook ({stage}-scheduler) left module {_module_name(serialized)} to XLA: "
                f"{type(err).__name__}: {_first_line(err)}"
            )
            logger.debug("XLA hook failure", exc_info=True)
            with self._lock:
                self.errors.append(message)
                first, self._warned = not self._warned, True
            if self.strict:
                raise
            if first:
                warnings.warn(message, XlaHookWarning, stacklevel=2)
        finally:
            with self._lock:
                stats = self.stats[stage]
                stats.modules += 1
                stats.changed += out is not None
                stats.seconds += time.perf_counter() - start
                self.last_input[stage], self.last_output[stage] = serialized, out
        return out


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""


def _module_name(serialized: bytes) -> str:
    try:
        from graph_ir.io.xla_bridge import hlo_module_proto_class

        return repr(hlo_module_proto_class().FromString(serialized).name)
    except Exception:
        return "(unreadable)"


def _transform(serialized: bytes, stage: str, passes: list[Any], target: Any = None) -> bytes | None:
    from compiler_opt.integrations._target import resolve_target, run_passes
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.hlo_import import import_hlo_module
    from graph_ir.io.xla_bridge import hlo_module_proto_class

    proto = hlo_module_proto_class().FromString(serialized)
    # XLA verifies its own modules; our StableHLO round trip would only repeat that, slowly.
    graph = import_hlo_module(proto, verify_shapes=False)
    configs: dict[str, bytes] = {}
    if stage == "pre":
        dissolved = dissolve_fusions(graph, configs)
        run = passes
    else:
        dissolved = 0
        run = [p for p in passes if p.name not in _FUSION_PASSES]
    if not run:
        return None
    result = run_passes(graph, run, resolve_target(target))
    graph = result.graph
    graph.verify()
    if stage == "pre":
        if not result.modified and not dissolved:
            return None
        out = export_hlo_proto(graph, materialize_fusions=True, schedule=False)
        _inherit_backend_configs(out, configs)
    else:
        if not any(n.priority is not None for n in graph):
            return None
        out = export_hlo_proto(graph, materialize_fusions=False, schedule=True)
    return out.SerializeToString()


# Opcodes that XLA:CPU also emits outside a fusion. A fusion holding anything else (scatter, for
# one, which XLA:CPU's thunk emitter accepts only fused; gather, sort, dynamic slices...) is kept
# as XLA made it: our passes group around it.
_DISSOLVABLE = frozenset(
    """abs cbrt ceil clz cos erf exponential exponential-minus-one floor imag is-finite log log-plus-one
    logistic negate not popcnt real round-nearest-afz round-nearest-even rsqrt sign sin sqrt tan tanh
    add and atan2 compare divide maximum minimum multiply or power remainder shift-left
    shift-right-arithmetic shift-right-logical subtract xor select clamp convert reduce reshape bitcast
    transpose broadcast concatenate slice pad constant iota dot convolution reverse copy parameter
    tuple get-tuple-element""".split()
)

# Only XLA's own loop/input fusions are regrouped. kCustom fusions are library calls (XLA:CPU
# wraps each dot in a YNNPACK `__ynn_fusion`; dissolved, the dot would be emitted as a plain loop
# nest, many times slower) and kOutput ones are library kernels with an epilogue: kept.
_LOOP_KINDS = frozenset({"kLoop", "kInput"})


def dissolve_fusions(graph: Any, configs: dict[str, bytes] | None = None) -> int:
    """Replace each XLA loop fusion (outside fusion bodies) whose body holds only
    `_DISSOLVABLE` opcodes by the instructions of its fused computation, so our fusion pass
    starts from unfused HLO. Returns how many were dissolved. `configs` receives, per name of a
    dissolved fusion's root instruction, the fusion's backend_config (see
    `_inherit_backend_configs`)."""
    from graph_ir.io.apply_decisions import _inline_call, _owners

    count = 0
    levels = [graph, *(g for g in graph.subgraphs() if g.parent is None or g.parent.op_type != "fusion")]
    for level in levels:
        fusions = [
            n for n in level
            if n.op_type == "fusion" and "calls" in n.attrs and n.attr("fusion_kind", "") in _LOOP_KINDS
            and all(m.op_type in _DISSOLVABLE for m in n.attrs["calls"].graphs()[0].all_nodes())
        ]
        if not fusions:
            continue
        owners = _owners(level)
        for fusion in fusions:
            body = fusion.attrs["calls"].graphs()[0]
            config = fusion.attr("backend_config", "")
            if configs is not None and config and body.outputs and body.outputs[0].producer is not None:
                configs[body.outputs[0].producer.name] = config.encode() if isinstance(config, str) else config
            owners = [o for o in owners if o is not fusion]
            _inline_call(level, fusion, body, owners)
            count += 1
    return count


def _inherit_backend_configs(module: Any, configs: dict[str, bytes]) -> int:
    """Give each fusion we wrote the backend_config of the XLA fusion whose root it shares.

    XLA:CPU's parallel task assigner, which ran before the hook, wrote into each loop fusion's
    backend_config how many parts to split its output into (`outer_dimension_partitions`); our
    new fusions would otherwise run on one thread. The split is over the output's outer
    dimensions, so it stays valid for a fusion producing the same instruction's value (same
    shape); fusions with another root get none (one thread), as XLA gives small fusions."""
    copied = 0
    if not configs:
        return 0
    by_id = {c.id: c for c in module.computations}
    for computation in module.computations:
        for inst in computation.instructions:
            if inst.opcode != "fusion" or inst.backend_config or not inst.called_computation_ids:
                continue
            body = by_id.get(inst.called_computation_ids[0])
            if body is None:
                continue
            root = next((i for i in body.instructions if i.id == body.root_id), None)
            config = configs.get(root.name) if root is not None else None
            if config:
                inst.backend_config = config
                copied += 1
    return copied


@contextlib.contextmanager
def xla_hook(
    pipeline: str | None = None,
    *,
    target: str | None = "host",
    stages: str | Sequence[str] = _STAGES,
    platforms: str | Sequence[str] = "cpu",
    strict: bool = False,
    name: str = HOOK_NAME,
) -> Iterator[XlaHook]:
    """Install compiler-opt as an XLA HLO-module transformation while the block runs (module
    docstring); cleared on exit, also when the block raises. `pipeline` defaults to
    `fuse,schedule{strategy=critical-path}`; `target` ("host", a device spec or a `Target`) is the
    pipeline's target, handed to every pass.
    Only modules compiled inside the block are affected: jax caches compiled functions, so a
    function jitted before the block keeps its executable (`jax.clear_caches()` forces a new
    compile)."""
    from compiler_opt.integrations._target import build_pipeline, resolve_target

    jax_xla = require_hlo_transform_api()
    # A truthy string such as strict="no" must not turn the hook strict (or a non-string pipeline reach the parser).
    if not isinstance(strict, bool):
        raise XlaHookError(f"strict must be True or False, got {strict!r}")
    if pipeline is not None and not isinstance(pipeline, str):
        raise XlaHookError(f"pipeline must be a pipeline string such as 'fuse,schedule', got {type(pipeline).__name__}")
    if not isinstance(name, str) or not name:
        raise XlaHookError(f"name must be a non-empty string, got {name!r}")
    if isinstance(stages, str):  # stages="pre" means the one stage, not the letters p, r, e
        stages = (stages,)
    unknown = [s for s in stages if s not in _STAGES]
    if unknown or not stages:
        raise XlaHookError(f"stages must be a non-empty subset of {_STAGES}, got {tuple(stages)}")
    resolved = resolve_target(target)
    passes = build_pipeline(pipeline if pipeline is not None else "fuse,schedule{strategy=critical-path}", resolved)
    hook = XlaHook(passes=passes, stages=tuple(stages), target=resolved, strict=strict, name=name)
    enum = jax_xla.PipelineStage
    registered: list[Any] = []
    try:
        if "pre" in stages:
            jax_xla.register_hlo_module_transformation(
                lambda b: hook.transform("pre", b), name=f"{name}.pre", stage=enum.PRE_SCHEDULER, platforms=platforms
            )
            registered.append((f"{name}.pre", enum.PRE_SCHEDULER))
        if "post" in stages:
            jax_xla.register_hlo_module_transformation(
                lambda b: hook.transform("post", b), name=f"{name}.post", stage=enum.POST_SCHEDULER, platforms=platforms
            )
            registered.append((f"{name}.post", enum.POST_SCHEDULER))
        yield hook
    finally:
        for hook_name, stage in registered:
            jax_xla.clear_hlo_module_transformation(hook_name, stage, platforms)
