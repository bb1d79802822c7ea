"""One calibration study of one workload: random configurations, run for real and simulated.

`calibrate_workload` draws configurations (`calibration.random_configuration`), compiles their
kernels, then times in *one* interleaved pool both every distinct kernel alone (the profiled
cost table) and every configuration's whole step, so both see the same background load of a
shared machine; then it simulates each configuration with three kernel-cost sources:
- `roofline-preset`: the shipped `cpu` preset (a 28-core Xeon 8280) as every device;
- `roofline-host`: the roofline with this machine's measured numbers (`host.measure_host_device`);
- `profiled`: `ProfiledCosts`, the measured kernels, on the measured host topology.
All three share the measured host-to-host link (memcpy between forced host devices).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost_model.devices.loader import load_device
from cost_model.devices.spec import DeviceSpec
from cost_model.devices.topology import Topology
from cost_model.profiling.calibration import GroupExecutor, Workload, correlations, kernel_groups, random_configuration
from cost_model.profiling.costs import ProfiledCosts
from cost_model.profiling.host import host_topology
from cost_model.profiling.profiler import Profiler
from cost_model.profiling.timing import time_interleaved
from cost_model.profiling.xla_backend import XlaBackend
from cost_model.simulator.problem import SimulationProblem
from cost_model.simulator.simulate import simulate

__all__ = ["CalibrationResult", "calibrate_workload", "COST_SOURCES"]

logger = logging.getLogger(__name__)

COST_SOURCES = ("roofline-preset", "roofline-host", "profiled")


@dataclass
class CalibrationResult:
    workload: str
    num_nodes: int
    configs: list[dict[str, Any]] = field(default_factory=list)  # one row per configuration
    correlation: dict[str, dict[str, float]] = field(default_factory=dict)  # source -> spearman/pearson
    seconds: dict[str, float] = field(default_factory=dict)

    def measured(self) -> np.ndarray:
        return np.array([c["measured_min_s"] for c in self.configs])

    def simulated(self, source: str) -> np.ndarray:
        return np.array([c["simulated_s"][source] for c in self.configs])


def _preset_topology(host: Topology) -> Topology:
    preset = load_device("cpu")
    return Topology(f"{host.num_devices}xcpu-preset", [preset.renamed(d.name) for d in host.devices], host.links)


def calibrate_workload(
    workload: Workload,
    profiler: Profiler,
    *,
    num_configs: int = 30,
    num_devices: int = 2,
    multi_device_share: float = 0.3,
    repeats: int = 30,
    warmup: int = 3,
    seed: int = 0,
    host: DeviceSpec | None = None,
) -> CalibrationResult:
    """Measure and simulate `num_configs` random configurations of `workload` (see module doc).

    A share `multi_device_share` of the configurations spreads groups over `num_devices` host
    devices (XLA must have been started with that many); the rest run on device 0.
    """
    began = time.perf_counter()
    rng = np.random.default_rng(seed)
    graph = workload.graph
    topo_host = host_topology(num_devices, device=host)
    topo_preset = _preset_topology(topo_host)
    problems = {
        "roofline-preset": SimulationProblem.from_graph(graph, topo_preset),
        "roofline-host": SimulationProblem.from_graph(graph, topo_host),
    }
    nodes = problems["roofline-host"].nodes
    configs = []
    for index in range(num_configs):
        devices = num_devices if num_devices > 1 and rng.random() < multi_device_share else 1
        configs.append(random_configuration(problems["roofline-host"], rng, num_devices=devices))
    backend = profiler.backend if isinstance(profiler.backend, XlaBackend) else None
    executor = GroupExecutor(graph, nodes, seed=seed, backend=backend)
    plans = [executor.plan(c) for c in configs]
    compiled = time.perf_counter()

    # Every kernel any configuration runs, plus every node alone (the unfused table).
    groups: dict[tuple[int, ...], None] = {(i,): None for i in range(len(nodes))}
    for decisions in configs:
        for members in kernel_groups(decisions)[0]:
            groups.setdefault(tuple(members))
    todo = profiler.pending(graph, [[nodes[i] for i in g] for g in groups])
    runners = profiler.prepare(graph, todo)
    timed = time_interleaved(runners + [p.run for p in plans], repeats=repeats, warmup=warmup, seed=seed)
    profiler.store(todo, timed[: len(runners)])
    steps = timed[len(runners) :]
    measured_at = time.perf_counter()

    problems["profiled"] = SimulationProblem.from_graph(graph, topo_host, kernel_costs=ProfiledCosts(profiler))
    result = CalibrationResult(workload.name, len(nodes))
    for decisions, step in zip(configs, steps):
        kernels, kernel_device = kernel_groups(decisions)
        result.configs.append(
            {
                "kernels": len(kernels),
                "devices_used": len(set(kernel_device)),
                "measured_min_s": step.min_s,
                "measured_median_s": step.median_s,
                "simulated_s": {name: simulate(p, decisions).step_time_s for name, p in problems.items()},
            }
        )
    measured = result.measured()
    for source in COST_SOURCES:
        result.correlation[source] = correlations(result.simulated(source), measured)
    result.seconds = {
        "compile": compiled - began,
        "measure": measured_at - compiled,
        "simulate": time.perf_counter() - measured_at,
        "kernels_compiled": float(len(executor.kernels)),
        "profiled_signatures": float(len(runners)),
    }
    return result
