"""How much memory this host can still give: what the numerical check and the fusion tuner ask
before they fill random inputs for a model (a 2B-parameter HLO module holds 10 GiB of
parameters; filling them twice got the process killed by the kernel after minutes of work)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["RESERVE", "available_memory_bytes", "memory_shortfall", "values_nbytes"]

# Share of MemAvailable a job may plan to use: the estimates leave out float64 draws before the
# cast and the backends' own buffers (gemma4-2b, floor 20.8 GiB, was killed with 22 GiB free).
RESERVE = 0.75


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping); None elsewhere."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def values_nbytes(values: Iterable[Any]) -> int:
    """Bytes of the values whose type knows its size (tensors with static shapes)."""
    return sum(v.type.nbytes() or 0 for v in values if getattr(v.type, "nbytes", None) is not None)


def memory_shortfall(need: int) -> int | None:
    """The bytes available when `need` exceeds the share of them a job may plan on (`RESERVE`);
    None when it fits, or when this host does not say."""
    free = available_memory_bytes()
    return free if free is not None and need > RESERVE * free else None
