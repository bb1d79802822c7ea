"""What a measurement was made on: CPU, cores, threads, library versions and compile flags.

Stored with every dataset (npz metadata) and part of the cache's machine key, since a runtime is
only meaningful on the machine, thread count and compiler that produced it.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from cost_model.profiling.signature import machine_fingerprint

__all__ = ["load_average", "machine_record", "machine_key"]


def machine_record(**flags: Any) -> dict[str, Any]:
    """Fingerprint + Python/platform + thread settings + the caller's flags (target, repeats...)."""
    record: dict[str, Any] = {
        "fingerprint": machine_fingerprint(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tvm_num_threads": os.environ.get("TVM_NUM_THREADS", ""),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
    }
    try:
        import tvm

        record["tvm"] = tvm.__version__
    except ImportError:
        pass
    record.update({k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in flags.items()})
    return record


def machine_key(target: str, threads: int) -> str:
    """The machine column of the cache for tile measurements."""
    return f"{machine_fingerprint()}|{target}|threads={threads}"


def load_average() -> float:
    """The 1-minute load average (NaN where the OS has none): stored beside measurements, since
    on a shared machine it says how disturbed they were."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return float("nan")
