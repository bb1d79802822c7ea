"""Baechi's memory-constrained placements (Jeon et al., "Baechi: Fast Device Placement of Machine
Learning Graphs", SoCC 2020): m-TOPO, m-ETF and m-SCT.

All three keep every device within capacity under `MemoryTracker`'s conservative model (Baechi's:
a device holds everything ever placed on or sent to it), so their placements never run out of
memory in the simulator. When no device can take a node, the node goes where it overflows least
and a warning is logged (Baechi fails instead).

- m-TOPO: nodes in topological order fill device after device; a device takes nodes until its
  share of the total compute (proportional to its speed) is reached or its memory is full.
- m-ETF: earliest task first (Hwang et al. 1989): repeatedly schedule the (ready node, device)
  pair with the earliest start time among devices where the node fits; ties go to the larger
  bottom level. Start times follow `PartialSchedule` (transfer delays, no link contention).
- m-SCT: small communication times (Hanen and Munier 1995). An LP relaxation picks each node's
  favourite child: minimise the makespan w subject to t_j >= t_i + p_i + c_ij * x_ij on every edge,
  w >= t_i + p_i, sum_j x_ij >= outdeg(i) - 1, sum_i x_ij >= indeg(j) - 1, 0 <= x <= 1; an edge
  with x_ij < 1/2 makes j the favourite child of i (at most one per parent and one per child).
  Then ETF, except that a ready favourite child goes to its parent's device when it fits there.
  Simplification: Baechi (following Hanen and Munier) also keeps the parent's device idle until
  the favourite child is ready; here the ETF rule may fill that gap. Graphs above `lp_max_nodes`
  skip the LP and take the child with the largest transfer as favourite (greedy).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import MemoryTracker
from passes.placement.context_base import PlacementContextBase as PlacementContext
from passes.placement.list_schedule import PartialSchedule

__all__ = ["MEtfPlacement", "MSctPlacement", "MTopoPlacement", "favorite_children"]

logger = logging.getLogger(__name__)


def _place_checked(ctx: PlacementContext, memory: MemoryTracker, node: int, preferred: list[int]) -> int:
    """The first device in `preferred` where `node` fits, else the least overflowing (warned)."""
    for d in preferred:
        if memory.fits(node, d):
            return d
    overflow = [float((memory.used + memory.extra(node, d) - ctx.capacity).max()) for d in preferred]
    d = preferred[int(np.argmin(overflow))]
    memory.overflows += 1
    # One warning per placement: a graph far over capacity would otherwise log every node.
    log = logger.warning if memory.overflows == 1 else logger.debug
    log("node %s fits on no device; placing it on %s (over capacity; later nodes that do not fit are logged at debug level)",
        ctx.node_names[node], ctx.device_names[d])
    return d


@register_pass
@dataclass(frozen=True)
class MTopoPlacement(PlacementPass):
    """m-TOPO: topological order, devices filled one after another by compute share and memory."""

    name = "m-topo"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        memory = ctx.memory_tracker()
        devices = ctx.candidates.tolist()
        speed = 1.0 / np.maximum(ctx.times[:, ctx.candidates].sum(axis=0), 1e-30)
        share = speed / speed.sum()  # fraction of the graph each device should run
        work = ctx.times[:, ctx.candidates] * speed[None, :]  # node time as a fraction of the device's whole-graph time
        current, filled = 0, 0.0
        for node in range(ctx.num_nodes):
            while current < len(devices) - 1 and (
                filled + work[node, current] > share[current] * (1 + 1e-9) or not memory.fits(node, devices[current])
            ):
                if filled == 0.0 and memory.fits(node, devices[current]):
                    break  # a single node larger than the share still needs a device
                current, filled = current + 1, 0.0
            d = devices[current]
            if not memory.fits(node, d):
                d = _place_checked(ctx, memory, node, devices)
            memory.place(node, d)
            filled += float(work[node, devices.index(d)])
        return memory.device


def _etf(ctx: PlacementContext, favorite_parent: np.ndarray | None = None) -> np.ndarray:
    """Memory-constrained ETF; with `favorite_parent`, favourite children follow their parent."""
    memory = ctx.memory_tracker()
    schedule = PartialSchedule(ctx)
    cand = ctx.candidates
    level = ctx.bottom_level
    waiting = np.array([len(p) for p in ctx.preds])
    ready: list[int] = [n for n in range(ctx.num_nodes) if waiting[n] == 0]
    # Once a node is ready its inputs' arrival times are fixed: compute them once.
    data: dict[int, np.ndarray] = {n: schedule.data_ready_times(n, cand) for n in ready}
    while ready:
        nodes = np.asarray(ready)
        rows = np.stack([data[n] for n in ready])
        est = np.maximum(rows, schedule.device_ready[cand][None, :])
        if favorite_parent is not None:
            parent = favorite_parent[nodes]
            for i, p in enumerate(parent.tolist()):
                if p >= 0:
                    d = int(schedule.device[p])
                    if memory.fits(int(nodes[i]), d):
                        est[i, cand != d] = np.inf
        # Earliest start first; ties: larger bottom level, then lower node index.
        flat = np.lexsort((np.repeat(nodes, cand.size), -np.repeat(level[nodes], cand.size), est.reshape(-1)))
        chosen = None
        for index in flat.tolist():
            i, j = divmod(index, cand.size)
            if not np.isfinite(est[i, j]):
                break
            if memory.fits(int(nodes[i]), int(cand[j])):
                chosen = (int(nodes[i]), int(cand[j]))
                break
        if chosen is None:  # fits nowhere: the most urgent node where it overflows least
            node = int(nodes[int(np.argmin(est.min(axis=1)))])
            chosen = (node, _place_checked(ctx, memory, node, cand.tolist()))
        node, device = chosen
        memory.place(node, device)
        schedule.commit(node, device)
        ready.remove(node)
        del data[node]
        for s in ctx.succs[node]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
                data[s] = schedule.data_ready_times(s, cand)
    return schedule.device


@register_pass
@dataclass(frozen=True)
class MEtfPlacement(PlacementPass):
    """m-ETF: earliest (node, device) start first, within memory."""

    name = "m-etf"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        return _etf(ctx)


def favorite_children(ctx: PlacementContext, *, lp_max_nodes: int = 5000) -> np.ndarray:
    """favorite_parent[j] = i when j is i's favourite child (-1: none), from the SCT LP."""
    n, e = ctx.num_nodes, ctx.edge_src.size
    parent = np.full(n, -1, dtype=np.int64)
    if e == 0:
        return parent
    src, dst = ctx.edge_src.tolist(), ctx.edge_dst.tolist()
    p = ctx.times[:, ctx.candidates].min(axis=1).tolist()
    c = np.asarray(ctx.worst_comm_time(ctx.edge_bytes)).tolist()
    x = None
    if n <= lp_max_nodes:
        x = _solve_sct_lp(n, src, dst, p, c)
    if x is None:  # greedy: the heaviest outgoing edge of each parent, one parent per child
        x = [1.0] * e
        taken: set[int] = set()
        for i, edges in _out_edges(n, src).items():
            for k in sorted(edges, key=lambda k: (-c[k], dst[k])):
                if dst[k] not in taken:
                    x[k] = 0.0
                    taken.add(dst[k])
                    break
    for k in range(e):
        if x[k] < 0.5 and parent[dst[k]] < 0:
            parent[dst[k]] = src[k]
    return parent


