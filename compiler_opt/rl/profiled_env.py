"""GO on the profiled placement workloads (Tarnawski et al.'s JSON), scored by the paper's model.

`ProfiledEnvironment` is a `GraphEnvironment` look-alike (the trainer, rollouts and zero-shot
only use `inputs`, `decisions`, `score_decisions`, `label`, `reference_step_s`) over a
`ProfiledPlacementContext`, so GO is trained and judged by exactly the objective `dp`, `dp-ls`
and `cp-sat` optimise (max-load for throughput, the list-scheduled makespan for latency):
- **Placement only.** The paper's cost model has no fusion and no schedule to choose (a node's
  latency is profiled as it stands), so the fusion and priority heads' actions are ignored.
- **Features.** The files carry no ops or shapes, only profiled numbers, so the network sees
  them in the nearest columns of `NODE_FEATURE_NAMES` (log10 of 1 + the value): output bytes <-
  the node's send cost, input bytes <- the sum of its producers' send costs, FLOPs <- its
  accelerator latency, output elements <- its size on an accelerator; degrees and topological
  position/depth as for graphs; every node's op kind is `other`. Devices: the CPU (device 0,
  `is_cpu`) and k identical accelerators (ordinal 0..1, log memory). The pretrained checkpoint
  was trained on simulator graphs, so on these files fine-tuning is close to learning afresh:
  reported as such.
- **Masks and repair.** A supported node may use any accelerator, an unsupported one only the
  CPU (the classical methods' default, `include_cpu=False`). The sampled placement goes through
  the context's `repair` (one device per colour class, memory relief) before scoring, as every
  classical method's answer does; so every scored placement satisfies the file's constraints.
- **Reward** `-sqrt(value / reference value)` (reference: the `human-expert` heuristic on the
  same context), minus `1 + overflow` when an accelerator is over capacity.
`EpisodeScore.step_time_s` holds the objective value (the files' own time units).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from compiler_opt.policy.features import DEVICE_FEATURE_NAMES, GRAPH_FEATURE_NAMES, PolicyInputs
from compiler_opt.rl.environment import EpisodeScore
from graph_ir.features import NODE_FEATURE_NAMES, OP_KIND_INDEX, longest_depth, path_features
from graph_ir.op_kinds import OpKind
from passes.placement.context_base import OOM_PENALTY_S
from passes.placement.profiled_context import ProfiledPlacementContext

if TYPE_CHECKING:
    from cost_model.profiled import ProfiledWorkload

__all__ = ["ProfiledEnvironment", "profiled_policy_inputs"]

_COL = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}


@dataclass(frozen=True)
class _Devices:
    name: str


def profiled_policy_inputs(ctx: ProfiledPlacementContext) -> PolicyInputs:
    """GO's inputs for a profiled workload (module docstring)."""
    n, k = ctx.num_nodes, ctx.workload.accelerators
    src, dst = ctx.edge_src, ctx.edge_dst
    x = np.zeros((n, len(NODE_FEATURE_NAMES)), dtype=np.float64)
    fan_in = np.bincount(dst, minlength=n).astype(np.float64)
    fan_out = np.bincount(src, minlength=n).astype(np.float64)
    x[:, _COL["log_out_elements"]] = np.log10(1 + ctx.size)
    x[:, _COL["log_out_bytes"]] = np.log10(1 + ctx.cost)
    x[:, _COL["log_in_bytes"]] = np.log10(1 + np.bincount(dst, weights=ctx.cost[src], minlength=n))
    x[:, _COL["log_flops"]] = np.log10(1 + np.where(ctx.supported, ctx.times[:, 1], ctx.times[:, 0]))
    for column, values in (("num_inputs", fan_in), ("in_degree", fan_in), ("num_outputs", np.minimum(fan_out, 1)), ("out_degree", fan_out)):
        x[:, _COL[column]] = np.log1p(values)
    x[:, _COL["log_fan_in"]] = np.log1p(fan_in)
    x[:, _COL["log_fan_out"]] = np.log1p(fan_out)
    x[:, _COL["topo_position"]] = np.arange(n) / max(n - 1, 1)
    edges = np.stack([src, dst])
    depth = longest_depth(edges, n)
    x[:, _COL["topo_depth"]] = depth / max(depth.max(), 1)
    x[:, [_COL["topo_height"], _COL["min_depth"], _COL["min_height"]]] = path_features(edges, n)
    devices = np.zeros((k + 1, len(DEVICE_FEATURE_NAMES)), dtype=np.float32)
    devices[0, DEVICE_FEATURE_NAMES.index("is_cpu")] = 1.0
    devices[1:, DEVICE_FEATURE_NAMES.index("log_memory")] = math.log10(max(ctx.workload.memory_per_accelerator, 1.0)) - 9.0
    devices[1:, DEVICE_FEATURE_NAMES.index("ordinal")] = np.arange(k) / max(k - 1, 1)
    mask = np.zeros((n, k + 1), dtype=bool)
    mask[:, 1:] = ctx.supported[:, None]
    mask[~ctx.supported, 0] = True
    graph_x = np.array(
        [
            math.log10(max(n, 1)), math.log10(max(src.size, 1)), math.log10(1 + float(ctx.times[:, 1].sum())),
            math.log10(1 + float(ctx.size.sum())) - 9.0, math.log10(max(depth.max(), 1)), float(x[:, _COL["log_fan_out"]].mean()),
            math.log2(k + 1), 0.0,
        ],
        dtype=np.float32,
    )
    assert graph_x.size == len(GRAPH_FEATURE_NAMES)
    return PolicyInputs(
        op_kind=torch.full((n,), OP_KIND_INDEX[OpKind.OTHER], dtype=torch.int64),
        node_x=torch.from_numpy(x.astype(np.float32)),
        edge_index=torch.from_numpy(np.stack([src, dst]).astype(np.int64)),
        graph_x=torch.from_numpy(graph_x),
        device_x=torch.from_numpy(devices),
        device_mask=torch.from_numpy(mask),
        position=torch.from_numpy(x[:, _COL["topo_depth"]].astype(np.float32)),
    )


