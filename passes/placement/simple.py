"""Reference placements: one device, round-robin, capacity-weighted hashing, random search."""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import numpy as np

from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context_base import BudgetExhausted
from passes.placement.context_base import PlacementContextBase as PlacementContext

__all__ = ["HashPlacement", "RandomPlacement", "RoundRobinPlacement", "SingleDevicePlacement"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class SingleDevicePlacement(PlacementPass):
    """Everything on one device: the candidate with the best objective among those whose
    simulated peak memory fits (one simulation per candidate). When none fits, the one that
    overflows least (the objective's OOM penalty grows with the overflow)."""

    name = "single-device"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        return single_device(ctx)


def single_device(ctx: PlacementContext) -> np.ndarray:
    best, best_value = None, np.inf
    # Fastest first, so ties between identical devices go to the lowest index.
    order = sorted(ctx.candidates.tolist(), key=lambda d: (float(ctx.times[:, d].sum()), d))
    for d in order:
        # Repaired: on a profiled workload, unsupported nodes go to the CPU and overflow spills.
        device = ctx.repair(np.full(ctx.num_nodes, d, dtype=np.int64))
        value = ctx.evaluate(device)
        if value < best_value:
            best, best_value = device, value
    assert best is not None
    return best


@register_pass
@dataclass(frozen=True)
class RoundRobinPlacement(PlacementPass):
    """Node i of the topological order goes to candidate i mod k."""

    name = "round-robin"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        return ctx.candidates[np.arange(ctx.num_nodes) % ctx.candidates.size]


@register_pass
@dataclass(frozen=True)
class HashPlacement(PlacementPass):
    """Hash partitioning: a stable hash of the node name (salted by the seed) picks a device with
    probability proportional to its capacity (`ctx.device_speed`: fp32 peak FLOP/s on a topology,
    so a box of equal GPUs is a uniform hash). Independent of graph structure: the classic
    no-locality baseline."""

    name = "hash"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        capacity = np.asarray(ctx.device_speed, dtype=np.float64)
        edges = np.cumsum(capacity / capacity.sum())
        salt = str(self.seed).encode()
        unit = np.array([zlib.crc32(salt + b"/" + name.encode()) / 2**32 for name in ctx.node_names])
        slot = np.minimum(np.searchsorted(edges, unit, side="right"), ctx.candidates.size - 1)
        return ctx.candidates[slot]


@register_pass
@dataclass(frozen=True)
class RandomPlacement(PlacementPass):
    """Random search: `budget` uniformly random placements over the candidates (one draw per
    co-location group, so colour classes stay together), each evaluated; the best is kept."""

    name = "random"
    budget: int = option(200, "simulator evaluations")

    @property
    def search_budget(self) -> int | None:
        return self.budget

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        best, best_value = None, np.inf
        try:
            while True:
                choices = ctx.group_choices
                if choices is None:
                    device = ctx.candidates[rng.integers(0, ctx.candidates.size, len(ctx.groups))][ctx.group_of]
                else:
                    device = np.array([c[rng.integers(c.size)] for c in choices], dtype=np.int64)[ctx.group_of]
                value = ctx.evaluate(device)
                if best is None or value < best_value:
                    best, best_value = device, value
        except BudgetExhausted:
            pass
        logger.debug("random: best %.6g after %d evaluations", best_value, ctx.evaluations)
        assert best is not None  # the budget is at least 1
        return best
