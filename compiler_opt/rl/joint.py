"""Joint variants of a placement: the same devices with fusion and scheduling decisions on top.

A classical answer carries the framework's default fusion and no priorities; the policy's action
space holds more: fusion levels 2 and up merge beyond the default groups (`fuse-by-priority`
under the decoder's legality rules) and priority levels order each device's ready kernels. Two
whole-graph settings of those heads are cheap to try and often much better (RESULTS.md h6: merging
beyond the default alone is 0.70-0.99x the default's step on the suite's training graphs):
- fusion: every node at the first merging level ("merge"), or the default kept ("keep");
- priority: none, or each node's bottom level (the HEFT upward rank, placement-free) in
  `priority_levels` equal-count bins ("rank": the critical path first).
They are policy actions, so a variant is an episode like any other: the warm start offers the
best seed's variants as seeds (replayed in PPO), and the polish tries them on its final
placement. The placement-only ablation ignores these heads and gets no variants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment
    from cost_model.decisions import Decisions

__all__ = ["best_joint_variant", "joint_variants", "rank_priority_levels"]


def rank_priority_levels(env: GraphEnvironment, priority_levels: int) -> np.ndarray:
    """(N,) int64 priority levels 0..priority_levels-1 by bottom level (highest: longest path to a sink)."""
    level = env.bottom_level
    order = np.argsort(level, kind="stable")
    ranks = np.empty(level.size, dtype=np.int64)
    ranks[order] = np.arange(level.size)
    return (ranks * priority_levels) // max(level.size, 1)


def joint_variants(env: GraphEnvironment, device: np.ndarray, *, fusion_levels: int, priority_levels: int) -> list[tuple[str, np.ndarray]]:
    """(name, actions (N, 3) int64) variants of placement `device`; none in the placement-only
    ablation. With the relative fusion reading (a known default fusion) "keep" is level 1 and
    "merge" level 2; without one (absolute `fuse-by-priority`) "merge" is the top level and the
    default cannot be kept by level, so only merging variants are made."""
    if env.placement_only:
        return []
    n = env.problem.num_nodes
    device = np.asarray(device, dtype=np.int64)
    relative = env.default_groups is not None
    fusions = {"merge": min(2, fusion_levels - 1) if relative else fusion_levels - 1}
    if relative:
        fusions["keep"] = 1
    priorities = {"flat": np.zeros(n, dtype=np.int64)}
    if priority_levels > 1:
        priorities["rank"] = rank_priority_levels(env, priority_levels)
    out = []
    for fname, level in fusions.items():
        if relative and level < 2 and fname == "merge":
            continue  # two fusion levels only: nothing merges beyond the default
        for pname, prio in priorities.items():
            if fname == "keep" and pname == "flat":
                continue  # the classical answer itself
            actions = np.stack([device, np.full(n, level, dtype=np.int64), prio], axis=1)
            out.append((f"{fname}+{pname}", actions))
    return out


def best_joint_variant(
    env: GraphEnvironment, decisions: Decisions, score: EpisodeScore, *, fusion_levels: int, priority_levels: int
) -> tuple[str, Decisions, EpisodeScore, int]:
    """The fastest fitting of `decisions` (scored `score`) and its joint variants, decoded as the
    policy's actions: (variant name, "" for `decisions` itself; decisions; score; variants tried)."""
    best = ("", decisions, score)
    variants = joint_variants(env, decisions.device, fusion_levels=fusion_levels, priority_levels=priority_levels)
    for name, actions in variants:
        candidate = env.decisions(actions)
        moved = env.score_decisions(candidate)
        fits = not (best[2].oom or best[2].invalid)
        if not (moved.oom or moved.invalid) and (not fits or moved.step_time_s < best[2].step_time_s):
            best = (name, candidate, moved)
    return (*best, len(variants))
