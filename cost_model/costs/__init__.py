"""The cost door: every pass, the simulator's callers and the policy get times and costs here.

- `Target` (devices + kernel cost source + objective), resolved once by the driver;
  `target.problem(graph)` compiles a graph for the simulator with the target's kernel costs.
- `KernelCostSource` and the registry of sources by name (`roofline`, `profiled`, `recorded`,
  `learned`; new ones through `register_cost_source`): node and fused-kernel times.
- `CostModel` / `SimulatorCostModel` / `Cost`: a whole graph under a set of decisions.
- What passes need of the simulator, re-exported so that no pass reaches into
  `cost_model.simulator` (which stays an implementation detail behind this door):
  `SimulationProblem`, `simulate`, `device_loads`, `throughput_objective`, the value kinds, and
  `kernel_durations` (the time of each kernel of a placement + grouping, from the target's source).
"""

from __future__ import annotations

from cost_model.costs.model import Cost, CostModel, SimulatorCostModel
from cost_model.costs.recorded import RecordedCosts  # registers "recorded"
from cost_model.costs import learned_source as _learned_source  # noqa: F401 - registers "learned"
from cost_model.costs.source import (
    COST_SOURCES,
    CostSourceError,
    KernelCostSource,
    cost_source_names,
    make_cost_source,
    register_cost_source,
)
from cost_model.costs.target import DEFAULT_DEVICES, OBJECTIVES, TARGET_FIELDS, Target, resolve_topology, same_devices
from cost_model.simulator.problem import VALUE_CONSTANT, VALUE_INPUT, VALUE_OUTPUT, SimulationProblem
from cost_model.simulator.result import SimulationResult
from cost_model.simulator.simulate import device_loads, simulate, throughput_objective
from cost_model.simulator.slack import node_slack
from cost_model.simulator.tasks import kernel_durations

__all__ = [
    "COST_SOURCES",
    "Cost",
    "CostModel",
    "CostSourceError",
    "DEFAULT_DEVICES",
    "KernelCostSource",
    "OBJECTIVES",
    "RecordedCosts",
    "SimulationProblem",
    "SimulationResult",
    "SimulatorCostModel",
    "TARGET_FIELDS",
    "Target",
    "VALUE_CONSTANT",
    "VALUE_INPUT",
    "VALUE_OUTPUT",
    "cost_source_names",
    "device_loads",
    "kernel_durations",
    "make_cost_source",
    "node_slack",
    "register_cost_source",
    "resolve_topology",
    "same_devices",
    "simulate",
    "throughput_objective",
]
