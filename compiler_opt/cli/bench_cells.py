"""Pieces of a `compiler-opt bench` cell (one workload on one topology) beyond running methods.

- The equal-time budget rule of the random searches: `sa` and `random` run after every other
  method of the cell and get `max(budget, evaluations that fit in the slowest other method's
  time)`, with one evaluation's time measured on the cell's own placement problem. A budget of a
  few hundred evaluations is meaningless on a 10k-node graph, and a fixed count is unfair either
  way: the rule gives the searches at least as much time as the method they are compared with.
  Times are CPU seconds of this process (`time.process_time`), not wall time: on a shared,
  loaded machine the wall time of a niced run depends on its neighbours, not on the method.
- The launch share of a workload's one-GPU step: how much of the simulated step on one device is
  kernel launch overhead (kernels x launch time / step time), the number that says whether a
  placement gain can be more than launch overhead spread over devices.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["EQUAL_TIME_METHODS", "LaunchShare", "equal_time_budget", "evaluation_seconds", "launch_share", "order_methods"]

logger = logging.getLogger(__name__)

# The searches whose budget the rule sets: their quality grows with the evaluations they get.
EQUAL_TIME_METHODS = ("sa", "random")


def order_methods(methods: list[str]) -> list[str]:
    """`methods` with the equal-time searches moved last (their budget needs the others' times)."""
    return [m for m in methods if m not in EQUAL_TIME_METHODS] + [m for m in methods if m in EQUAL_TIME_METHODS]


def equal_time_budget(minimum: int, slowest_other_s: float, seconds_per_evaluation: float) -> int:
    """Evaluations for a search: at least `minimum`, and enough to run as long as the slowest
    other method of the cell (`slowest_other_s`) at `seconds_per_evaluation` each."""
    if minimum < 1:
        raise ValueError(f"minimum budget must be at least 1, got {minimum}")
    if slowest_other_s <= 0 or seconds_per_evaluation <= 0 or not math.isfinite(slowest_other_s):
        return minimum
    return max(minimum, math.ceil(slowest_other_s / seconds_per_evaluation))


def evaluation_seconds(graph: Any, target: Any, *, samples: int = 5, seed: int = 0) -> float:
    """Median CPU time of one placement evaluation (what `sa`/`random` pay per step) on `graph`
    and `target`: uniformly random placements, each simulated once through a placement context."""
    from passes.placement import METHODS

    ctx = METHODS["random"](budget=samples).context(graph, target)
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(samples):
        device = ctx.candidates[rng.integers(0, ctx.candidates.size, len(ctx.groups))][ctx.group_of]
        began = time.process_time()
        ctx.evaluate(device)
        times.append(time.process_time() - began)
    return float(np.median(times))


@dataclass(frozen=True)
class LaunchShare:
    step_s: float  # simulated one-device step
    kernels: int
    launch_s: float  # kernels x the device's launch overhead
    device: str

    @property
    def share(self) -> float:
        return self.launch_s / self.step_s if self.step_s > 0 else 0.0


def launch_share(graph: Any, default_groups: np.ndarray, *, devices: str = "1xV100", costs: str = "roofline") -> LaunchShare:
    """The one-device step of `graph` under `default_groups` (fusion group per node in
    `node_order`, -1 for none) and the part of it that is kernel launch overhead."""
    from compiler_opt.cli.simulate_lib import fastest_device
    from cost_model.costs import Target, simulate
    from cost_model.decisions import Decisions

    target = Target.resolve(devices=devices, costs=costs, objective="latency")
    problem = target.problem(graph)
    gpu = fastest_device(target.topology)  # the topology also holds the host CPU
    device = np.full(problem.num_nodes, gpu, dtype=np.int64)
    priority = np.zeros(problem.num_nodes, dtype=np.float64)
    result = simulate(problem, Decisions(device, np.asarray(default_groups, dtype=np.int32), priority))
    kernels = int(result.tasks.num_kernels)
    launch = float(problem.type_launch[problem.device_type_of[gpu]]) * kernels
    return LaunchShare(float(result.step_time_s), kernels, launch, target.topology.device_names[gpu])
