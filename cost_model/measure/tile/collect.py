"""Collect the tile dataset: for every kernel, random configurations of its schedule space,
compiled for this CPU, checked against the unscheduled kernel, and timed by the `Harness`.

Time per call: the harness should use `per_call_timer` (a sample batches `number` calls of a
short kernel, until it lasts the protocol's `sample_s`). The timing protocol (`TimingProtocol`: sample
length, rounds, cache backend) is the default `TILE_PROTOCOL` unless told; labels of different
protocols live under different cache backends, so a resumed or re-measured dataset never mixes them. Resumable: the measurements live in the SQLite cache keyed by (kernel signature + config,
backend, machine), and the configurations of a kernel are drawn from a seed derived from the
collection seed and the kernel signature, so a rerun draws the same ones, finds them cached and
compiles nothing. A configuration TVM cannot compile, or whose output differs from the reference,
is logged and recorded in `failures` (it never enters the dataset).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from cost_model.measure.harness import Harness, KernelMeasurement, per_call_timer
from cost_model.measure.tile.kernels import KernelSpec, build_kernel
from cost_model.measure.tile.runner import check_against, compile_config, inputs_for, reference_output
from cost_model.measure.tile.space import TileConfig, TileSpace

__all__ = ["KernelResult", "LONG_PROTOCOL", "SHORT_PROTOCOL", "TILE_PROTOCOL", "TimingProtocol", "batch_to", "collect_kernel", "kernel_configs",
           "kernel_seed", "protocol_named", "protocol_of", "tile_harness"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimingProtocol:
    """How a tile configuration is timed: calls are batched until one sample lasts about `sample_s`,
    `repeats` interleaved rounds, labelled by `statistic` of the samples (`harness.label_of`), under the
    cache backend `backend`."""

    name: str
    sample_s: float
    repeats: int
    backend: str
    statistic: str = "min"
    remeasure_top: int = 3  # the apparent winners' extra rounds (`Harness.remeasure_top`)
    retest_fillers: bool = False  # `Harness.retest_fillers`


# Until the twenty-third session: >= 0.2 ms samples, 5 rounds, min. A 100-500 us kernel is then 1-2 calls
# per sample, each starting on the caches the previously timed configuration left.
SHORT_PROTOCOL = TimingProtocol("short", 2e-4, 5, "tvm-llvm")
# Samples of >= 2 ms (a steady state of many calls), 15 rounds, the second-fastest sample (a single sample
# far below the rest, seen on memory-bound reductions, does not decide); RESULTS (i), twenty-third session.
# No extra rounds for the apparent winners: those rounds of 3 configurations ran on warmer caches than the
# rounds of 50 (2% faster at the median, 81% of the time, 21% at p10) and gave the labelled best a bonus; the
# in-pass retest runs every configuration again for the same reason.
LONG_PROTOCOL = TimingProtocol("long", 2e-3, 15, "tvm-llvm/2ms", "second", remeasure_top=0, retest_fillers=True)
PROTOCOLS = {p.name: p for p in (SHORT_PROTOCOL, LONG_PROTOCOL)}
TILE_PROTOCOL = LONG_PROTOCOL


def protocol_named(name: str) -> TimingProtocol:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown tile timing protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def protocol_of(machine: dict) -> TimingProtocol:
    """The protocol a dataset was timed with, from its machine record (`timing_protocol`); a dataset
    collected before the record named one was timed with the short protocol."""
    return protocol_named(str(machine.get("timing_protocol", SHORT_PROTOCOL.name)))


def kernel_seed(seed: int, spec: KernelSpec) -> int:
    digest = hashlib.sha256(f"{seed}:{spec.signature}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def kernel_configs(space: TileSpace, seed: int, count: int) -> list[TileConfig]:
    """The `count` distinct random configurations of this kernel for this collection seed."""
    return space.sample_distinct(np.random.default_rng(kernel_seed(seed, space.kernel.spec)), count)


def tile_harness(cache: object = None, *, protocol: TimingProtocol | None = None, threads: int = 1, repeats: int | None = None,
                 backend_suffix: str = "", **kwargs: object) -> Harness:
    """A `Harness` for this host's tile kernels under `protocol` (default `TILE_PROTOCOL`): its backend
    (+ `backend_suffix`), its repeats unless `repeats` is given, its label statistic, winners' extra rounds
    and retest form, per-call timing, the machine key of the host's LLVM target and `threads`; `kwargs`
    go to the harness (warmup, retest_fraction, seed) and win over the protocol's."""
    from cost_model.measure.machine import machine_key
    from cost_model.measure.tile.runner import host_target_text

    protocol = protocol or TILE_PROTOCOL
    return Harness(cache=cache, backend=protocol.backend + backend_suffix, machine=machine_key(host_target_text(), threads),
                   timer=per_call_timer, repeats=protocol.repeats if repeats is None else repeats, statistic=protocol.statistic,
                   **({"remeasure_top": protocol.remeasure_top, "retest_fillers": protocol.retest_fillers} | kwargs))


