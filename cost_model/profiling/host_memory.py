"""How much memory this host can still give: what the numerical check and the fusion tuner ask
before they fill random inputs for a model (a 2B-parameter HLO module holds 10 GiB of
parameters; filling them twice got the process killed by the kernel after minutes of work)."""

from __future__ import annotations

__all__ = ["RESERVE", "available_memory_bytes"]

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
