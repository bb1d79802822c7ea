"""Polish: a short local search from GO's best answer, then joint variants on its result.

GO's episodes sample whole-graph decisions; the last few percent usually hide in single-node
moves that a sampled episode rarely makes alone (RESULTS.md h5: every cell GO lost was lost to
fusion-aware local search, by 0.1-10.7%). So a search run (fine-tune, GO-one) ends with:
1. the project's own iterated local search (`passes.placement.local_search`, what `dp-ls` runs)
   from the answer's placement, on a `PlacementContext` over the environment's own simulation
   problem, every evaluation scored as `GraphEnvironment.score_decisions` scores a placement: the
   framework's default fusion kept within each device (a graph without a known default keeps the
   answer's groups that way) and the answer's priorities. Re-deciding the policy's merges under
   every move would cost 20x a simulation (the decoder's legality checks), so they are not;
2. the joint variants (rl/joint.py: merging beyond the default, critical-path-first priorities)
   of the searched placement, decoded as the policy's actions (none in the placement-only
   ablation).
The fastest of the answer, the searched placement and its variants is kept. Step 1 stops at its
CPU-second share (`TrainConfig.polish_fraction` of the run's budget) or evaluation cap.
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
    """What every moved placement keeps within each device: the framework's whole default groups
    (a group the placement split fuses again once its members share a device), or the answer's
    own groups on a graph without a known default; the answer's priorities."""
    groups = env.default_groups if env.default_groups is not None else np.asarray(start.fusion_group)
    return Decisions(np.asarray(start.device), np.asarray(groups, dtype=np.int32), np.asarray(start.priority, dtype=np.float64))


def polish(
    env: GraphEnvironment,
    start: Decisions,
    start_score: EpisodeScore,
    *,
    cpu_seconds: float,
    evaluations: int | None = None,
    seed: int = 0,
    fusion_levels: int = 0,
    priority_levels: int = 0,
) -> Polished:
    """Local search from `start` for at most `cpu_seconds` (0: no time limit) and `evaluations`
    simulations (None: no cap; one of the two must bound it), then the joint variants of its
    placement when `fusion_levels` (the policy's levels; 0: none) is given."""
    from compiler_opt.rl.joint import best_joint_variant
    from passes.placement.local_search import local_search

    if cpu_seconds <= 0 and evaluations is None:
        raise ValueError("polish needs a CPU-second or an evaluation bound")
    began = time.process_time()
    ctx = _PolishContext(env, _base(env, start), deadline=began + cpu_seconds if cpu_seconds > 0 else math.inf, evaluations=evaluations)
    device = local_search(ctx, np.asarray(start.device, dtype=np.int64), seed=seed)
    searched = ctx.decisions(device)
    candidate = Decisions(np.asarray(device, dtype=np.int32), searched.fusion_group, searched.priority)
    moved, variants = env.score_decisions(candidate), 0
    if fusion_levels:
        _, candidate, moved, variants = best_joint_variant(env, candidate, moved, fusion_levels=fusion_levels, priority_levels=priority_levels)
    decisions, score = start, start_score
    if not (moved.oom or moved.invalid) and moved.step_time_s < start_score.step_time_s:
        decisions, score = candidate, moved
    spent = time.process_time() - began
    logger.info(
        "%s: polish %.4g -> %.4g s in %d evaluations and %d variants (%.1f CPU s)",
        env.label, start_score.step_time_s, score.step_time_s, ctx.evaluations, variants, spent,
    )
    return Polished(decisions, score, start_score.step_time_s, ctx.evaluations, spent)
