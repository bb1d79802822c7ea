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
    """comm[a, b]: transfer time in and out of the segment between cut points a < b.

    A value costs its transfer once when its origin (producer, or first consumer for a graph
    input) is inside the segment and some use is outside, or its origin is outside and some use is
    inside. With positions grouped into intervals j = 1..m-1 (between cut j-1 and cut j), each
    value's cost as a function of b, for one start a, is piecewise constant with steps only at its
    origin's interval and its uses' intervals; the row comm[a, :] is then a cumulative sum of
    those steps, O(values) numpy work per row instead of a Python walk over every position.
    """
    p = ctx.problem
    n = ctx.num_nodes
    m = int(cuts.size)
    comm = np.zeros((m, m))
    if m < 2:
        return comm
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    keep = p.value_kind[p.use_value] != VALUE_CONSTANT
    uv, un = p.use_value[keep], p.use_node[keep]
    values, local = np.unique(uv, return_inverse=True)
    local = local.reshape(-1)
    if values.size == 0:
        return comm
    producer = p.value_producer[values]
    origin = np.where(producer >= 0, producer, p.value_first_consumer[values])
    cost = np.asarray(ctx.worst_comm_time(p.value_bytes[values].astype(np.float64)), dtype=np.float64).reshape(-1)
    # Interval of a position: cuts[j-1] <= pos < cuts[j].
    origin_iv = np.searchsorted(cuts, position[origin], side="right")
    use_iv = np.searchsorted(cuts, position[un], side="right")
    # Uses sorted by (value, interval): the first use after interval a is a searchsorted away.
    sort = np.lexsort((use_iv, local))
    use_val, use_iv = local[sort], use_iv[sort]
    key = use_val * (m + 1) + use_iv
    run_end = np.searchsorted(use_val, np.arange(values.size), side="right")
    run_start = np.searchsorted(use_val, np.arange(values.size), side="left")
    first_use = use_iv[run_start]
    last_use = use_iv[run_end - 1]
    base = np.arange(values.size) * (m + 1)
    for a in range(m - 1):
        # First use in an interval after a (m + 1 when none).
        at = np.searchsorted(key, base + a + 1, side="left")
        has_next = at < run_end
        next_use = np.where(has_next, use_iv[np.minimum(at, use_iv.size - 1)], m + 1)
        outside = origin_iv <= a  # the origin precedes every segment starting at a
        steps = np.zeros(m + 2)
        # Origin before the segment: costs from the first use inside it on.
        np.add.at(steps, next_use[outside], cost[outside])
        inside = ~outside
        # Origin after a: a use between a and the origin costs until the origin joins the segment.
        early = inside & (next_use < origin_iv)
        np.add.at(steps, next_use[early], cost[early])
        np.add.at(steps, origin_iv[early], -cost[early])
        # Origin inside: costs while some use lies outside (before a, or after b).
        np.add.at(steps, origin_iv[inside], cost[inside])
        closes = inside & (first_use > a)  # no use before the segment: ends at the last use
        stop = np.maximum(last_use, origin_iv)
        np.add.at(steps, stop[closes], -cost[closes])
        row = np.cumsum(steps)
        comm[a, a + 1 :] = row[a + 1 : m]
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
