"""PPO over a set of graphs (clipped objective, value loss, entropy bonus).

One episode is one joint decision for a whole graph; its log-probability is the sum over
refinement iterations, nodes and tasks (`GoPolicy.evaluate`). Advantages are normalised within
each graph: the K episodes of a graph are compared with each other, so a graph whose step times
are naturally larger does not dominate. (With a value that depends on the graph only, the
normalised advantage equals the normalised reward; the value head is still trained on the
rewards and reported, as GO's is.) Entropy is the mean per-node entropy summed over tasks.

Where the importance ratio is taken (`TrainConfig.ratio`):
- `"decision"` (default): one ratio per decision (iteration, node, task), each clipped on its
  own and weighted by its episode's normalised advantage; the surrogate is the mean over
  decisions (token-level PPO, as for sequence-level rewards in language-model RL). The
  gradient before clipping is the episode-level one divided by the number of decisions.
- `"episode"`: one ratio per episode, the exponential of the summed log-probability difference
  (clamped at +-20 in log space). Over thousands of decisions it leaves [1 - clip, 1 + clip]
  after one optimizer step, so the rest of the update is clipped away (clip fraction ~0.5 in
  the paper-size pretraining record, WORKSPACE.md); kept for comparison.

Entropy: a fixed bonus `entropy_coef`, or with `entropy_target` > 0 a target: the coefficient
becomes a signed controller, moved after every update by `entropy_rate * (target - entropy)`
(clamped to +-0.05), so it rewards entropy below the target and penalises it above. (A paper-
size pretraining run with the fixed bonus let the per-node entropy drift 2.82 -> 3.85, eroding
the checkpoint's priors; WORKSPACE.md "Pretraining record".)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:
    from compiler_opt.policy.network import GoPolicy
    from compiler_opt.rl.config import TrainConfig
    from compiler_opt.rl.rollout import GraphRollout

__all__ = ["PPOStats", "PPOTrainer", "normalized_advantages"]


@dataclass(frozen=True)
class PPOStats:
    policy_loss: float
    value_loss: float
    entropy: float
    clip_fraction: float
    grad_norm: float
    entropy_coef: float = 0.0  # the coefficient used in this update


def normalized_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(r - mean) / std within one graph's episodes; all-equal rewards give zeros."""
    centered = rewards - rewards.mean()
    std = centered.pow(2).mean().sqrt()
    return centered / (std + eps) if std > eps else torch.zeros_like(rewards)


class PPOTrainer:
    def __init__(self, policy: GoPolicy, config: TrainConfig) -> None:
        self.policy = policy
        self.config = config
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        self.entropy_coef = config.entropy_coef

    def update(self, rollouts: Sequence[GraphRollout]) -> PPOStats:
        cfg = self.config
        self.policy.train()
        totals = {"policy": 0.0, "value": 0.0, "entropy": 0.0, "clipped": 0.0, "grad": 0.0}
        steps = 0
        for _ in range(cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for rollout in rollouts:
                rewards = rollout.rewards
                advantages = normalized_advantages(rewards)
                if cfg.ratio == "decision" and rollout.old_decision_log_prob is not None:
                    log_prob, entropy, value = self.policy.evaluate_decisions(rollout.env.inputs, rollout.actions, rollout.initial)
                    old = rollout.old_decision_log_prob
                    advantages = advantages.view(1, -1, 1, 1)
                else:
                    log_prob, entropy, value = self.policy.evaluate(rollout.env.inputs, rollout.actions, rollout.initial)
                    old = rollout.old_log_prob
                ratio = (log_prob - old).clamp(-20.0, 20.0).exp()
                unclipped = ratio * advantages
                clipped = ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip) * advantages
                policy_loss = -torch.min(unclipped, clipped).mean()
                value_loss = (value - rewards).pow(2).mean()
                entropy_mean = entropy.mean()
                loss = policy_loss + cfg.value_coef * value_loss - self.entropy_coef * entropy_mean
                (loss / len(rollouts)).backward()
                totals["policy"] += float((policy_loss).detach())
                totals["value"] += float((value_loss).detach())
                totals["entropy"] += float((entropy_mean).detach())
                totals["clipped"] += float(((ratio.detach() - 1.0).abs() > cfg.clip).float().mean())
            grad = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
            totals["grad"] += float(grad)
            self.optimizer.step()
            steps += 1
        count = max(steps * len(rollouts), 1)
        used = self.entropy_coef
        if cfg.entropy_target > 0:
            error = cfg.entropy_target - totals["entropy"] / count
            self.entropy_coef = float(min(max(self.entropy_coef + cfg.entropy_rate * error, -0.05), 0.05))
        return PPOStats(
            totals["policy"] / count, totals["value"] / count, totals["entropy"] / count, totals["clipped"] / count, totals["grad"] / max(steps, 1), used
        )
