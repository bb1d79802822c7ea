"""Rollout collection: sample episodes for a set of environments and score them.

Per environment the network encodes the graph once and draws all `samples` episodes in one
batch through the heads (`GoPolicy.sample`); each episode is decoded and simulated once.
Environments differ in node and device counts, so they are not concatenated into one tensor.
Warm start: `initial` maps an environment's label to the decisions (N, 3) its episodes edit
(seeded episodes, `GoPolicy.sample(initial=...)`); the rollout keeps them per episode for PPO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import torch

from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment

if TYPE_CHECKING:
    from compiler_opt.policy.network import GoPolicy
    from cost_model.decisions import Decisions

__all__ = ["GraphRollout", "collect_rollouts", "replay_episode"]


@dataclass
class GraphRollout:
    env: GraphEnvironment
    actions: torch.Tensor  # (T, K, N, 3)
    old_log_prob: torch.Tensor  # (K,)
    value: float
    scores: list[EpisodeScore]
    decisions: list[Decisions]  # decoded once per episode (fusion decoding is the costly part)
    old_decision_log_prob: torch.Tensor | None = None  # (T, K, N, 3): per-decision PPO ratios
    initial: torch.Tensor | None = None  # (K, N, 3): seeded episodes' first-round input; None: unseeded
    place_log_prob: torch.Tensor | None = None  # (K, N, D): each episode's last-round placement log-probabilities

    @property
    def rewards(self) -> torch.Tensor:
        return torch.tensor([s.reward for s in self.scores], dtype=torch.float32)

    def best(self) -> tuple[int, EpisodeScore]:
        """The episode to keep as an answer: valid, fitting, fastest (`EpisodeScore.rank_key`)."""
        index = min(range(len(self.scores)), key=lambda k: self.scores[k].rank_key)
        return index, self.scores[index]


def collect_rollouts(
    policy: GoPolicy,
    envs: Sequence[GraphEnvironment],
    samples: int,
    *,
    generator: torch.Generator | None = None,
    greedy_first: bool = False,
    with_reward: bool = True,
    initial: Mapping[str, torch.Tensor] | None = None,
) -> list[GraphRollout]:
    """Sample and score `samples` episodes per environment (greedy_first: episode 0 is the
    policy's most likely decision, the rest are sampled; `initial`: env label -> (N, 3)
    decisions that environment's episodes edit, module docstring)."""
    out = []
    was_training = policy.training
    policy.eval()
    try:
        for env in envs:
            start = initial.get(env.label) if initial is not None else None
            if greedy_first and samples == 1:
                sampled = policy.sample(env.inputs, 1, greedy=True, initial=start)
            else:
                sampled = policy.sample(env.inputs, samples, generator=generator, greedy_first=greedy_first, initial=start)
            actions, log_prob, per_decision, place = sampled.actions, sampled.log_prob, sampled.decision_log_prob, sampled.place_log_prob
            final = actions[-1].numpy()
            decisions = [env.decisions(final[k]) for k in range(final.shape[0])]
            scores = [env.score_decisions(d, with_reward=with_reward) for d in decisions]
            first = None if start is None else torch.as_tensor(start, dtype=torch.int64).unsqueeze(0).expand(actions.shape[1], -1, -1).clone()
            out.append(GraphRollout(env, actions, log_prob, float(sampled.value), scores, decisions, per_decision, first, place))
    finally:
        policy.train(was_training)
    return out


def replay_episode(
    policy: GoPolicy,
    rollout: GraphRollout,
    actions: torch.Tensor,
    score: EpisodeScore,
    decisions: Decisions,
    initial: torch.Tensor | None = None,
) -> None:
    """Append a stored episode (actions (T, 1, N, 3), already scored) to `rollout`, with its
    log-probabilities under the current policy as the "old" ones, so PPO starts it at ratio 1.
    Used to replay the best episode seen so far on an environment and warm-start seeds
    (self-imitation): it competes in the per-graph advantage normalisation with the freshly
    sampled ones. `initial` (N, 3): the episode's first-round input; a seeded episode joins
    only a seeded rollout and an unseeded one only an unseeded rollout."""
    if (initial is None) != (rollout.initial is None):
        raise ValueError("a replayed episode must be seeded exactly when the rollout's episodes are")
    first = None if initial is None else torch.as_tensor(initial, dtype=torch.int64).view(1, *initial.shape[-2:])
    was_training = policy.training
    policy.eval()
    try:
        with torch.no_grad():
            per_decision, _, _ = policy.evaluate_decisions(rollout.env.inputs, actions, first)
    finally:
        policy.train(was_training)
    rollout.actions = torch.cat([rollout.actions, actions], dim=1)
    rollout.old_log_prob = torch.cat([rollout.old_log_prob, per_decision.sum((0, 2, 3))])
    if rollout.old_decision_log_prob is not None:
        rollout.old_decision_log_prob = torch.cat([rollout.old_decision_log_prob, per_decision], dim=1)
    if rollout.initial is not None and first is not None:
        rollout.initial = torch.cat([rollout.initial, first])
    rollout.scores.append(score)
    rollout.decisions.append(decisions)
