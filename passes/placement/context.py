"""The graph implementation of `PlacementContextBase` (context_base.py, the interface every method
programs against; `ProfiledPlacementContext` is the other one): the problem as arrays, the
simulator as the objective, and an evaluation counter that enforces a search budget.

`PlacementContext` wraps one `SimulationProblem` built through the cost door (`Target.problem`:
the target's devices and kernel cost source; node order = `node_order(graph)`, so index order is
topological) and answers, without simulating:
- `times[n, d]`: roofline time of node n alone on device d (launch included);
- node-level edges `edge_src -> edge_dst` with the bytes flowing along them, `preds`/`succs`;
- `comm_time(nbytes, src, dst)`: store-and-forward time along the topology's route on idle links;
- `MemoryTracker`: a conservative per-device memory estimate (see its docstring).
and, through the simulator, `evaluate(device)`: the objective of a full placement. Every call of
`simulate`/`evaluate` counts; when a budget is set, the call past it raises `BudgetExhausted`, so a
search method cannot overspend even by mistake.

Objectives (lower is better): `latency` = simulated step time; `throughput` = the pipelined
max device load (`throughput_objective`); `memory` = the largest peak-memory fraction of
capacity over devices. A placement that runs out of memory in the simulator scores
`OOM_PENALTY_S` plus its overflow fraction on top, so any fitting placement beats any OOM one.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

import numpy as np

from cost_model.costs import VALUE_CONSTANT, SimulationProblem, Target, device_loads, simulate
from cost_model.decisions import Decisions
from graph_ir.errors import CompilerOptError
from passes.fusion.defaults import colocated_groups
from passes.placement.context_base import (
    OBJECTIVES,
    OOM_PENALTY_S,
    BudgetExhausted,
    PlacementContextBase,
    PlacementError,
)

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.costs import SimulationResult
    from graph_ir.graph import Graph

__all__ = [
    "OBJECTIVES",
    "OOM_PENALTY_S",
    "BudgetExhausted",
    "MemoryTracker",
    "PlacementContext",
    "PlacementError",
]

logger = logging.getLogger(__name__)

class PlacementContext(PlacementContextBase):
    """One graph on one topology, prepared for placement methods (see the module docstring)."""

    def __init__(
        self,
        problem: SimulationProblem,
        *,
        objective: str = "latency",
        budget: int | None = None,
        base: Decisions | None = None,
        include_cpu: bool = False,
        fuse_within_device: bool = False,
    ) -> None:
        self._init_common(objective, budget)
        self.problem = problem
        # Frameworks fuse after placement, within each device: with this set, every evaluation
        # scores the base fusion groups kept where all members share a device (a split group runs
        # unfused), so searches optimise the fused step the framework would run.
        self.fuse_within_device = fuse_within_device
        self.topology = problem.topology
        n = problem.num_nodes
        self.base = base if base is not None else Decisions.default(n)
        # Hosts are orders of magnitude slower than accelerators; placement papers place on the
        # accelerators only, so the CPU is a candidate only when asked or when it is all there is.
        devices = self.topology.devices
        accelerators = [i for i, d in enumerate(devices) if d.kind != "cpu"]
        self.candidates = np.asarray(
            accelerators if accelerators and not include_cpu else range(len(devices)), dtype=np.int64
        )
        self.times = problem.node_time[:, problem.device_type_of]  # (N, D)
        self.capacity = np.array([d.memory_bytes for d in devices], dtype=np.float64)
        self.allowed = np.zeros((n, len(devices)), dtype=bool)
        self.allowed[:, self.candidates] = True
        self.node_names = [node.name or f"#{i}" for i, node in enumerate(problem.nodes)]
        self.device_names = list(self.topology.device_names)
        self._edges()
        self._routes()

    @classmethod
    def from_graph(cls, graph: Graph, target: Target | Topology, **kwargs: object) -> PlacementContext:
        """The context of `graph` on a target (its devices and kernel cost source) or a bare
        topology (roofline costs)."""
        if not isinstance(target, Target):
            target = Target(devices=target)
        problem = target.problem(graph)
        # Devices the input names that this target lacks ("/device:GPU:*", another cluster's
        # "/job:worker/..."): the pass decides every device anyway, so they count as unplaced.
        base = Decisions.from_graph(graph, problem.topology, nodes=problem.nodes, unknown_devices="default")
        return cls(problem, base=base, **kwargs)  # type: ignore[arg-type]

    # -- static structure ------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self.problem.num_nodes

    @property
    def num_devices(self) -> int:
        return self.problem.num_devices

    @functools.cached_property
    def device_speed(self) -> np.ndarray:
        """fp32 peak FLOP/s of each candidate (the capacity a hash spreads nodes by)."""
        devices = self.topology.devices
        return np.array([devices[d].peak("fp32") for d in self.candidates.tolist()], dtype=np.float64)

    def _edges(self) -> None:
        p = self.problem
        n = p.num_nodes
        prod = p.use_producer
        mask = prod >= 0
        key = prod[mask] * max(n, 1) + p.use_node[mask]
        keys, inverse = np.unique(key, return_inverse=True)
        self.edge_src = keys // max(n, 1)
        self.edge_dst = keys % max(n, 1)
        self.edge_bytes = np.bincount(
            inverse.reshape(-1), weights=p.value_bytes[p.use_value[mask]], minlength=keys.size
        ).astype(np.float64)
        self._adjacency()
        produced = p.value_producer >= 0
        self.out_bytes = np.bincount(
            p.value_producer[produced], weights=p.value_bytes[produced], minlength=n
        ).astype(np.float64)

    def _routes(self) -> None:
        topo = self.topology
        count = topo.num_devices
        self.route_latency = np.zeros((count, count))
        self.route_inv_bw = np.zeros((count, count))
        self.route_landings: list[list[tuple[int, ...]]] = [[() for _ in range(count)] for _ in range(count)]
        for a in range(count):
            for b in range(count):
                if a == b:
                    continue
                try:
                    links = topo.link(a, b)
                except CompilerOptError:
                    self.route_latency[a, b] = np.inf
                    continue
                self.route_latency[a, b] = sum(l.latency_s for l in links)
                self.route_inv_bw[a, b] = sum(1.0 / l.bandwidth for l in links)
                self.route_landings[a][b] = tuple(topo.device_index(l.dst) for l in links)

    # -- evaluation ------------------------------------------------------------------------------
    def decisions(self, device: np.ndarray) -> Decisions:
        """The context's fusion groups and priorities with `device` as the placement (groups split
        across devices unfused when `fuse_within_device`)."""
        device = np.asarray(device)
        groups = self.base.fusion_group
        if self.fuse_within_device:
            groups = colocated_groups(groups, device)
        return Decisions(device, groups, self.base.priority)

    def simulate(self, device: np.ndarray) -> SimulationResult:
        """One counted simulation of the placement."""
        self._count()
        self.last_result = simulate(self.problem, self.decisions(device))
        return self.last_result

    def score(self, result: SimulationResult, device: np.ndarray) -> float:
        """The objective of `device`, simulated as `result` (lower is better; OOM is penalised)."""
        if self.objective == "latency":
            value = result.step_time_s
        elif self.objective == "throughput":
            loads = device_loads(self.problem, self.decisions(device))
            self.last_loads = loads
            value = float(loads.max()) if loads.size else 0.0
        else:
            value = float((result.peak_memory_bytes / self.capacity).max())
        overflow = float(np.maximum(result.peak_memory_bytes / self.capacity - 1.0, 0.0).max())
        if overflow > 0:
            value += OOM_PENALTY_S * (1.0 + overflow)
        return value

    def evaluate_key(self, device: np.ndarray) -> tuple[float, ...]:
        """(objective,) of a placement through one counted simulation."""
        return (self.score(self.simulate(device), device),)

    def memory_tracker(self) -> MemoryTracker:
        return MemoryTracker(self)


class MemoryTracker:
    """Incremental, conservative per-device memory as nodes are placed in topological order.

    A device is charged, once each, for: the outputs of every node placed on it, every constant
    its nodes read, every graph input its nodes read, and every value that lands on it in a
    transfer (each hop's destination). That is the total ever allocated there, so it bounds the
    simulator's peak from above: a placement that keeps every charge within capacity cannot run
    out of memory in the simulator. It is also Baechi's memory model (training keeps forward
    activations alive), which is why the m-* methods use it.
    """

    def __init__(self, ctx: PlacementContext) -> None:
        self.ctx = ctx
        p = ctx.problem
        self.used = np.zeros(ctx.num_devices, dtype=np.float64)
        self.device = np.full(ctx.num_nodes, -1, dtype=np.int64)
        self.overflows = 0  # nodes placed over capacity (warned once per tracker, then counted)
        self._held: set[tuple[int, int]] = set()  # (value, device)
        uses: list[list[int]] = [[] for _ in range(p.num_nodes)]
        for value, node in zip(p.use_value.tolist(), p.use_node.tolist()):
            uses[node].append(value)
        self._uses = uses
        self._producer = p.value_producer.tolist()
        self._const = (p.value_kind == VALUE_CONSTANT).tolist()
        self._bytes = p.value_bytes.astype(np.float64).tolist()

    def _charges(self, node: int, device: int) -> list[tuple[int, int]]:
        """(value, device) pairs newly held if `node` runs on `device`."""
        out = []
        for value in self._uses[node]:
            producer = self._producer[value]
            if producer < 0:
                landings: tuple[int, ...] = (device,)
            else:
                source = int(self.device[producer])
                landings = self.ctx.route_landings[source][device] if source != device else ()
            for landing in landings:
                if (value, landing) not in self._held:
                    out.append((value, landing))
        return out

    def extra(self, node: int, device: int) -> np.ndarray:
        """Per-device bytes added by placing `node` on `device`."""
        add = np.zeros(self.ctx.num_devices)
        add[device] += self.ctx.out_bytes[node]
        for value, landing in set(self._charges(node, device)):
            add[landing] += self._bytes[value]
        return add

    def fits(self, node: int, device: int) -> bool:
        return bool(np.all(self.used + self.extra(node, device) <= self.ctx.capacity))

    def place(self, node: int, device: int) -> None:
        self.used += self.extra(node, device)
        self._held.update(self._charges(node, device))
        self.device[node] = device
