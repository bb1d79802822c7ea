"""Contiguous-split dynamic program for the max-load (throughput) objective, after Tarnawski,
Phanishayee, Devanur, Mahajan and Nina Paravecino, "Efficient Algorithms for Device Placement
of DNN Graph Operators", NeurIPS 2020.

The paper's DP for pipelined throughput places *contiguous* sets, S = I \\ I' for ideals
(downward-closed sets) I' of I, one per device, and minimises the maximum device load, where a
device's load is its compute plus the communication entering and leaving its set; its state space
is (ideal, devices used). What is implemented here is the restriction of that DP to ideals that
are prefixes of a topological order (every prefix is an ideal, and every segment between two
prefixes is a contiguous set), which makes the DP polynomial:

    F[k][b] = min over a <= b of max(F[k-1][a], load_k(segment a..b)),  F[0][0] = 0,

with devices taken in candidate order (segment k runs on candidate k; empty segments allowed, so
fewer devices may be used). load_k = compute of the segment on device k + the transfer time of
every value entering the segment + of every value leaving it, a value counted once per direction
(the paper's model: a node's output is sent once) with the slowest transfer between two candidates
as its time. Several topological orders are tried (the graph's order, a depth-first order that
keeps chains together, a breadth-first order by depth) and each result is scored with the context's
objective (one simulator evaluation each); the best is kept. Not implemented: the paper's
enumeration of *all* ideals (exponential in the graph's width) and its IP for the latency
objective. On graphs longer than `max_cut_points` positions, cuts are allowed only at that many
evenly spaced positions of the order (so the DP stays O(points^2 x devices)).

On a profiled workload (`ProfiledPlacementContext`) the pass runs the paper's DP over *all*
ideals instead (`passes.placement.ideals`): min-max for throughput and memory, min-sum of
segment compute plus receiving for latency, with colour classes, unsupported nodes and the memory
limit as constraints, the CPU as one more (communication-free) device, and a fallback to
prefixes of many topological orders when the ideals exceed `max_ideals`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from cost_model.costs import VALUE_CONSTANT
from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import PlacementContext
from passes.placement.context_base import PlacementContextBase
from passes.placement.ideals import IdealDpResult, MaxLoadInstance, ideal_dp
from passes.placement.profiled_context import ProfiledPlacementContext

__all__ = ["ContiguousDpPlacement", "profiled_dp", "segment_dp", "topological_orders"]

logger = logging.getLogger(__name__)


def topological_orders(ctx: PlacementContext) -> list[np.ndarray]:
    """The node order, a depth-first topological order and a breadth-first (by depth) order."""
    n = ctx.num_nodes
    orders = [np.arange(n)]
    # Depth-first: always continue with the most recently readied node.
    waiting = [len(p) for p in ctx.preds]
    stack = [v for v in range(n - 1, -1, -1) if waiting[v] == 0]
    dfs: list[int] = []
    while stack:
        v = stack.pop()
        dfs.append(v)
        for s in sorted(ctx.succs[v], reverse=True):
            waiting[s] -= 1
            if waiting[s] == 0:
                stack.append(s)
    orders.append(np.asarray(dfs))
    depth = np.zeros(n, dtype=np.int64)
    for v in range(n):
        if ctx.preds[v]:
            depth[v] = 1 + max(int(depth[p]) for p in ctx.preds[v])
    orders.append(np.lexsort((np.arange(n), depth)))
    unique: list[np.ndarray] = []
    for order in orders:
        if not any(np.array_equal(order, u) for u in unique):
            unique.append(order)
    return unique


def _comm_matrix(ctx: PlacementContext, order: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """comm[a, b]: transfer time in and out of the segment between cut points a < b."""
    p = ctx.problem
    n = ctx.num_nodes
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    keep = p.value_kind[p.use_value] != VALUE_CONSTANT
    uv, un = p.use_value[keep], p.use_node[keep]
    values, local = np.unique(uv, return_inverse=True)
    local = local.reshape(-1)
    producer = p.value_producer[values]
    origin = np.where(producer >= 0, producer, p.value_first_consumer[values])
    cost = np.asarray(ctx.worst_comm_time(p.value_bytes[values].astype(np.float64)), dtype=np.float64).reshape(-1)
    total = np.bincount(local, minlength=values.size)
    consumed: list[list[int]] = [[] for _ in range(n)]
    for v, node in zip(local.tolist(), un.tolist()):
        consumed[node].append(v)
    originated: list[list[int]] = [[] for _ in range(n)]
    for v, o in enumerate(origin.tolist()):
        originated[o].append(v)
    order_list = order.tolist()
    cut_list = cuts.tolist()
    m = len(cut_list)
    comm = np.zeros((m, m))
    cost_l, total_l = cost.tolist(), total.tolist()
    for a in range(m - 1):
        count = [0] * values.size
        inside = [False] * values.size
        current = 0.0

        def contribution(v: int) -> float:
            if inside[v]:
                return cost_l[v] if count[v] < total_l[v] else 0.0
            return cost_l[v] if count[v] > 0 else 0.0

        for b in range(a + 1, m):
            for pos in range(cut_list[b - 1], cut_list[b]):
                node = order_list[pos]
                for v in originated[node]:
                    current -= contribution(v)
                    inside[v] = True
                    current += contribution(v)
                for v in consumed[node]:
                    current -= contribution(v)
                    count[v] += 1
                    current += contribution(v)
            comm[a, b] = current
    return comm


def segment_dp(ctx: PlacementContext, order: np.ndarray, *, max_cut_points: int = 400) -> tuple[np.ndarray, float]:
    """Min-max-load split of `order` into contiguous segments on the candidates in order.
    Returns the placement and the DP's own max-load value."""
    n = ctx.num_nodes
    cand = ctx.candidates
    if n + 1 > max_cut_points:
        cuts = np.unique(np.rint(np.linspace(0, n, max_cut_points)).astype(np.int64))
    else:
        cuts = np.arange(n + 1)
    comm = _comm_matrix(ctx, order, cuts)
    prefix = np.zeros((cand.size, n + 1))
    prefix[:, 1:] = np.cumsum(ctx.times[order][:, cand], axis=0).T
    at_cuts = prefix[:, cuts]  # (K, M)
    m = cuts.size
    best = np.full(m, np.inf)
    best[0] = 0.0
    choice = np.zeros((cand.size, m), dtype=np.int64)
    for k in range(cand.size):
        new = np.full(m, np.inf)
        for b in range(m):
            load = at_cuts[k, b] - at_cuts[k, : b + 1] + comm[: b + 1, b]
            load[b] = 0.0  # an empty segment: the device is unused
            candidate = np.maximum(best[: b + 1], load)
            a = int(np.argmin(candidate))
            new[b], choice[k, b] = candidate[a], a
        best = new
    device = np.empty(n, dtype=np.int64)
    b = m - 1
    for k in range(cand.size - 1, -1, -1):
        a = int(choice[k, b])
        device[order[cuts[a] : cuts[b]]] = cand[k]
        b = a
    return device, float(best[m - 1])