def batch_to(run: Any, sample_s: float) -> Any:
    """`run` (a `CompiledConfig`) with `number` set so one timed sample lasts about `sample_s`
    (one call timed after a warm-up call)."""
    run.number = 1
    run()
    began = time.perf_counter()
    run()
    once = time.perf_counter() - began
    run.number = max(1, math.ceil(sample_s / max(once, 1e-7)))
    return run


@dataclass
class KernelResult:
    spec: KernelSpec
    space: TileSpace
    configs: list[TileConfig]
    measured: KernelMeasurement
    failures: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    asm: dict[str, str] = field(default_factory=dict)  # config text -> the probe's assembly of it (configurations compiled here)


def collect_kernel(
    spec: KernelSpec,
    harness: Harness,
    *,
    configs: int = 50,
    seed: int = 0,
    target: object = None,
    extra: Sequence[TileConfig] = (),
    progress: Callable[[int], None] | None = None,
    sample_s: float | None = None,
    probe: Any = None,
) -> KernelResult:
    """Measure `configs` random configurations (plus `extra` ones) of `spec`; cached ones are reused.
    A sample batches calls until it lasts `sample_s` (default: `TILE_PROTOCOL`'s); the harness's backend
    and repeats should be the same protocol's. `probe` (a `compile_probe.CompileProbe`): each configuration
    is first compiled there, and one that runs past its timeout is dropped as a failure instead of
    compiled here (an in-process compile cannot be abandoned); the probe compiles the next configuration
    while this process compiles the current one, and its assembly is kept (`KernelResult.asm`)."""
    sample_s = TILE_PROTOCOL.sample_s if sample_s is None else float(sample_s)
    kernel = build_kernel(spec)
    space = TileSpace(kernel)
    chosen = kernel_configs(space, seed, configs)
    known = {c.text() for c in chosen}
    chosen += [c for c in extra if c.text() not in known]
    missing = [c for c in chosen if harness.cached(spec.signature, c.text()) is None]
    runners = {}
    failures: dict[str, str] = {}
    asm: dict[str, str] = {}
    compile_seconds = 0.0
    if missing:
        arrays = inputs_for(kernel)
        reference = reference_output(space, arrays, target=target)
        try:
            if probe is not None:
                probe.submit(spec.kind, tuple(spec.dims), missing[0].text(), spec.dtype, spec.out_dtype)
            for i, config in enumerate(missing):
                try:
                    if probe is not None:
                        text = _probe_result(probe)
                        if i + 1 < len(missing):  # the child compiles the next one while this process compiles this one
                            probe.submit(spec.kind, tuple(spec.dims), missing[i + 1].text(), spec.dtype, spec.out_dtype)
                        if isinstance(text, Exception):
                            raise text
                        if not text:
                            raise TimeoutError(f"the compile ran past {probe.timeout:g} s and was abandoned")
                        asm[config.text()] = text
                    run = compile_config(space, config, target=target, arrays=[a.copy() for a in arrays])
                    check_against(run, reference)
                except Exception as error:  # TVM raises its own error types; any failure drops the config
                    failures[config.text()] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                    logger.warning("%s: config dropped: %s", spec.signature, failures[config.text()])
                    continue
                compile_seconds += run.compile_seconds
                runners[config.text()] = batch_to(run, sample_s)
                if progress is not None:
                    progress(0)
        except BaseException:
            if probe is not None:
                probe.close()  # a call left unanswered would hand its answer to the next kernel's first configuration
            raise
    # Cached configs come back from the cache inside measure(); a placeholder runner is never called.
    for config in chosen:
        if config.text() not in runners and config.text() not in failures:
            runners[config.text()] = _never
    measured = harness.measure(spec.signature, runners)
    kept = [c for c in chosen if c.text() in measured.measurements]
    return KernelResult(spec, space, kept, measured, failures, compile_seconds, {t: a for t, a in asm.items() if t in measured.measurements})


def _probe_result(probe: Any) -> str | Exception:
    """The probe's answer to the submitted configuration, or the error it raised (a configuration that
    does not compile), so the caller can submit the next one before raising it."""
    try:
        return probe.result()
    except (ValueError, RuntimeError) as error:
        return error


def _never() -> None:
    raise RuntimeError("a cached configuration was run")
