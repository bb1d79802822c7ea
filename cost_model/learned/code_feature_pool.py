"""Compiled-code features of many candidates at once, several compiles at a time.

A tile ranker fitted with code features compiles every candidate it ranks (0.2-0.5 s each with
LLVM), which is most of what tuning a kernel costs; the compiles are independent. Twenty-fifth
session: they ran on threads in this process (TVM's FFI releases the GIL). Twenty-sixth session:
each runs in a kept `CompileProbe` child process instead, driven by one thread per worker, because
LLVM can take minutes over one configuration and an in-process compile cannot be abandoned; a
candidate past `COMPILE_TIMEOUT_S` gets a NaN row. The numbers are the same as
`config_code_features` one by one: the same compile for the same target.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Sequence

import numpy as np

__all__ = ["COMPILE_TIMEOUT_S", "WORKERS_ENV", "compile_workers", "probed_code_features"]

WORKERS_ENV = "COMPILER_OPT_COMPILE_WORKERS"
# a candidate whose compile runs past this many seconds gets NaN features (XGBoost's missing value) and is ranked
# last; LLVM ran past ten minutes on one unroll-512 reduction configuration in the twenty-sixth session
COMPILE_TIMEOUT_S = 60.0


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


_PROBES: list[Any] = []  # idle `CompileProbe` children, kept for the next kernel (each one imports TVM once)
_PROBES_LOCK = threading.Lock()


def _take_probe(timeout: float) -> Any:
    from cost_model.measure.tile.compile_probe import CompileProbe

    with _PROBES_LOCK:
        for k, probe in enumerate(_PROBES):
            if probe.timeout == timeout:
                return _PROBES.pop(k)
    return CompileProbe(timeout)


def _give_back(probe: Any) -> None:
    with _PROBES_LOCK:
        _PROBES.append(probe)


def _close_probes() -> None:
    with _PROBES_LOCK:
        for probe in _PROBES:
            probe.close()
        _PROBES.clear()


def probed_code_features(space: Any, configs: Sequence[Any], feature_set: str, workers: int, *, timeout: float = COMPILE_TIMEOUT_S) -> np.ndarray:
    """(C, width) code features of `configs` of `space`'s kernel, each compiled for this host in a child
    process (`CompileProbe`, `workers` of them at once, kept between calls): a compile past `timeout`
    seconds is abandoned and its row is NaN, so a candidate LLVM cannot finish never stalls the ranking.
    The same numbers as `config_code_features` (the same compile for the same target)."""
    from concurrent.futures import ThreadPoolExecutor

    from cost_model.learned.tile_code_features import code_features, code_feature_set_width

    spec = space.kernel.spec
    width = code_feature_set_width(feature_set)

    def features(config: Any) -> np.ndarray:
        probe = _take_probe(timeout)
        try:
            asm = probe.asm(spec.kind, tuple(spec.dims), config.text(), spec.dtype, spec.out_dtype)
        finally:
            _give_back(probe)
        return code_features(asm, feature_set) if asm else np.full(width, np.nan, dtype=np.float32)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="code-features") as pool:
        return np.stack(list(pool.map(features, configs)))


atexit.register(_close_probes)