@register_pass
@dataclass(frozen=True)
class ContiguousDpPlacement(PlacementPass):
    """Tarnawski et al.'s max-load DP restricted to segments of topological orders (module docstring)."""

    name = "dp"
    max_cut_points: int = option(400, "most cut positions per order (bounds the DP's quadratic cost)")
    max_ideals: int = option(4000, "profiled workloads: most ideals enumerated before falling back to order prefixes")

    def assign(self, ctx: PlacementContextBase) -> np.ndarray:
        if isinstance(ctx, ProfiledPlacementContext):
            result = profiled_dp(ctx, max_ideals=self.max_ideals, seed=self.seed)
            ctx.extras["dp"] = result
            return result.device
        assert isinstance(ctx, PlacementContext)
        best, best_value = None, np.inf
        for order in topological_orders(ctx):
            device, load = segment_dp(ctx, order, max_cut_points=self.max_cut_points)
            value = ctx.evaluate(device)
            logger.debug("dp: order with DP max-load %.6g scores %.6g", load, value)
            if value < best_value:
                best, best_value = device, value
        assert best is not None
        return best


def profiled_dp(ctx: ProfiledPlacementContext, *, max_ideals: int = 4000, seed: int = 0) -> IdealDpResult:
    """The ideal DP on a profiled workload for the context's objective (module docstring); the
    result's device array is in context order."""
    inst = MaxLoadInstance(
        accel=np.where(ctx.supported, ctx.times[:, 1], np.inf),
        cpu=ctx.times[:, 0],
        cost=ctx.cost,
        size=ctx.size,
        color=ctx.group_of,
        backward=ctx.workload.backward[ctx.rows],
        edge_src=ctx.edge_src,
        edge_dst=ctx.edge_dst,
        accelerators=ctx.num_devices - 1,
        capacity=float(ctx.capacity[1]),
    )
    kind = "sum" if ctx.objective == "latency" else "max"
    result = ideal_dp(inst, objective=kind, max_ideals=max_ideals, seed=seed)
    logger.info(
        "dp: %s over %d ideals (%s): %.6g", kind, result.ideals, "all" if result.complete else "order prefixes", result.value
    )
    return result
