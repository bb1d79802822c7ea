"""Training the HDP-style reference (`compiler_opt.policy.hdp`) with REINFORCE on one graph.

As in "A Hierarchical Model for Device Placement" (Mirhoseini et al. 2018): the grouper and the
placer are trained jointly by REINFORCE, the loss per sampled episode being
`-(R - b) * (log p(grouping) + log p(placement | grouping))` with `b` an exponential moving
average of the reward, Adam, one update per batch of `samples` episodes. The reward is the
environment's (`GraphEnvironment`: `-sqrt(step / reference step)`, OOM penalty), the same
simulator and reward GO is trained on. HDP places only: every episode gets the framework's
default greedy fusion and default priorities under its placement (as the classical methods do).

The result is the best fitting placement seen, its score, the wall time, the number of
simulator evaluations and the best-so-far curve (wall seconds since start, step time, CPU
seconds since start) for time-to-quality comparisons with GO. `max_cpu_seconds` budgets the
process's CPU time instead of wall time: on a shared machine the wall time a process gets for
one CPU second varies several-fold from minute to minute.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from compiler_opt.policy.features import NUM_OP_KINDS
from compiler_opt.policy.hdp import HdpPolicy, HdpPolicyConfig
from compiler_opt.rl.config import TrainConfigError
from cost_model.decisions import Decisions
from graph_ir._gc import gc_frozen

if TYPE_CHECKING:
    from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment

__all__ = ["HdpConfig", "HdpResult", "train_hdp"]

logger = logging.getLogger(__name__)


@dataclass
class HdpConfig:
    groups: int = 64
    hidden: int = 64
    samples: int = 6  # episodes per REINFORCE update
    iterations: int = 100000  # updates (max_seconds usually stops first)
    max_seconds: float = 0.0  # 0: no wall-time limit
    max_cpu_seconds: float = 0.0  # 0: no limit on this process's CPU time (fair budgets on a shared machine)
    learning_rate: float = 1e-3
    baseline_decay: float = 0.9
    entropy_coef: float = 0.0  # HDP used none; kept for experiments
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.groups < 1 or self.hidden < 1:
            raise TrainConfigError("hdp: groups and hidden must be at least 1", field="groups")
        if self.samples < 1 or self.iterations < 1:
            raise TrainConfigError("hdp: samples and iterations must be at least 1", field="samples")


@dataclass
class HdpResult:
    policy: HdpPolicy
    decisions: Decisions
    score: EpisodeScore
    seconds: float
    iterations: int
    evaluations: int
    curve: list[list[float]] = field(default_factory=list)  # [seconds, best step time so far, CPU seconds]
    history: list[dict[str, float]] = field(default_factory=list)


def _decisions(env: GraphEnvironment, device: np.ndarray) -> Decisions:
    device = device.astype(np.int32)
    return Decisions(device, env.default_fusion(device), np.zeros(env.problem.num_nodes))


@gc_frozen()  # as GO's searches: the graph's objects out of the collector's scans (graph_ir._gc)
def train_hdp(env: GraphEnvironment, config: HdpConfig | None = None) -> HdpResult:
    """REINFORCE on `env` until `config.iterations` updates or `config.max_seconds` (module docstring)."""
    config = config or HdpConfig()
    began = time.monotonic()
    began_cpu = time.process_time()
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    policy = HdpPolicy(NUM_OP_KINDS, env.inputs.num_devices, HdpPolicyConfig(groups=config.groups, hidden=config.hidden))
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    baseline: float | None = None
    best: tuple[Decisions, EpisodeScore] | None = None
    fallback: tuple[Decisions, EpisodeScore] | None = None
    curve: list[list[float]] = []
    history: list[dict[str, float]] = []
    evaluations = 0
    iteration = 0
    for iteration in range(1, config.iterations + 1):
        sampled = policy.sample(env.inputs, config.samples, generator=generator)
        devices = sampled.device.numpy()
        rewards = []
        for k in range(config.samples):
            decisions = _decisions(env, devices[k])
            score = env.score_decisions(decisions)
            evaluations += 1
            rewards.append(score.reward)
            if not (score.oom or score.invalid) and (best is None or score.step_time_s < best[1].step_time_s):
                best = (decisions, score)
                curve.append([time.monotonic() - began, score.step_time_s, time.process_time() - began_cpu])
            if fallback is None or score.rank_key < fallback[1].rank_key:
                fallback = (decisions, score)
        reward = torch.tensor(rewards, dtype=torch.float32)
        if baseline is None:
            baseline = float(reward.mean())
        advantage = reward - baseline
        loss = -(advantage * sampled.log_prob).mean() - config.entropy_coef * sampled.entropy.mean()
        optimizer.zero_grad()
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm))
        optimizer.step()
        baseline = config.baseline_decay * baseline + (1 - config.baseline_decay) * float(reward.mean())
        history.append({
            "iteration": iteration, "reward_mean": float(reward.mean()), "reward_max": float(reward.max()),
            "entropy": float(sampled.entropy.detach().mean()), "grad_norm": grad_norm,
            "best_step_s": best[1].step_time_s if best else math.inf,
        })
        if config.max_seconds and time.monotonic() - began >= config.max_seconds:
            break
        if config.max_cpu_seconds and time.process_time() - began_cpu >= config.max_cpu_seconds:
            break
    chosen = best or fallback
    assert chosen is not None  # at least one iteration ran
    logger.info("hdp %s: %d iterations, %d evaluations, best %.4g s in %.1f s", env.label, iteration, evaluations,
                chosen[1].step_time_s, time.monotonic() - began)
    return HdpResult(policy, chosen[0], chosen[1], time.monotonic() - began, iteration, evaluations, curve, history)
