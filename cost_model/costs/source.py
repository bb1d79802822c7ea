"""Kernel cost sources: where node and fused-kernel times come from, behind one protocol.

The roofline (FLOPs / peak, bytes / bandwidth, plus a launch) is the base layer the simulator
computes from the problem's arrays for every node and kernel. A `KernelCostSource` overlays
other times where it has them and leaves the roofline elsewhere (NaN from `node_times`, the given
`default` from `kernel_times`), so a source that only knows this machine's CPU still works on a
topology with GPUs.

Sources are found by name in a registry, so the driver can pick one from a string
(`--costs roofline|profiled`) and a new source plugs in with one call:

    register_cost_source("learned", lambda graph, topology: LearnedCosts.load_default(),
                         "the learned GraphSAGE kernel model")
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

import numpy as np

from graph_ir.errors import CompilerOptError

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.graph import Graph

__all__ = [
    "COST_SOURCES",
    "CostSourceEntry",
    "CostSourceError",
    "KernelCostSource",
    "cost_source_names",
    "make_cost_source",
    "register_cost_source",
]

logger = logging.getLogger(__name__)


class CostSourceError(CompilerOptError):
    """An unknown cost source name, or a source that cannot serve the graph at hand."""


@runtime_checkable
class KernelCostSource(Protocol):
    """Kernel times other than the roofline (see the module docstring)."""

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        """float64 (N, T): each node alone as a kernel on each device type, NaN where unknown."""
        ...

    def kernel_times(
        self, problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_size: np.ndarray, kernel_type: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        """float64 (K,): time of each kernel (fused groups included), `default` where unknown."""
        ...


# A factory builds the source for one graph on one topology (profiling needs the graph's format
# to pick a backend); None means "the roofline alone".
CostSourceFactory = Callable[["Graph", "Topology"], "KernelCostSource | None"]


@dataclass(frozen=True)
class CostSourceEntry:
    name: str
    factory: CostSourceFactory
    doc: str


COST_SOURCES: dict[str, CostSourceEntry] = {}


def register_cost_source(name: str, factory: CostSourceFactory, doc: str = "") -> None:
    """Make `name` selectable as a target's `costs` (and `--costs NAME` on the command line)."""
    COST_SOURCES[name] = CostSourceEntry(name, factory, doc)


def cost_source_names() -> list[str]:
    return list(COST_SOURCES)


def make_cost_source(name: str, graph: Graph, topology: Topology) -> KernelCostSource | None:
    """The source `name` for `graph` on `topology` (None: roofline only)."""
    entry = COST_SOURCES.get(name)
    if entry is None:
        raise CostSourceError(f"unknown cost source {name!r}; known: {', '.join(COST_SOURCES)}", field="costs")
    return entry.factory(graph, topology)


def _roofline(graph: Graph, topology: Topology) -> None:
    return None


def _profiled(graph: Graph, topology: Topology) -> KernelCostSource:
    from cost_model.profiling import ProfiledCosts, Profiler, backend_for

    costs = ProfiledCosts(Profiler(backend_for(graph)))
    described = [d.name for d in topology.devices if d.kind in costs.device_kinds]
    if not described:
        logger.warning(
            "profiled costs describe only this machine's %s devices; topology %s has none, so every "
            "kernel keeps its roofline time (use a host topology such as '2xhost' to simulate with measured times)",
            "/".join(costs.device_kinds),
            topology.name,
        )
    return costs


register_cost_source("roofline", _roofline, "FLOPs / peak and bytes / bandwidth per kernel, plus a launch (the base layer)")
register_cost_source(
    "profiled",
    _profiled,
    "each op and fused group compiled and timed on this machine (XLA for HLO, onnxruntime for ONNX), "
    "for the topology's cpu devices; SQLite-cached",
)