def _out_edges(n: int, src: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for k, s in enumerate(src):
        out.setdefault(s, []).append(k)
    return out


def _solve_sct_lp(n: int, src: list[int], dst: list[int], p: list[float], c: list[float]) -> list[float] | None:
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return None
    scale = 1.0 / max(max(p), max(c), 1e-30)  # keep the LP well conditioned
    inf = solver.infinity()
    t = [solver.NumVar(0.0, inf, "") for _ in range(n)]
    x = [solver.NumVar(0.0, 1.0, "") for _ in src]
    w = solver.NumVar(0.0, inf, "w")
    outs: dict[int, list[int]] = {}
    ins: dict[int, list[int]] = {}
    for k, (i, j) in enumerate(zip(src, dst)):
        solver.Add(t[j] >= t[i] + p[i] * scale + c[k] * scale * x[k])
        outs.setdefault(i, []).append(k)
        ins.setdefault(j, []).append(k)
    for i in range(n):
        solver.Add(w >= t[i] + p[i] * scale)
    for i, ks in outs.items():
        solver.Add(sum(x[k] for k in ks) >= len(ks) - 1)
    for j, ks in ins.items():
        solver.Add(sum(x[k] for k in ks) >= len(ks) - 1)
    solver.Minimize(w)
    status = solver.Solve()
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        logger.warning("m-sct: the favourite-child LP did not solve (status %s); using the greedy rule", status)
        return None
    return [v.solution_value() for v in x]


@register_pass
@dataclass(frozen=True)
class MSctPlacement(PlacementPass):
    """m-SCT: ETF where LP-chosen favourite children follow their parent's device."""

    name = "m-sct"
    lp_max_nodes: int = option(5000, "largest graph for which the favourite-child LP is solved")

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        return _etf(ctx, favorite_children(ctx, lp_max_nodes=self.lp_max_nodes))
