"""Collect the tile dataset: for every kernel, random configurations of its schedule space,
compiled for this CPU, checked against the unscheduled kernel, and timed by the `Harness`.

Time per call: the harness should use `per_call_timer` (a sample batches `number` calls of a
short kernel). Resumable: the measurements live in the SQLite cache keyed by (kernel signature + config,
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
from typing import Callable, Sequence

import numpy as np

from cost_model.measure.harness import Harness, KernelMeasurement
from cost_model.measure.tile.kernels import KernelSpec, build_kernel
from cost_model.measure.tile.runner import check_against, compile_config, inputs_for, reference_output
from cost_model.measure.tile.space import TileConfig, TileSpace

__all__ = ["KernelResult", "collect_kernel", "kernel_configs", "kernel_seed"]

logger = logging.getLogger(__name__)

MIN_SAMPLE_S = 2e-4  # calls per sample are batched until one sample takes about this long


def kernel_seed(seed: int, spec: KernelSpec) -> int:
    digest = hashlib.sha256(f"{seed}:{spec.signature}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def kernel_configs(space: TileSpace, seed: int, count: int) -> list[TileConfig]:
    """The `count` distinct random configurations of this kernel for this collection seed."""
    return space.sample_distinct(np.random.default_rng(kernel_seed(seed, space.kernel.spec)), count)


@dataclass
class KernelResult:
    spec: KernelSpec
    space: TileSpace
    configs: list[TileConfig]
    measured: KernelMeasurement
    failures: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0


def collect_kernel(
    spec: KernelSpec,
    harness: Harness,
    *,
    configs: int = 50,
    seed: int = 0,
    target: object = None,
    extra: Sequence[TileConfig] = (),
    progress: Callable[[int], None] | None = None,
) -> KernelResult:
    """Measure `configs` random configurations (plus `extra` ones) of `spec`; cached ones are reused."""
    kernel = build_kernel(spec)
    space = TileSpace(kernel)
    chosen = kernel_configs(space, seed, configs)
    known = {c.text() for c in chosen}
    chosen += [c for c in extra if c.text() not in known]
    missing = [c for c in chosen if harness.cached(spec.signature, c.text()) is None]
    runners = {}
    failures: dict[str, str] = {}
    compile_seconds = 0.0
    if missing:
        arrays = inputs_for(kernel)
        reference = reference_output(space, arrays, target=target)
        for config in missing:
            try:
                run = compile_config(space, config, target=target, arrays=[a.copy() for a in arrays])
                check_against(run, reference)
            except Exception as error:  # TVM raises its own error types; any failure drops the config
                failures[config.text()] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                logger.warning("%s: config dropped: %s", spec.signature, failures[config.text()])
                continue
            compile_seconds += run.compile_seconds
            began = time.perf_counter()
            run()
            once = time.perf_counter() - began
            run.number = max(1, math.ceil(MIN_SAMPLE_S / max(once, 1e-7)))
            runners[config.text()] = run
            if progress is not None:
                progress(0)
    # Cached configs come back from the cache inside measure(); a placeholder runner is never called.
    for config in chosen:
        if config.text() not in runners and config.text() not in failures:
            runners[config.text()] = _never
    measured = harness.measure(spec.signature, runners)
    return KernelResult(spec, space, [c for c in chosen if c.text() in measured.measurements], measured, failures, compile_seconds)


def _never() -> None:
    raise RuntimeError("a cached configuration was run")
