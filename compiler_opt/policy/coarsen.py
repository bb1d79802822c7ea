"""Coarsened decoding: the policy's split read at fewer stages.

A policy that learned *that* large graphs are split before it learned to split them well
(RESULTS.md h12 (c), h13) answers 4- and 8-way splits 1.1-2.8x slower than one device. Its
answer still carries a stage order: the devices it uses, ordered by where their nodes sit in the
topological order. Merging neighbouring stages of that order (u stages -> u/2, u/4, ..., 1, each
group on the device of its first stage) keeps the answer's own cut points, drops the others, and
ends at one device, so the zero-shot answer is never slower than the policy's placement
collapsed onto one of its devices. A node whose merged device it may not use (memory) keeps its
own device.

Like smoothing (policy/smoothing.py) this is decoding: every candidate is a function of the
policy's answer and the graph alone; the zero-shot simulates each, as it does its samples.
"""

from __future__ import annotations

import numpy as np

__all__ = ["coarsened_placements"]


def coarsened_placements(device: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """`device` (N,) int, rows in topological order; `mask` (N, D) bool (allowed devices). The
    distinct coarsenings for u/2, u/4, ..., 1 stages (u: the devices `device` uses), each (N,)
    int64, none equal to `device`."""
    device = np.asarray(device, dtype=np.int64)
    mask = np.asarray(mask, dtype=bool)
    used = np.unique(device)
    if used.size < 2:
        return []
    # Each used device's mean row: where its nodes sit in the topological order.
    centre = np.bincount(device, weights=np.arange(device.size, dtype=np.float64))[used] / np.bincount(device)[used]
    order = used[np.argsort(centre, kind="stable")]  # stages in the answer's topological order
    stage_of = np.empty(int(device.max()) + 1, dtype=np.int64)
    stage_of[order] = np.arange(order.size)
    stage = stage_of[device]
    out: list[np.ndarray] = []
    seen = {device.tobytes()}
    count = order.size
    stages = count // 2
    while stages >= 1:
        # Stage s joins group s * stages // count; a group runs on the device of its first stage.
        first = order[-(-np.arange(stages) * count // stages)]
        merged = first[stage * stages // count]
        merged = np.where(mask[np.arange(device.size), merged], merged, device)
        if merged.tobytes() not in seen:
            seen.add(merged.tobytes())
            out.append(merged)
        stages //= 2
    return out
