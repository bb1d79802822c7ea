"""Scheduling passes: decide `node.priority` (higher runs first among a device's ready kernels).

    run_pipeline(graph, "schedule{strategy=memory,reorder=true}")
"""

from __future__ import annotations

from passes.scheduling.schedule import Schedule
from passes.scheduling.strategies import (
    STRATEGIES,
    bottom_levels,
    memory_order,
    schedule_priorities,
    sequential_peak_bytes,
)

__all__ = ["STRATEGIES", "Schedule", "bottom_levels", "memory_order", "schedule_priorities", "sequential_peak_bytes"]
