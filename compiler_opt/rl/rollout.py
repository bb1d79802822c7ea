"""Rollout collection: sample episodes for a set of environments and score them.

Per environment the network encodes the graph once and draws all `samples` episodes in one
batch through the heads (`GoPolicy.sample`); each episode is decoded and simulated once.
Environments differ in node and device counts, so they are not concatenated into one tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

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
) -> list[GraphRollout]:
    """Sample and score `samples` episodes per environment (greedy_first: episode 0 is the
    policy's most likely decision, the rest are sampled)."""
    out = []
    was_training = policy.training
    policy.eval()
    try:
        for env in envs:
            if greedy_first and samples == 1:
                sampled = policy.sample(env.inputs, 1, greedy=True)
            else:
                sampled = policy.sample(env.inputs, samples, generator=generator)
            actions, log_prob, per_decision = sampled.actions, sampled.log_prob, sampled.decision_log_prob
            if greedy_first and samples > 1:
                greedy = policy.sample(env.inputs, 1, greedy=True)
                actions = torch.cat([greedy.actions, actions[:, 1:]], dim=1)
                log_prob = torch.cat([greedy.log_prob, log_prob[1:]])
                per_decision = torch.cat([greedy.decision_log_prob, per_decision[:, 1:]], dim=1)
            final = actions[-1].numpy()
            decisions = [env.decisions(final[k]) for k in range(final.shape[0])]
            scores = [env.score_decisions(d, with_reward=with_reward) for d in decisions]
            out.append(GraphRollout(env, actions, log_prob, float(sampled.value), scores, decisions, per_decision))
    finally:
        policy.train(was_training)
    return out


def replay_episode(policy: GoPolicy, rollout: GraphRollout, actions: torch.Tensor, score: EpisodeScore, decisions: Decisions) -> None:
    """Append a stored episode (actions (T, 1, N, 3), already scored) to `rollout`, with its
    log-probabilities under the current policy as the "old" ones, so PPO starts it at ratio 1.
    Used to replay the best episode seen so far on an environment (self-imitation): it competes
    in the per-graph advantage normalisation with the freshly sampled ones."""
    was_training = policy.training
    policy.eval()
    try:
        with torch.no_grad():
            per_decision, _, _ = policy.evaluate_decisions(rollout.env.inputs, actions)
    finally:
        policy.train(was_training)
    rollout.actions = torch.cat([rollout.actions, actions], dim=1)
    rollout.old_log_prob = torch.cat([rollout.old_log_prob, per_decision.sum((0, 2, 3))])
    if rollout.old_decision_log_prob is not None:
        rollout.old_decision_log_prob = torch.cat([rollout.old_decision_log_prob, per_decision], dim=1)
    rollout.scores.append(score)
    rollout.decisions.append(decisions)
