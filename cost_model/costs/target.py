"""The `Target`: what the graph is optimized for, resolved once by the driver.

A target is the device topology, the kernel cost source and the objective. The driver (CLI,
Python API, `optimize`, an integration) builds one and the `PassManager` hands it to every pass
(`passes.infra.PassContext`), so no pass parses a device spec of its own. `given` records which
fields were chosen explicitly (by the driver or by a pass option); a pass option that contradicts
a given field is an error naming both (`passes.infra.context.resolve_pipeline_target`).

Device specs: a topology preset, the `NxGPU` short form (`4xV100`), a YAML/JSON file (see
`cost_model.devices.loader`), or `Nxhost`: N copies of this machine as measured
(`cost_model.profiling.host_topology`), the topology whose kernels `--costs profiled` describes;
its devices share one executor (forced XLA host devices are one process on the same cores).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cost_model.costs.source import COST_SOURCES, CostSourceError, KernelCostSource, make_cost_source
from cost_model.devices.spec import DeviceSpecError

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.graph import Graph

__all__ = ["DEFAULT_DEVICES", "OBJECTIVES", "TARGET_FIELDS", "Target", "resolve_topology", "same_devices"]

DEFAULT_DEVICES = "4xV100"
OBJECTIVES = ("latency", "throughput", "memory")
TARGET_FIELDS = ("devices", "costs", "objective")

_HOST_FORM = re.compile(r"^\s*(\d+)\s*[xX]\s*host\s*$", re.IGNORECASE)


@functools.lru_cache(maxsize=32)
def _cached_topology(spec: str) -> Topology:
    host = _HOST_FORM.match(spec)
    if host:
        from cost_model.profiling.host import host_topology

        count = int(host.group(1))
        if count < 1:
            raise DeviceSpecError(f"'{spec}': a host topology needs at least one device", field="devices")
        return host_topology(count)
    from cost_model.devices.loader import load_topology

    return load_topology(spec)


def resolve_topology(devices: str | Topology) -> Topology:
    """A Topology from a device spec (module docstring); Topology objects pass through."""
    if isinstance(devices, str):
        return _cached_topology(devices.strip())
    return devices


def _devices_label(devices: str | Topology) -> str:
    return devices if isinstance(devices, str) else devices.name


def same_devices(a: str | Topology, b: str | Topology) -> bool:
    """Two device specs name the same topology (`4xv100` and `4xV100` do; so do a spec and its
    resolved Topology)."""
    if a is b:
        return True
    if isinstance(a, str) and isinstance(b, str) and a.strip().lower() == b.strip().lower():
        return True
    ta, tb = resolve_topology(a), resolve_topology(b)
    return ta is tb or (ta.name == tb.name and ta.device_names == tb.device_names)


@dataclass(frozen=True)
class Target:
    """Devices + kernel cost source + objective (module docstring)."""

    devices: Any = DEFAULT_DEVICES  # str spec or a Topology
    costs: str = "roofline"
    objective: str = "latency"
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise CostSourceError(
                f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}", field="objective"
            )
        if self.costs not in COST_SOURCES:
            raise CostSourceError(f"unknown cost source {self.costs!r}; known: {', '.join(COST_SOURCES)}", field="costs")
        unknown = set(self.given) - set(TARGET_FIELDS)
        if unknown:
            raise ValueError(f"unknown target fields in given: {sorted(unknown)}")

    @classmethod
    def resolve(cls, devices: Any = None, costs: str | None = None, objective: str | None = None) -> Target:
        """A target from the driver's options; None leaves a field at its default (not given).
        The device spec is loaded here, so a bad one fails before any work."""
        chosen = {k: v for k, v in (("devices", devices), ("costs", costs), ("objective", objective)) if v not in (None, "")}
        target = cls(**chosen, given=frozenset(chosen))
        target.topology  # noqa: B018 - resolve now: a bad spec is the driver's error
        return target

    def replace(self, **changes: Any) -> Target:
        """A copy with `changes`, which also become given."""
        given = self.given | {k for k in changes if k in TARGET_FIELDS}
        return dataclasses.replace(self, **changes, given=given)

    @property
    def topology(self) -> Topology:
        return resolve_topology(self.devices)

    @property
    def devices_label(self) -> str:
        return _devices_label(self.devices)

    def kernel_costs(self, graph: Graph) -> KernelCostSource | None:
        """The cost source for `graph` (None: roofline only)."""
        return make_cost_source(self.costs, graph, self.topology)

    def problem(self, graph: Graph) -> SimulationProblem:
        """`graph` compiled for the simulator on this target, with this target's kernel costs."""
        from cost_model.simulator.problem import SimulationProblem

        return SimulationProblem.from_graph(graph, self.topology, kernel_costs=self.kernel_costs(graph))

    def describe(self) -> str:
        return f"devices={self.devices_label} costs={self.costs} objective={self.objective}"

    def __str__(self) -> str:
        return self.describe()
