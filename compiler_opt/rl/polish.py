"""Polish: a short local search from GO's best answer, scored as the environment scores it.

GO's episodes sample whole-graph decisions; the last few percent usually hide in single-node
moves that a sampled episode rarely makes alone (RESULTS.md h5: every cell GO lost was lost to
fusion-aware local search, by 0.1-10.7%). So a search run (fine-tune, GO-one) ends with the
project's own iterated local search (`passes.placement.local_search`, what `dp-ls` runs) started
from the best answer found, on a `PlacementContext` over the environment's own simulation
problem. Every evaluation keeps the answer's fusion groups and priorities (the policy's joint
decisions, or the framework's default fusion for a classical answer) within each device, exactly
as `GraphEnvironment.score_decisions` would score the moved placement, so the search optimises the
step the answer is judged by. It stops at its CPU-second share (`TrainConfig.polish_fraction` of
the run's budget) or evaluation cap, and its result replaces the answer only when it is faster.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cost_model.decisions import DecisionError, Decisions
from passes.placement.context import PlacementContext
from passes.placement.context_base import BudgetExhausted

if TYPE_CHECKING:
    from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment

__all__ = ["Polished", "polish"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Polished:
    decisions: Decisions  # the polished answer (the start's when nothing better was found)
    score: EpisodeScore
    start_step_s: float
    evaluations: int
    cpu_seconds: float

    @property
    def improved(self) -> bool:
        return self.score.step_time_s < self.start_step_s


class _PolishContext(PlacementContext):
    """The environment's problem as a placement context with a CPU deadline; decisions the
    simulator rejects score +inf instead of raising (a search step, not a user error)."""

    def __init__(self, env: GraphEnvironment, base: Decisions, *, deadline: float, evaluations: int | None) -> None:
        super().__init__(env.problem, objective="latency", budget=evaluations, base=base, fuse_within_device=True)
        self.deadline = deadline

    def _count(self) -> None:
        if time.process_time() >= self.deadline:
            raise BudgetExhausted("the polish's CPU seconds are spent", field="polish_fraction")
        super()._count()

    def evaluate_key(self, device: np.ndarray) -> tuple[float, ...]:
        try:
            return super().evaluate_key(device)
        except DecisionError:
            return (math.inf,)


def _base(env: GraphEnvironment, start: Decisions) -> Decisions:
    """The groups and priorities every moved placement keeps within each device: the framework's
    whole default groups when the answer is the default fusion under its placement (a group the
    placement split fuses again once its members share a device), else the answer's own."""
    groups = np.asarray(start.fusion_group)
    default = env.default_groups
    if default is not None and np.array_equal(groups, env.default_fusion(np.asarray(start.device))):
        groups = default
    return Decisions(np.asarray(start.device), np.asarray(groups, dtype=np.int32), np.asarray(start.priority, dtype=np.float64))


def polish(
    env: GraphEnvironment, start: Decisions, start_score: EpisodeScore, *, cpu_seconds: float, evaluations: int | None = None, seed: int = 0
) -> Polished:
    """Iterated local search from `start` for at most `cpu_seconds` (0: no time limit) and
    `evaluations` simulations (None: no cap; one of the two must bound it)."""
    from passes.placement.local_search import local_search

    if cpu_seconds <= 0 and evaluations is None:
        raise ValueError("polish needs a CPU-second or an evaluation bound")
    began = time.process_time()
    base = _base(env, start)
    ctx = _PolishContext(env, base, deadline=began + cpu_seconds if cpu_seconds > 0 else math.inf, evaluations=evaluations)
    device = local_search(ctx, np.asarray(start.device, dtype=np.int64), seed=seed)
    decisions, score = start, start_score
    if not np.array_equal(device, start.device):
        candidate = ctx.decisions(device)
        candidate = Decisions(np.asarray(candidate.device, dtype=np.int32), candidate.fusion_group, candidate.priority)
        moved = env.score_decisions(candidate)
        if not (moved.oom or moved.invalid) and moved.step_time_s < start_score.step_time_s:
            decisions, score = candidate, moved
    spent = time.process_time() - began
    logger.info(
        "%s: polish %.4g -> %.4g s in %d evaluations (%.1f CPU s)",
        env.label, start_score.step_time_s, score.step_time_s, ctx.evaluations, spent,
    )
    return Polished(decisions, score, start_score.step_time_s, ctx.evaluations, spent)
