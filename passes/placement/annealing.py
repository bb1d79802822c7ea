"""Simulated annealing over placements, with the simulator as the objective.

Start: every node on the fastest candidate (one evaluation), so the result is never worse than
that placement. Move: pick a co-location group uniformly (a node, or a colour class of a profiled
workload); with probability 1/2 send it to the device of one of its neighbours (keeps producer
and consumer together, the moves that pay off), else to a uniformly random other candidate. Metropolis acceptance at temperature T, cooled geometrically from
`initial_temperature` x the starting objective to 1/1000 of that over the budget. Every proposal
is one simulator evaluation; the best placement seen is returned.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from passes.infra.base import option
from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context_base import BudgetExhausted
from passes.placement.context_base import PlacementContextBase as PlacementContext

__all__ = ["SimulatedAnnealingPlacement", "anneal"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class SimulatedAnnealingPlacement(PlacementPass):
    """Simulated annealing from the fastest single device, `budget` simulator evaluations."""

    name = "sa"
    budget: int = option(500, "simulator evaluations, the start included")
    initial_temperature: float = option(0.05, "starting temperature as a fraction of the starting objective")

    @property
    def search_budget(self) -> int | None:
        return self.budget

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        start = ctx.repair(np.full(ctx.num_nodes, ctx.fastest_device, dtype=np.int64))
        return anneal(ctx, start, seed=self.seed, initial_temperature=self.initial_temperature)


def anneal(ctx: PlacementContext, start: np.ndarray, *, seed: int = 0, initial_temperature: float = 0.05) -> np.ndarray:
    """Anneal from `start` until the context's budget is spent; the best placement seen."""
    rng = np.random.default_rng(seed)
    cand = ctx.candidates
    groups = ctx.groups
    choices = ctx.group_choices
    neighbours = [[m for n in members.tolist() for m in ctx.preds[n] + ctx.succs[n]] for members in groups]
    current = start.copy()
    try:
        current_value = ctx.evaluate(current)
    except BudgetExhausted:
        return current
    best, best_value = current.copy(), current_value
    steps = max((ctx.remaining or 1), 1)
    t0 = max(initial_temperature * current_value, 1e-12)
    cooling = (1e-3) ** (1.0 / steps)
    temperature = t0
    if cand.size < 2 or (choices is not None and all(c.size < 2 for c in choices)):
        return best
    try:
        while True:
            group = int(rng.integers(len(groups)))
            node = groups[group]
            old = int(current[node[0]])
            near = neighbours[group]
            options = cand if choices is None else choices[group]
            if options.size < 2 and options[0] == old:
                continue  # nowhere else to go
            if near and rng.random() < 0.5:
                new = int(current[near[int(rng.integers(len(near)))]])
            else:
                new = int(options[int(rng.integers(options.size))])
            if new == old or new not in options:  # pick another candidate so every evaluation tests a change
                others = options[options != old]
                new = int(others[int(rng.integers(others.size))])
            current[node] = new
            value = ctx.evaluate(current)
            delta = value - current_value
            if delta <= 0 or rng.random() < math.exp(-delta / temperature):
                current_value = value
                if value < best_value:
                    best, best_value = current.copy(), value
            else:
                current[node] = old
            temperature *= cooling
    except BudgetExhausted:
        pass
    logger.debug("sa: best %.6g after %d evaluations", best_value, ctx.evaluations)
    return best
