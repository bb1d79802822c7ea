"""Kernels of a fusion group that spans devices: one per device, cut until each is convex.

A kernel is "the nodes sharing a fusion group id on one device". A placement method that does
not know about fusion may put a group's members on several devices; the group then becomes one
kernel per device. Those per-device shares need not be convex even when the group was: in
`c0(gpu3) -> e(gpu1) -> x(gpu3)`, with all three in one group, the gpu3 share `{c0, x}` has a
path that leaves it (through `e` on gpu1) and comes back, so it cannot run as one unit: the
simulator would deadlock and an exporter could not outline it.

`spanning_group_pieces` cuts each such share into pieces so that no path leaves a piece and
re-enters it: walking the nodes in topological order, a member's piece is its producer's when
that producer is in the same share, and one more than the highest piece of the group that
reaches it through anything else (another device's member, or a node outside the group). So
every edge between two kernels of one group goes to a higher piece: each piece is convex and
the group's kernels cannot wait on each other in a cycle. (Counting only the member's own
share, as a finer rule would, is not enough: `a(gpu0) -> d(gpu1)` and `c(gpu1) -> e(gpu0)` make
{a, e} and {c, d} a cycle of two kernels though no path leaves either and comes back.) With the
groups themselves acyclic, as the fusion passes build them, no cycle through other groups can
appear either. The cut is conservative: a member with no producer in the group stays in piece
0 even where a later piece would have kept it with its consumers. Group ids are unchanged. Groups on one
device are left alone (a non-convex one is the caller's error to report).

The walk only visits nodes between a group's first and last member in the topological order
(nothing outside that interval lies on a path between two members), so it is cheap for the
local groups that fusion passes build.
"""

from __future__ import annotations

import logging

import numpy as np

__all__ = ["spanning_group_pieces", "spanning_groups"]

logger = logging.getLogger(__name__)


def spanning_groups(group: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Group ids (>= 0) whose members sit on more than one device."""
    grouped = np.flatnonzero(group >= 0)
    if grouped.size == 0:
        return np.empty(0, dtype=np.int64)
    ids = group[grouped].astype(np.int64)
    where = device[grouped].astype(np.int64)
    # Every simulation asks this, so no sort (a unique over (group, device) pairs was 60% of a
    # 29k-node simulation): each group takes one of its members' devices (whichever write lands
    # last; any member's will do), and it spans devices iff some member sits elsewhere.
    labels = None
    if int(ids.max()) >= 4 * ids.size + 1024:  # sparse ids: number them densely first
        labels, ids = np.unique(ids, return_inverse=True)
    size = int(ids.max()) + 1
    some_member = np.zeros(size, dtype=np.int64)
    some_member[ids] = where
    spans = np.zeros(size, dtype=bool)
    spans[ids[where != some_member[ids]]] = True
    spanning = np.flatnonzero(spans)
    return spanning if labels is None else labels[spanning]


def spanning_group_pieces(
    pred_ptr: np.ndarray,
    preds: np.ndarray,
    group: np.ndarray,
    device: np.ndarray,
) -> np.ndarray | None:
    """Piece index per node (0 for nodes outside spanning groups), or None when no group spans
    devices.

    Nodes are numbered in a topological order; `preds[pred_ptr[v]:pred_ptr[v + 1]]` are the
    distinct producers of node v (all with smaller numbers). `group` is -1 for unfused nodes.
    A kernel is then (group, device, piece).
    """
    spanning = spanning_groups(group, device)
    if spanning.size == 0:
        return None
    piece = np.zeros(group.shape[0], dtype=np.int64)
    group_list = group.tolist()
    device_list = device.tolist()
    ptr = pred_ptr.tolist()
    pred_list = preds.tolist()
    for gid in spanning.tolist():
        members = np.flatnonzero(group == gid)
        lo, hi = int(members[0]), int(members[-1])
        # reach[v]: the highest piece of any member of the group that reaches node v (v itself
        # included when it is a member); absent when none does.
        reach: dict[int, int] = {}
        for v in range(lo, hi + 1):
            in_group = group_list[v] == gid
            best = -1
            own = 0
            for p in pred_list[ptr[v] : ptr[v + 1]]:
                r = reach.get(p, -1) if p >= lo else -1
                if r < 0:
                    continue
                best = max(best, r)
                if in_group:
                    inside = group_list[p] == gid and device_list[p] == device_list[v]
                    # Straight from a member of the same share: the same piece is fine; from
                    # another share or through a node outside the group: a later piece.
                    own = max(own, r if inside else r + 1)
            if in_group:
                reach[v] = piece[v] = own
            elif best >= 0:
                reach[v] = best
    logger.debug("split %d fusion groups that span devices into convex pieces", spanning.size)
    return piece
