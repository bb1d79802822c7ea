"""Critical-path placement: CPOP (Topcuoglu, Hariri and Wu, "Performance-effective and
low-complexity task scheduling for heterogeneous computing", IEEE TPDS 2002).

Priority of a node = top level + bottom level (longest path from a source to it, and from it to a
sink, with fastest-candidate node times and placement-free transfer times). The nodes on the
critical path (a source-to-sink path of maximal priority) all go to the device that runs them
fastest together, so the critical path pays no transfer at all. The others are list-scheduled in
priority order onto the device giving the earliest finish time (HEFT's rule) under
`PartialSchedule`'s model.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import PlacementContext
from passes.placement.list_schedule import PartialSchedule

__all__ = ["CriticalPathPlacement", "critical_path_nodes"]


def _top_level(ctx: PlacementContext) -> np.ndarray:
    w = ctx.times[:, ctx.candidates].min(axis=1)
    comm = np.asarray(ctx.worst_comm_time(ctx.edge_bytes)) if ctx.edge_bytes.size else np.zeros(0)
    top = np.zeros(ctx.num_nodes)
    for node in range(ctx.num_nodes):
        for e in ctx.pred_edges[node]:
            p = int(ctx.edge_src[e])
            top[node] = max(top[node], top[p] + w[p] + comm[e])
    return top


def critical_path_nodes(ctx: PlacementContext) -> list[int]:
    """The nodes of one maximal-priority source-to-sink path, in order."""
    priority = _top_level(ctx) + ctx.bottom_level
    best = priority.max()
    tol = 1e-9 * max(best, 1e-30)
    sources = [n for n in range(ctx.num_nodes) if not ctx.preds[n]]
    node = max(sources, key=lambda n: (priority[n], -n))
    path = [node]
    while ctx.succs[node]:
        on_path = [s for s in ctx.succs[node] if priority[s] >= best - tol]
        if not on_path:
            break
        node = max(on_path, key=lambda s: (priority[s], -s))
        path.append(node)
    return path


@register_pass
@dataclass(frozen=True)
class CriticalPathPlacement(PlacementPass):
    """CPOP: the critical path on the device that runs it fastest, the rest by earliest finish time."""

    name = "critical-path"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        path = critical_path_nodes(ctx)
        cp_device = int(ctx.candidates[int(np.argmin(ctx.times[np.ix_(path, ctx.candidates)].sum(axis=0)))])
        on_path = np.zeros(ctx.num_nodes, dtype=bool)
        on_path[path] = True
        priority = _top_level(ctx) + ctx.bottom_level
        schedule = PartialSchedule(ctx)
        waiting = np.array([len(p) for p in ctx.preds])
        ready = [(-priority[n], n) for n in range(ctx.num_nodes) if waiting[n] == 0]
        heapq.heapify(ready)
        times = ctx.times
        while ready:
            _, node = heapq.heappop(ready)
            if on_path[node]:
                device = cp_device
            else:
                finish = schedule.start_times(node, ctx.candidates) + times[node, ctx.candidates]
                device = int(ctx.candidates[int(np.argmin(finish))])
            schedule.commit(node, device)
            for s in ctx.succs[node]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    heapq.heappush(ready, (-priority[s], s))
        return schedule.device