class ProfiledEnvironment:
    """A profiled workload as a GO training environment (module docstring)."""

    def __init__(self, name: str, workload: ProfiledWorkload, *, objective: str = "throughput", reference: str = "human-expert",
                 oom_penalty: float = 1.0, invalid_penalty: float = 4.0) -> None:
        self.name = name
        self.workload = workload
        self.context = ProfiledPlacementContext(workload, objective=objective)
        self.objective = objective
        self.inputs = profiled_policy_inputs(self.context)
        self.topology = _Devices(f"{workload.accelerators}acc+cpu")
        self.reference_name = reference
        self.oom_penalty = oom_penalty
        self.invalid_penalty = invalid_penalty

    @property
    def label(self) -> str:
        return f"{self.name}@{self.topology.name}"

    @functools.cached_property
    def reference_decisions(self) -> np.ndarray:
        from passes.placement import METHODS

        method = METHODS[self.reference_name](objective=self.objective)
        ctx = ProfiledPlacementContext(self.workload, objective=self.objective, budget=method.search_budget)
        return method.run(ctx, began=0.0).device

    @functools.cached_property
    def reference_step_s(self) -> float:
        return max(self.score_decisions(self.reference_decisions, with_reward=False).step_time_s, 1e-12)

    def decisions(self, actions: np.ndarray) -> np.ndarray:
        """The sampled devices, repaired to the file's constraints (colour classes, memory)."""
        return self.context.repair(np.asarray(actions)[:, 0].astype(np.int64))

    def score_decisions(self, device: np.ndarray, *, with_reward: bool = True) -> EpisodeScore:
        ctx = self.context
        value = float(ctx._objective(np.asarray(device, dtype=np.int64))[0])
        if not math.isfinite(value):
            return EpisodeScore(-self.invalid_penalty, math.inf, False, True)
        fraction = ctx.memory_used(device)[1:] / ctx.capacity[1:]
        overflow = float(np.maximum(fraction - 1.0, 0.0).max(initial=0.0))
        oom = overflow > 0
        if oom:
            value -= OOM_PENALTY_S * (1.0 + overflow)  # the context's search penalty, not the result
        if not with_reward:
            return EpisodeScore(math.nan, value, oom, False)
        reward = -math.sqrt(value / self.reference_step_s)
        if oom:
            reward -= self.oom_penalty * (1.0 + min(overflow, 4.0))
        return EpisodeScore(reward, value, oom, False)
