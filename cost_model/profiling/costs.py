"""`ProfiledCosts`: measured kernel times as the simulator's cost table for this machine's devices.

    costs = ProfiledCosts(Profiler(XlaBackend()))
    problem = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)
    simulate(problem, decisions)      # cpu kernels: measured; other device types: roofline

It answers for the device types whose `kind` is in `device_kinds` (default: "cpu", i.e. the host
the profiler runs on) and leaves NaN / the roofline default for the rest. Single nodes are
profiled when the problem is built; a fused group is profiled the first time a simulation meets
it (`on_miss="measure"`, one batch per simulation) or, with `on_miss="estimate"`, estimated from
its members' measured times: the sum of their times minus one dispatch overhead per extra member
(fusion saves launches; it is not credited with the memory traffic it saves, so this errs high).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np

from cost_model.profiling.profiler import Profiler

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem

__all__ = ["ProfiledCosts"]

logger = logging.getLogger(__name__)


class ProfiledCosts:
    """A `KernelCostSource` (the cost door, `cost_model.costs`) backed by a `Profiler`."""

    def __init__(
        self,
        profiler: Profiler,
        *,
        device_kinds: Sequence[str] = ("cpu",),
        statistic: str = "min",
        on_miss: str = "measure",
        dispatch_overhead_s: float | None = None,
    ) -> None:
        if statistic not in ("min", "median"):
            raise ValueError(f"statistic must be 'min' or 'median', got {statistic!r}")
        if on_miss not in ("measure", "estimate"):
            raise ValueError(f"on_miss must be 'measure' or 'estimate', got {on_miss!r}")
        self.profiler = profiler
        self.device_kinds = tuple(device_kinds)
        self.statistic = statistic
        self.on_miss = on_miss
        self.dispatch_overhead_s = dispatch_overhead_s

    def _value(self, measurement: object) -> float:
        return measurement.min_s if self.statistic == "min" else measurement.median_s  # type: ignore[attr-defined]

    def _columns(self, problem: SimulationProblem) -> np.ndarray:
        return np.array([t.kind in self.device_kinds for t in problem.device_types], dtype=bool)

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        times = np.full((problem.num_nodes, len(problem.device_types)), np.nan)
        columns = self._columns(problem)
        if not columns.any() or not problem.nodes:
            return times
        graph = problem.nodes[0].graph
        measured = self.profiler.profile_groups(graph, [[n] for n in problem.nodes])  # type: ignore[arg-type]
        single = np.array([self._value(m) for m in measured], dtype=np.float64)
        times[:, columns] = single[:, None]
        problem._cache["profiled_single"] = single
        return times

    def kernel_times(
        self,
        problem: SimulationProblem,
        kernel_of_node: np.ndarray,
        kernel_size: np.ndarray,
        kernel_type: np.ndarray,
        default: np.ndarray,
    ) -> np.ndarray:
        out = np.array(default, dtype=np.float64, copy=True)
        wanted = np.flatnonzero((kernel_size > 1) & self._columns(problem)[kernel_type])
        if not wanted.size:
            return out
        order = np.argsort(kernel_of_node, kind="stable")
        starts = np.zeros(kernel_size.size + 1, dtype=np.int64)
        np.cumsum(kernel_size, out=starts[1:])
        known: dict[tuple[int, ...], float] = problem._cache.setdefault("profiled_groups", {})
        missing: dict[tuple[int, ...], None] = {}
        members_of = {}
        for k in wanted.tolist():
            members = tuple(order[starts[k] : starts[k + 1]].tolist())
            members_of[k] = members
            if members not in known:
                missing.setdefault(members)
        if missing:
            self._fill(problem, list(missing), known)
        for k, members in members_of.items():
            out[k] = known[members]
        return out

    def _fill(self, problem: SimulationProblem, groups: list[tuple[int, ...]], known: dict[tuple[int, ...], float]) -> None:
        if self.on_miss == "estimate":
            single = problem._cache.get("profiled_single")
            if single is None:
                single = self.node_times(problem)[:, self._columns(problem)][:, 0]
            overhead = self.dispatch_overhead_s if self.dispatch_overhead_s is not None else float(single.min())
            for members in groups:
                total = float(single[list(members)].sum())
                known[members] = max(total - overhead * (len(members) - 1), float(single[list(members)].max()))
            return
        graph = problem.nodes[0].graph
        nodes = problem.nodes
        measured = self.profiler.profile_groups(graph, [[nodes[i] for i in g] for g in groups])  # type: ignore[arg-type]
        for members, measurement in zip(groups, measured):
            known[members] = self._value(measurement)
        logger.debug("profiled %d fused groups", len(groups))
