"""One convolution alone, compiled and timed through XLA on this CPU (twelfth session).

    timer = ConvTimer(cache=ProfileCache(path))
    seconds = timer.node_times(nodes)        # (N,): each conv node's time alone, 0 elsewhere

Why: XLA's CPU backend runs a grouped or depthwise convolution on a loop it picks by shape, and
its time is not monotonic in anything the graph states (RESULTS.md (i), eleventh session,
`benchmarks/bench_grouped_conv.py`: 2-12 ns per multiply-add depthwise, 0.04-0.07 dense; more
channels can be faster, a channel multiplier halves the time). No count or MAC term of the
additive fusion model follows that, so the model is given what the machine says instead: the
runtime of every conv of the graph run by itself (`fusion_terms.MEASURED_CONV_TERMS`).

A conv is described by a `ConvSpec` (operand shapes, dimension numbers, window strides, padding,
input / kernel dilation, feature and batch groups, dtype) read from the node: XLA HLO
`convolution` (its `convolution_dimension_numbers` and `window`), StableHLO `convolution`, and
ONNX `Conv` (NCHW / OIHW, `group`, `strides`, `pads` or `auto_pad`, `dilations`). The spec runs
as `jax.lax.conv_general_dilated` under `jax.jit` (the call JAX lowers a conv from, so an HLO
conv of a JAX program is the same instruction again; an ONNX conv is timed as XLA would run it,
what the additive model was trained on); its operands are seeded random arrays. Timing goes
through the measurement `Harness` (one interleaved pass over every conv not in the cache, >= 2
ms batched samples timed per call, min of `repeats` rounds; for a dataset, the median ratio to a
paired reference x the collection's scale, as the labels: `ConvTimer(reference=...)`), cached in
the `ProfileCache` under backend `CONV_BACKEND` keyed by the spec's text and the machine, so each
distinct conv is timed once per machine: a few milliseconds to compile and ~50 ms to time.

Convs no spec is read for (ONNX `ConvTranspose`, TF convs, shapes not static) are NaN in
`node_times`; the terms count them as 0 and log it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from cost_model.measure.harness import Harness, batched, per_call_timer

__all__ = ["CONV_BACKEND", "CONV_REPEATS", "ConvSpec", "ConvTimer", "conv_runner", "conv_spec"]

logger = logging.getLogger(__name__)

CONV_BACKEND = "xla-conv-alone/batched"  # cache rows: one conv per executable, batched samples per call
CONV_KERNEL = "conv-alone"  # the harness's kernel signature; the spec text is the configuration
CONV_REPEATS = 11  # interleaved rounds (min over them), as the fusion autotuner's protocol
MIN_SAMPLE_S = 2e-3  # a sample loops the conv for at least this long (`passes.autotune.fusion.MIN_SAMPLE_S`)


@dataclass(frozen=True)
class ConvSpec:
    """An XLA convolution in `jax.lax.conv_general_dilated`'s terms (all extents static).

    `dimension_numbers`: (lhs, rhs, out) specs as dimension indices: lhs (batch, feature,
    spatial...), rhs (output feature, input feature, spatial...), out (batch, feature, spatial...).
    """

    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    dimension_numbers: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    window_strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    feature_group_count: int = 1
    batch_group_count: int = 1
    dtype: str = "float32"

    def __post_init__(self) -> None:
        rank = len(self.lhs_shape)
        spatial = rank - 2
        if rank < 3 or len(self.rhs_shape) != rank:
            raise ValueError(f"conv operands must have the same rank >= 3, got {self.lhs_shape} and {self.rhs_shape}")
        if any(sorted(spec) != list(range(rank)) for spec in self.dimension_numbers) or len(self.dimension_numbers) != 3:
            raise ValueError(f"dimension_numbers must be three permutations of range({rank}), got {self.dimension_numbers}")
        for name in ("window_strides", "padding", "lhs_dilation", "rhs_dilation"):
            if len(getattr(self, name)) != spatial:
                raise ValueError(f"{name} needs {spatial} entries (one per spatial dimension), got {getattr(self, name)}")
        if min(self.window_strides + self.lhs_dilation + self.rhs_dilation, default=1) < 1 or min(self.lhs_shape + self.rhs_shape) < 1:
            raise ValueError(f"strides, dilations and extents must be >= 1: {self.text()}")
        if self.feature_group_count < 1 or self.batch_group_count < 1:
            raise ValueError(f"group counts must be >= 1, got {self.feature_group_count} / {self.batch_group_count}")

    def text(self) -> str:
        """The signature the cache keys it by (one line; equal specs give equal text)."""
        lhs, rhs, out = self.dimension_numbers
        pad = ",".join(f"{lo}:{hi}" for lo, hi in self.padding)
        return (f"conv {self.dtype} lhs={'x'.join(map(str, self.lhs_shape))} rhs={'x'.join(map(str, self.rhs_shape))} "
                f"dn={''.join(map(str, lhs))}/{''.join(map(str, rhs))}/{''.join(map(str, out))} stride={','.join(map(str, self.window_strides))} "
                f"pad={pad} lhs_dil={','.join(map(str, self.lhs_dilation))} rhs_dil={','.join(map(str, self.rhs_dilation))} "
                f"fgroups={self.feature_group_count} bgroups={self.batch_group_count}")

    def function(self) -> Any:
        """The conv as a function of (lhs, rhs) for `jax.jit`."""
        from jax import lax

        dn = lax.ConvDimensionNumbers(*self.dimension_numbers)

        def conv(lhs: Any, rhs: Any) -> Any:
            return lax.conv_general_dilated(lhs, rhs, self.window_strides, list(self.padding), lhs_dilation=self.lhs_dilation,
                                            rhs_dilation=self.rhs_dilation, dimension_numbers=dn, feature_group_count=self.feature_group_count,
                                            batch_group_count=self.batch_group_count)

        return conv

    def output_shape(self) -> tuple[int, ...]:
        """The output shape XLA infers for it (checks that the spec is a valid conv)."""
        import jax

        args = (jax.ShapeDtypeStruct(self.lhs_shape, np.dtype(self.dtype)), jax.ShapeDtypeStruct(self.rhs_shape, np.dtype(self.dtype)))
        return tuple(int(d) for d in jax.eval_shape(self.function(), *args).shape)


# -- specs from nodes ---------------------------------------------------------------------------
def _static(value: Any) -> tuple[tuple[int, ...], str] | None:
    vtype = getattr(value, "type", None)
    shape, dtype = getattr(vtype, "shape", None), getattr(vtype, "dtype", None)
    if shape is None or dtype is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape), np.dtype(dtype.numpy).name


def _hlo_spec(node: Any, lhs: tuple[int, ...], rhs: tuple[int, ...], dtype: str) -> ConvSpec | None:
    dn, window = node.attr("convolution_dimension_numbers"), node.attr("window")
    if dn is None:
        return None
    dims = list(getattr(window, "dimensions", ())) if window is not None else []
    if len(dims) != len(dn.input_spatial_dimensions):
        return None

    def field(name: str) -> tuple[int, ...]:  # proto fields left at 0 mean 1 (no stride / dilation)
        return tuple(int(getattr(d, name, 0)) or 1 for d in dims)

    return ConvSpec(lhs, rhs, ((dn.input_batch_dimension, dn.input_feature_dimension, *dn.input_spatial_dimensions),
                               (dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, *dn.kernel_spatial_dimensions),
                               (dn.output_batch_dimension, dn.output_feature_dimension, *dn.output_spatial_dimensions)),
                    field("stride"), tuple((int(d.padding_low), int(d.padding_high)) for d in dims), field("base_dilation"),
                    field("window_dilation"), int(node.attr("feature_group_count", 1) or 1), int(node.attr("batch_group_count", 1) or 1), dtype)


def _stablehlo_spec(node: Any, lhs: tuple[int, ...], rhs: tuple[int, ...], dtype: str) -> ConvSpec | None:
    from cost_model.conv_flops import _STABLEHLO_DNUMS, _labels, _text  # the one parser of the dimension labels

    match = _STABLEHLO_DNUMS.search(_text(node.attr("dimension_numbers")))
    if match is None:
        return None
    lhs_l, rhs_l, out_l = (_labels(match.group(i)) for i in (1, 2, 3))
    rank = len(lhs) - 2
    spatial = [str(i) for i in range(rank)]

    def ints(name: str) -> tuple[int, ...]:
        value = node.attr(name)
        return (1,) * rank if value is None else tuple(int(v) for v in value)

    padding = node.attr("padding")
    pads = ((0, 0),) * rank if padding is None else tuple(
        (int(lo), int(hi)) for lo, hi in np.asarray(padding.numpy() if hasattr(padding, "numpy") else padding).reshape(-1, 2))
    return ConvSpec(lhs, rhs, (tuple(lhs_l.index(t) for t in ["b", "f", *spatial]), tuple(rhs_l.index(t) for t in ["o", "i", *spatial]),
                               tuple(out_l.index(t) for t in ["b", "f", *spatial])),
                    ints("window_strides"), pads, ints("lhs_dilation"), ints("rhs_dilation"), int(node.attr("feature_group_count", 1) or 1),
                    int(node.attr("batch_group_count", 1) or 1), dtype)


def _text_attr(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _onnx_spec(node: Any, lhs: tuple[int, ...], rhs: tuple[int, ...], dtype: str) -> ConvSpec:
    """ONNX `Conv` (NCHW input, OIHW weight): its padding as explicit (low, high) pairs."""
    rank = len(lhs) - 2
    strides = tuple(int(v) for v in (node.attr("strides") or (1,) * rank))
    dilations = tuple(int(v) for v in (node.attr("dilations") or (1,) * rank))
    auto_pad = _text_attr(node.attr("auto_pad", "NOTSET")) or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(lhs[2:], rhs[2:], strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            low = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads.append((low, total - low))
        padding = tuple(pads)
    elif auto_pad == "VALID":
        padding = ((0, 0),) * rank
    else:
        flat = tuple(int(v) for v in (node.attr("pads") or (0,) * (2 * rank)))
        padding = tuple(zip(flat[:rank], flat[rank:]))
    order = tuple(range(rank + 2))
    return ConvSpec(lhs, rhs, (order, order, order), strides, padding, (1,) * rank, dilations, int(node.attr("group", 1) or 1), 1, dtype)


def conv_spec(node: Any) -> ConvSpec | None:
    """The `ConvSpec` of a convolution node (XLA HLO / StableHLO `convolution`, ONNX `Conv`);
    None for other nodes, other conv ops, or shapes that are not static."""
    kind = getattr(getattr(node, "kind", None), "value", "")
    if kind != "conv" or len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
        return None
    lhs, rhs = _static(node.inputs[0]), _static(node.inputs[1])
    if lhs is None or rhs is None:
        return None
    (lhs_shape, dtype), (rhs_shape, _) = lhs, rhs
    try:
        if node.domain == "hlo" and node.op_type == "convolution":
            return _hlo_spec(node, lhs_shape, rhs_shape, dtype)
        if node.domain == "stablehlo" and node.op_type == "stablehlo.convolution":
            return _stablehlo_spec(node, lhs_shape, rhs_shape, dtype)
        if node.domain in ("", "ai.onnx") and node.op_type == "Conv":
            return _onnx_spec(node, lhs_shape, rhs_shape, dtype)
    except (AttributeError, IndexError, TypeError, ValueError) as error:  # malformed attributes: not timed, said why
        logger.warning("conv %s: no timing spec (%s: %s)", getattr(node, "name", "?"), type(error).__name__, error)
    return None


# -- timing ---------------------------------------------------------------------------------------
def conv_runner(spec: ConvSpec, *, seed: int = 0, min_sample_s: float = MIN_SAMPLE_S) -> Any:
    """The spec compiled (`jax.jit`) on seeded random operands, as a `batched` runner whose sample
    lasts >= `min_sample_s` (warmed up by `batched`)."""
    import jax

    rng = np.random.default_rng(seed)
    dtype = np.dtype(spec.dtype)
    lhs, rhs = (jax.device_put(rng.uniform(-1.0, 1.0, size=shape).astype(dtype)) for shape in (spec.lhs_shape, spec.rhs_shape))
    jitted = jax.jit(spec.function())
    return batched(lambda: jitted(lhs, rhs).block_until_ready(), min_sample_s)


def _ensure_xla_timing() -> None:
    """XLA set up for timing (sync dispatch, one Eigen thread) when nothing created JAX's CPU
    client yet; otherwise left as the process has it (the fusion collector and `autotune` on HLO
    models set it up first)."""
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        from cost_model.measure.xla_timing import configure_xla_timing

        configure_xla_timing()


class ConvTimer:
    """Each distinct conv timed alone once per machine (see the module docstring). `cache`: a
    `ProfileCache` or None (nothing kept between processes); `runner`: builds a timed runner from a
    spec (tests pass a fake).

    `reference` (a timed runner, named `reference_name`; the fusion collector's `reference_runner`):
    every sample is divided by a reference sample taken right after it and the conv's value is the
    median ratio x `scale_s` (the collection's seconds per reference ratio), as the fusion labels
    are made (RESULTS (i), eighth session). Two raw passes on this machine minutes apart differed
    by a uniform 35% (twelfth session): raw seconds would put a level of the machine's state into
    the term, the ratio puts the conv on the labels' scale. The cache keeps the ratios (backend
    `CONV_BACKEND/ref=<name>`), never mixed with raw seconds."""

    def __init__(self, cache: Any = None, *, repeats: int = CONV_REPEATS, min_sample_s: float = MIN_SAMPLE_S, seed: int = 0,
                 timer: Any = per_call_timer, runner: Any = None, reference: Any = None, reference_name: str = "", scale_s: float = 1.0) -> None:
        from cost_model.profiling.signature import machine_fingerprint

        if reference is not None and not reference_name:
            raise ValueError("a reference runner needs its name (reference_name): the cache keys the ratios by it")
        if not scale_s > 0:
            raise ValueError(f"scale_s must be > 0, got {scale_s}")
        self.harness = Harness(cache=cache, backend=CONV_BACKEND if reference is None else f"{CONV_BACKEND}/ref={reference_name}",
                               machine=machine_fingerprint(), timer=timer, repeats=repeats, warmup=1, remeasure_top=0, retest_fraction=0.0, seed=seed,
                               reference=reference, reference_s=None if reference is None else 1.0, statistic="min" if reference is None else "median")
        self.min_sample_s, self.seed, self.scale_s = min_sample_s, seed, float(scale_s)
        self.runner = runner
        self.known: dict[str, float] = {}  # spec text -> seconds, this process
        self.measured = 0  # specs timed (not from the cache) by this timer

    def time(self, specs: Iterable[ConvSpec]) -> dict[str, float]:
        """Seconds of each distinct spec alone (by `text()`): cached ones read, the rest timed in
        one interleaved harness pass; NaN for a spec XLA would not compile (logged)."""
        distinct = {spec.text(): spec for spec in specs}
        todo = {text: spec for text, spec in distinct.items() if text not in self.known}
        if todo:
            runners = {}
            for text, spec in todo.items():  # compile the uncached ones first, then time them together
                if self.harness.cached(CONV_KERNEL, text) is not None:
                    runners[text] = None
                    continue
                try:
                    if self.runner is None:
                        _ensure_xla_timing()
                        runners[text] = conv_runner(spec, seed=self.seed, min_sample_s=self.min_sample_s)
                    else:
                        runners[text] = self.runner(spec)
                except Exception as error:  # XLA / JAX refuse the spec: this conv is not timed (NaN), the rest are
                    logger.warning("conv not timed alone (%s: %s): %s", type(error).__name__, error, text)
                    self.known[text] = float("nan")
            runners = {text: runner for text, runner in runners.items() if text not in self.known}
            todo = {text: spec for text, spec in todo.items() if text in runners}
            measured = self.harness.measure(CONV_KERNEL, runners)
            self.measured += measured.measured
            self.known |= {text: float(self.harness.value(measured.measurements[text])) * self.scale_s for text in todo}
        return {text: self.known[text] for text in distinct}

    def node_times(self, nodes: Sequence[Any]) -> np.ndarray:
        """(N,) seconds: each conv node's time alone, 0 for every other node, NaN for a conv node
        without a spec (logged)."""
        specs = [conv_spec(node) if getattr(getattr(node, "kind", None), "value", "") in ("conv", "conv_transpose") else None for node in nodes]
        seconds = self.time(s for s in specs if s is not None)
        out = np.zeros(len(nodes), dtype=np.float64)
        untimed: list[str] = []
        for i, (node, spec) in enumerate(zip(nodes, specs)):
            if spec is not None:
                out[i] = seconds[spec.text()]  # NaN when XLA refused it (logged by `time`)
            elif getattr(getattr(node, "kind", None), "value", "") in ("conv", "conv_transpose"):
                out[i] = np.nan
                untimed.append(f"{getattr(node, 'name', '?')} ({getattr(node, 'op_type', '?')})")
        if untimed:  # one line for the graph, not one per node
            logger.warning("%d conv node(s) not timed alone (no spec for the op or its shapes), their measured term counts 0: %s%s",
                           len(untimed), ", ".join(untimed[:5]), ", ..." if len(untimed) > 5 else "")
        return out
