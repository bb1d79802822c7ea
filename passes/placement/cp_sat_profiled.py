"""CP-SAT on a profiled workload: the paper's cost models as a constraint program.

Variables: x[g, d] = colour class g runs on device d (only devices all its members allow), one
device per class, so colour classes and unsupported nodes hold by construction; every
accelerator's summed `size` stays within capacity. Times are integers in units of 1e-6 of the
total work (rounded).
- throughput: minimise L >= every device's load. An accelerator pays its nodes' accelerator
  latencies, send[u] (u has a consumer on another device) for its nodes u, and recv[u, d] (u is
  elsewhere and has a consumer on d); the CPU pays its CPU latencies only. The indicator
  variables are only bounded from below (send[u] >= x[v's class, d] - x[u's class, d] for every
  consumer v and device d, ...), which is exact at the optimum since loads only grow with them.
- latency: minimise the makespan; a device runs one node at a time (optional intervals and
  NoOverlap per device); a consumer starts no earlier than its producer's end plus the edge's cost
  when they are on different devices (links never queue, as in the context's list schedule).
  The solver's schedule may be better than the list schedule that scores the placement, which
  is why the result is scored again.
- memory: minimise the largest accelerator size sum.
The contiguous DP's placement is the hint, so the result is never worse than the DP's (once the
solver has loaded the hint). Accelerators are identical: the first class, if on an accelerator,
is put on accelerator 1.
"""

from __future__ import annotations

import logging

import numpy as np

from passes.placement.context_base import PlacementError
from passes.placement.profiled_context import ProfiledPlacementContext

__all__ = ["solve_profiled_placement"]

logger = logging.getLogger(__name__)


def solve_profiled_placement(
    ctx: ProfiledPlacementContext,
    *,
    hint: np.ndarray | None = None,
    time_limit_s: float = 30.0,
    workers: int = 1,
    seed: int = 0,
) -> tuple[np.ndarray, bool]:
    """(device per node in context order, proven optimal) for `ctx.objective`."""
    from ortools.sat.python import cp_model

    n, num_dev = ctx.num_nodes, ctx.num_devices
    groups, group_of = ctx.groups, ctx.group_of
    allowed = [np.flatnonzero(ctx.allowed[members].all(axis=0)).tolist() for members in groups]
    unit = max(float(np.maximum(ctx.times[:, 0], ctx.times[:, 1]).sum()), 1e-12) / 1e6
    t_cpu = np.rint(ctx.times[:, 0] / unit).astype(np.int64).tolist()
    t_acc = np.rint(ctx.times[:, 1] / unit).astype(np.int64).tolist()
    cost = np.rint(ctx.cost / unit).astype(np.int64).tolist()
    model = cp_model.CpModel()
    zero = model.NewConstant(0)
    x = [{d: model.NewBoolVar("") for d in allowed[g]} for g in range(len(groups))]
    for g in range(len(groups)):
        model.AddExactlyOne(x[g].values())
    if len(groups) and num_dev > 2:
        for d in range(2, num_dev):
            if d in x[0]:
                model.Add(x[0][d] == 0)

    def on(node: int, d: int):  # type: ignore[no-untyped-def]
        return x[int(group_of[node])].get(d, zero)

    size = ctx.size.astype(np.int64).tolist()
    for d in range(1, num_dev):
        terms = [(size[i], on(i, d)) for i in range(n) if size[i]]
        if terms:
            model.Add(sum(c * v for c, v in terms) <= int(ctx.capacity[d]))
    cross_pairs = [(u, v) for u, v in zip(ctx.edge_src.tolist(), ctx.edge_dst.tolist()) if group_of[u] != group_of[v]]
    horizon = sum(max(a, c) for a, c in zip(t_acc, t_cpu)) + sum(cost) + 1
    if ctx.objective == "latency":
        start = [model.NewIntVar(0, horizon, "") for _ in range(n)]
        end = [model.NewIntVar(0, horizon, "") for _ in range(n)]
        per_device: list[list[object]] = [[] for _ in range(num_dev)]
        for i in range(n):
            for d, var in x[int(group_of[i])].items():
                duration = t_cpu[i] if d == 0 else t_acc[i]
                per_device[d].append(model.NewOptionalIntervalVar(start[i], duration, end[i], var, ""))
        for intervals in per_device:
            model.AddNoOverlap(intervals)
        for u, v in zip(ctx.edge_src.tolist(), ctx.edge_dst.tolist()):
            if group_of[u] == group_of[v] or cost[u] == 0:
                model.Add(start[v] >= end[u])
                continue
            cross = model.NewBoolVar("")
            for d in range(num_dev):
                model.Add(cross >= on(u, d) - on(v, d))
            model.Add(start[v] >= end[u] + cost[u] * cross)
        objective = model.NewIntVar(0, horizon, "makespan")
        model.AddMaxEquality(objective, end)
    else:
        objective = model.NewIntVar(0, horizon if ctx.objective == "throughput" else int(ctx.size.sum()) + 1, "max_load")
        loads: list[list[tuple[int, object]]] = [[] for _ in range(num_dev)]
        for i in range(n):
            if ctx.objective == "throughput":
                loads[0].append((t_cpu[i], on(i, 0)))
                for d in range(1, num_dev):
                    loads[d].append((t_acc[i], on(i, d)))
            else:
                for d in range(1, num_dev):
                    loads[d].append((size[i], on(i, d)))
        if ctx.objective == "throughput":
            consumers: dict[int, list[int]] = {}
            for u, v in cross_pairs:
                consumers.setdefault(u, []).append(v)
            for u, vs in consumers.items():
                if cost[u] == 0:
                    continue
                send = model.NewBoolVar("")
                for d in range(num_dev):
                    for v in vs:
                        model.Add(send >= on(v, d) - on(u, d))
                for d in range(1, num_dev):
                    sent_here = model.NewBoolVar("")
                    model.Add(sent_here >= send + on(u, d) - 1)
                    received = model.NewBoolVar("")
                    for v in vs:
                        model.Add(received >= on(v, d) - on(u, d))
                    loads[d] += [(cost[u], sent_here), (cost[u], received)]
        for terms in loads:
            if terms:
                model.Add(objective >= sum(c * v for c, v in terms))
    model.Minimize(objective)
    if hint is not None:
        hint = np.asarray(hint, dtype=np.int64).copy()
        first = int(hint[groups[0][0]])
        if first >= 2:  # relabel so the hint obeys the symmetry breaking
            a, b = hint == first, hint == 1
            hint[a], hint[b] = 1, first
        for g, members in enumerate(groups):
            for d, var in x[g].items():
                model.AddHint(var, int(hint[members[0]]) == d)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint is None:
            raise PlacementError(f"cp-sat found no placement within {time_limit_s}s (status {solver.StatusName(status)})")
        logger.warning("cp-sat (profiled): no solution within %.3gs (%s); keeping the hint", time_limit_s, solver.StatusName(status))
        return np.asarray(hint, dtype=np.int64), False
    device = np.empty(n, dtype=np.int64)
    for g, members in enumerate(groups):
        device[members] = next(d for d, var in x[g].items() if solver.Value(var))
    optimal = status == cp_model.OPTIMAL
    logger.info(
        "cp-sat (profiled): %s %s objective %.6g (bound %.6g) in %.2fs",
        "optimal" if optimal else "feasible", ctx.objective,
        solver.ObjectiveValue() * (unit if ctx.objective != "memory" else 1.0),
        solver.BestObjectiveBound() * (unit if ctx.objective != "memory" else 1.0),
        solver.WallTime(),
    )
    return device, optimal
