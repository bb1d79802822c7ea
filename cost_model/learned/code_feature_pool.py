"""Compiled-code features of many candidates at once, on several threads.

A tile ranker fitted with code features compiles every candidate it ranks (0.2-0.5 s each with
LLVM), which is most of what tuning a kernel costs; the compiles are independent, and TVM's FFI
releases the GIL while its C++ lowering and LLVM code generation run, so threads spread them over
the cores this process may use without the start-up cost and main-module rules of worker processes.
Each thread builds its own TileSpace of the kernel (schedules are not shared across threads). The
numbers are the same as `config_code_features` one by one: the same compile for the same target.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

import numpy as np

__all__ = ["WORKERS_ENV", "compile_workers", "pooled_code_features"]

WORKERS_ENV = "COMPILER_OPT_COMPILE_WORKERS"


def compile_workers() -> int:
    """How many threads compile candidates: $COMPILER_OPT_COMPILE_WORKERS, else the CPUs this
    process may run on (its affinity, so a run pinned to one core stays on it)."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            workers = int(value)
        except ValueError:
            raise ValueError(f"{WORKERS_ENV} must be a whole number of threads, got {value!r}") from None
        if workers < 1:
            raise ValueError(f"{WORKERS_ENV} must be >= 1, got {workers}")
        return workers
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pooled_code_features(space: Any, configs: Sequence[Any], feature_set: str, workers: int, *, target: Any = None) -> np.ndarray:
    """(C, width) code features of `configs` of `space`'s kernel, compiled on `workers` threads."""
    from concurrent.futures import ThreadPoolExecutor

    from cost_model.learned.tile_code_features import config_code_features
    from cost_model.measure.tile.kernels import build_kernel
    from cost_model.measure.tile.space import TileSpace

    local = threading.local()
    spec = space.kernel.spec

    def features(config: Any) -> np.ndarray:
        if not hasattr(local, "space"):
            local.space = TileSpace(build_kernel(spec))  # this thread's own
        return config_code_features(local.space, config, target=target, feature_set=feature_set)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="code-features") as pool:
        return np.stack(list(pool.map(features, configs)))
