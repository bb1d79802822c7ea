"""Fusion passes: decide `node.fusion_group` (nodes sharing a group and a device form one kernel).

    run_pipeline(graph, "fuse{max-nodes=16}")            # XLA-like greedy fusion
    fuse_by_priority(graph, priorities)                   # the learned policy's interface

`rules.py` says which op kinds may fuse, `groups.py` which merges are legal (device, size,
acyclicity); `fuse.py` and `by_priority.py` decide the order of merges.
"""

from __future__ import annotations

from passes.fusion.by_priority import PRIORITY_META_KEY, FuseByPriority, fuse_by_priority
from passes.fusion.fuse import Fuse, duplicate_cheap_producers, greedy_fuse
from passes.fusion.groups import FusionGroups
from passes.fusion.rules import can_fuse_into, fusible, is_epilogue

__all__ = [
    "PRIORITY_META_KEY",
    "Fuse",
    "FuseByPriority",
    "FusionGroups",
    "can_fuse_into",
    "duplicate_cheap_producers",
    "fuse_by_priority",
    "fusible",
    "greedy_fuse",
    "is_epilogue",
]
