"""Exact placement of small graphs with OR-Tools CP-SAT.

The model is the simulator's cost model with the schedule left free (times in integer `unit_s`
steps, each duration rounded to the nearest step):
- every node runs on exactly one candidate device for `node_time[n, type(d)]`; a device runs one
  node at a time (optional intervals sharing the node's start/end, NoOverlap per device);
- a node output is ready on its producer's device when the producer ends; a consumer on another
  device starts no earlier than that plus the route's transfer time (latency + bytes / bandwidth
  per hop, as `Topology.transfer_time`); a graph input starts on its first consumer's device at
  t = 0 (the simulator's rule); constants are resident everywhere;
- latency objective: the makespan. Throughput: the largest device load as in `device_loads`
  (compute plus every hop a device sends or receives, a value sent once per destination
  device). Memory: the largest `MemoryTracker` charge as parts per million of capacity.
- with `memory_constraint`, every device's `MemoryTracker` charge stays within capacity.
Not modelled: link contention (copy engines queueing transfers), fusion (every node is its own
kernel; run placement before fusion). So for latency the optimum is a lower bound on the
simulated step time of every placement and priority order, and it is reached when transfers
do not queue. The solver's start order is written as node priorities (earlier start = higher),
so the simulator replays the optimal order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from cost_model.costs import VALUE_CONSTANT
from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import PlacementContext, PlacementError
from passes.placement.context_base import PlacementContextBase

__all__ = ["CpSatPlacement", "CpSatSolution", "ExactInstance", "solve_placement"]

logger = logging.getLogger(__name__)


@dataclass
class ExactInstance:
    """The integer data both the CP-SAT model and an independent checker can use."""

    unit_s: float
    candidates: list[int]
    duration: list[list[int]]  # [node][k]
    # (origin node, consumer node, bytes): a value produced by `origin` (or a graph input whose
    # first consumer is `origin`) read by `consumer`; graph inputs read only by `origin` are omitted.
    uses: list[tuple[int, int, int, int]] = field(default_factory=list)  # (value, origin, consumer, is_input)
    value_bytes: dict[int, float] = field(default_factory=dict)

    @classmethod
    def build(cls, ctx: PlacementContext, unit_s: float | None = None) -> ExactInstance:
        p = ctx.problem
        cand = ctx.candidates.tolist()
        times = ctx.times[:, cand]
        if unit_s is None:
            unit_s = max(float(times.max(axis=1).sum()), 1e-12) / 1e6
        duration = np.maximum(np.rint(times / unit_s), 0).astype(np.int64).tolist()
        instance = cls(unit_s, cand, duration)
        for value, consumer in zip(p.use_value.tolist(), p.use_node.tolist()):
            if p.value_kind[value] == VALUE_CONSTANT:
                continue
            producer = int(p.value_producer[value])
            origin = producer if producer >= 0 else int(p.value_first_consumer[value])
            if origin == consumer:
                continue
            instance.uses.append((value, origin, consumer, int(producer < 0)))
            instance.value_bytes[value] = float(p.value_bytes[value])
        return instance

    def transfer(self, ctx: PlacementContext, nbytes: float, src: int, dst: int) -> int:
        """Integer transfer time between two devices (0 on the same device)."""
        return int(round(ctx.comm_time(nbytes, src, dst) / self.unit_s))


@dataclass
class CpSatSolution:
    device: np.ndarray  # device index per node
    start: np.ndarray  # start time per node in units (latency objective; zeros otherwise)
    objective_units: int
    unit_s: float
    optimal: bool

    @property
    def objective(self) -> float:
        return self.objective_units * self.unit_s


def solve_placement(
    ctx: PlacementContext,
    *,
    time_limit_s: float = 30.0,
    workers: int = 1,
    memory_constraint: bool = True,
    unit_s: float | None = None,
    seed: int = 0,
    hint: np.ndarray | None = None,
) -> CpSatSolution:
    """Build and solve the CP-SAT model (module docstring) for `ctx.objective`; `hint` is a
    starting placement for the load objectives (latency starts from the fastest device)."""
    from ortools.sat.python import cp_model

    inst = ExactInstance.build(ctx, unit_s)
    n, cand = ctx.num_nodes, inst.candidates
    k_count = len(cand)
    model = cp_model.CpModel()
    x = [[model.NewBoolVar(f"x{i}_{k}") for k in range(k_count)] for i in range(n)]
    for i in range(n):
        model.AddExactlyOne(x[i])
    _break_symmetry(ctx, model, x)

    # Which (value, source, destination) transfers happen: send >= x[origin, s] AND x[consumer, e].
    send: dict[tuple[int, int, int], object] = {}
    for value, origin, consumer, _ in inst.uses:
        for s in range(k_count):
            for e in range(k_count):
                if s != e:
                    key = (value, s, e)
                    if key not in send:
                        send[key] = model.NewBoolVar("")
                    model.AddBoolOr([x[origin][s].Not(), x[consumer][e].Not(), send[key]])

    loads = None
    if ctx.objective == "throughput" or ctx.objective == "memory" or memory_constraint:
        loads = _device_terms(ctx, inst, model, x, send, memory_constraint)

    start = end = None
    if ctx.objective == "latency":
        horizon = sum(max(row) for row in inst.duration) + sum(
            max(inst.transfer(ctx, inst.value_bytes[v], cand[s], cand[e]) for s in range(k_count) for e in range(k_count))
            for v, _, _, _ in inst.uses
        ) + 1
        start = [model.NewIntVar(0, horizon, f"s{i}") for i in range(n)]
        end = [model.NewIntVar(0, horizon, f"e{i}") for i in range(n)]
        per_device: list[list[object]] = [[] for _ in range(k_count)]
        for i in range(n):
            for k in range(k_count):
                per_device[k].append(model.NewOptionalIntervalVar(start[i], inst.duration[i][k], end[i], x[i][k], ""))
        for intervals in per_device:
            model.AddNoOverlap(intervals)
        for value, origin, consumer, is_input in inst.uses:
            ready = 0 if is_input else end[origin]
            if not is_input:
                model.Add(start[consumer] >= end[origin])
            for s in range(k_count):
                for e in range(k_count):
                    if s != e:
                        delay = inst.transfer(ctx, inst.value_bytes[value], cand[s], cand[e])
                        model.Add(start[consumer] >= ready + delay).OnlyEnforceIf([x[origin][s], x[consumer][e]])
        makespan = model.NewIntVar(0, horizon, "makespan")
        model.AddMaxEquality(makespan, end)
        model.Minimize(makespan)
        # Hint: all on the fastest device, in node order.
        fastest = cand.index(ctx.fastest_device)
        t = 0
        for i in range(n):
            for k in range(k_count):
                model.AddHint(x[i][k], k == fastest)
            model.AddHint(start[i], t)
            t += inst.duration[i][fastest]
            model.AddHint(end[i], t)
    else:
        assert loads is not None
        compute, memory = loads
        terms = compute if ctx.objective == "throughput" else memory
        bound = model.NewIntVar(0, sum(int(sum(abs(c) for c, _ in t)) for t in terms) + 1, "max_load")
        for t in terms:
            model.Add(bound >= sum(c * v for c, v in t))
        model.Minimize(bound)
        if hint is not None:
            for i in range(n):
                for k in range(k_count):
                    model.AddHint(x[i][k], int(hint[i]) == cand[k])

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    status = solver.Solve(model)
    if status == cp_model.INFEASIBLE and memory_constraint:
        logger.warning("cp-sat: no placement fits the conservative memory model; solving without it")
        return solve_placement(
            ctx, time_limit_s=time_limit_s, workers=workers, memory_constraint=False, unit_s=unit_s, seed=seed, hint=hint
        )
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise PlacementError(f"cp-sat found no placement within {time_limit_s}s (status {solver.StatusName(status)})")
    device = np.array([cand[next(k for k in range(k_count) if solver.Value(x[i][k]))] for i in range(n)], dtype=np.int64)
    starts = np.array([solver.Value(s) for s in start], dtype=np.int64) if start is not None else np.zeros(n, np.int64)
    optimal = status == cp_model.OPTIMAL
    logger.info(
        "cp-sat: %s %s objective %.6g s (bound %.6g s) in %.2fs",
        "optimal" if optimal else "feasible",
        ctx.objective,
        solver.ObjectiveValue() * inst.unit_s,
        solver.BestObjectiveBound() * inst.unit_s,
        solver.WallTime(),
    )
    return CpSatSolution(device, starts, int(round(solver.ObjectiveValue())), inst.unit_s, optimal)


def _device_terms(ctx, inst, model, x, send, memory_constraint):  # type: ignore[no-untyped-def]
    """Linear terms per device: (compute+transfer load in units, memory charge in ppm)."""
    from ortools.sat.python import cp_model  # noqa: F401 - model types only

    p = ctx.problem
    cand = inst.candidates
    num_devices = ctx.num_devices
    compute: list[list[tuple[int, object]]] = [[] for _ in range(num_devices)]
    memory: list[list[tuple[int, object]]] = [[] for _ in range(num_devices)]
    ppm = [1e6 / c for c in ctx.capacity.tolist()]
    for i in range(ctx.num_nodes):
        for k, d in enumerate(cand):
            compute[d].append((inst.duration[i][k], x[i][k]))
            memory[d].append((int(round(ctx.out_bytes[i] * ppm[d])), x[i][k]))
    topo = ctx.topology
    landed: dict[tuple[int, int], object] = {}
    for (value, s, e), var in send.items():
        is_input = p.value_producer[value] < 0  # charged below, where it is read
        nbytes = inst.value_bytes[value]
        for link_index in topo.route(cand[s], cand[e]):
            link = topo.links[link_index]
            hop = int(round(link.transfer_time(nbytes) / inst.unit_s))
            a, b = topo.device_index(link.src), topo.device_index(link.dst)
            compute[a].append((hop, var))
            compute[b].append((hop, var))
            if is_input:
                continue
            key = (value, b)
            if key not in landed:
                landed[key] = model.NewBoolVar("")
            model.AddImplication(var, landed[key])
    # Constants and graph inputs are charged on every device whose nodes read them.
    used: dict[tuple[int, int], object] = {}
    for value, consumer in zip(p.use_value.tolist(), p.use_node.tolist()):
        if p.value_producer[value] >= 0:
            continue
        for k, d in enumerate(cand):
            key = (value, d)
            if key not in used:
                used[key] = model.NewBoolVar("")
            model.AddImplication(x[consumer][k], used[key])
    for (value, d), var in list(landed.items()) + list(used.items()):
        memory[d].append((int(round(float(p.value_bytes[value]) * ppm[d])), var))
    for d in range(num_devices):
        if memory[d] and memory_constraint:
            model.Add(sum(c * v for c, v in memory[d]) <= 1_000_000)
    compute = [t for d, t in enumerate(compute) if t]
    memory = [t for t in memory if t]
    return compute, memory


def _break_symmetry(ctx: PlacementContext, model, x) -> None:  # type: ignore[no-untyped-def]
    """Identical candidates with identical routes between all pairs: node 0 takes the first."""
    cand = ctx.candidates
    if cand.size < 2:
        return
    type_of = ctx.problem.device_type_of[cand]
    sub_lat = ctx.route_latency[np.ix_(cand, cand)][~np.eye(cand.size, dtype=bool)]
    sub_inv = ctx.route_inv_bw[np.ix_(cand, cand)][~np.eye(cand.size, dtype=bool)]
    same_memory = np.allclose(ctx.capacity[cand], ctx.capacity[cand[0]])
    if (type_of == type_of[0]).all() and np.ptp(sub_lat) == 0 and np.ptp(sub_inv) == 0 and same_memory:
        model.Add(x[0][0] == 1)


@register_pass
@dataclass(frozen=True)
class CpSatPlacement(PlacementPass):
    """CP-SAT exact placement for graphs up to `max_nodes` nodes; writes devices and priorities."""

    name = "cp-sat"
    time_limit_s: float = option(30.0, "solver time limit; past it the best placement found is kept")
    max_nodes: int = option(60, "largest graph accepted (the model grows with nodes x devices^2)")
    workers: int = option(1, "CP-SAT search workers (1 is deterministic)")
    memory_constraint: bool = option(True, "keep every device within capacity (conservative memory model)")

    def assign(self, ctx: PlacementContextBase) -> np.ndarray:
        from passes.placement.profiled_context import ProfiledPlacementContext

        if isinstance(ctx, ProfiledPlacementContext):
            # Profiled workloads: the paper's cost models (cp_sat_profiled), classes as the
            # variables, the ideal DP's placement as the hint; no size limit, the time limit rules.
            from passes.placement.cp_sat_profiled import solve_profiled_placement
            from passes.placement.dp import profiled_dp

            hint = profiled_dp(ctx, seed=self.seed).device
            device, optimal = solve_profiled_placement(
                ctx, hint=hint, time_limit_s=self.time_limit_s, workers=self.workers, seed=self.seed,
            )
            ctx.extras["cp_sat_optimal"] = optimal
            # Stopped early, the solver can return worse than its hint (or differ by rounding):
            # keep the better of the two under the exact model (not a counted search step).
            return device if ctx._objective(device) <= ctx._objective(hint) else hint
        assert isinstance(ctx, PlacementContext)
        if ctx.num_nodes > self.max_nodes:
            raise PlacementError(
                f"cp-sat places graphs of at most {self.max_nodes} nodes exactly; this one has {ctx.num_nodes} "
                "(raise max-nodes, or use sa / m-sct)",
                field="max_nodes",
            )
        hint = None
        if ctx.objective != "latency":
            from passes.placement.dp import segment_dp

            # The contiguous-split DP is a good max-load placement to start from.
            hint = segment_dp(ctx, np.arange(ctx.num_nodes))[0]
        solution = solve_placement(
            ctx,
            time_limit_s=self.time_limit_s,
            workers=self.workers,
            memory_constraint=self.memory_constraint,
            seed=self.seed,
            hint=hint,
        )
        if ctx.objective == "latency":
            ctx.priority = float(solution.start.max(initial=0)) - solution.start.astype(np.float64)
        ctx.extras["cp_sat"] = solution
        return solution.device
