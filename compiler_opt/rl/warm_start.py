"""Warm start: seed GO's search with fast classical placements.

GO refines iteratively, each round conditioned on the previous round's decisions. A warm start
runs a few cheap classical placement methods on the environment first (their CPU seconds count
against the run's budget), keeps the best as the run's initial best answer, and from then on
conditions every sampled episode's first round on the best decisions so far
(`GoPolicy.sample(initial=...)`): the policy proposes edits of a good placement instead of
starting from its from-scratch prior, and its fusion and scheduling heads still decide jointly
on top of that placement. The seeds also join the first PPO batch as replayed episodes (ratio
1, self-imitation, as `TrainConfig.replay_best`). The answer is the best episode seen, seeds
included, so a warm-started run is never worse than its best seed.

A seed is scored twice, because a classical answer and a policy episode decode differently:
- as an answer: the method's placement with the framework's default fusion kept within each
  device (`GraphEnvironment.default_fusion`) and priorities 0, as the classical rows of `bench`
  are scored;
- as an episode (`SeedEpisode`, only for the seeds replayed in PPO): its placement with every
  fused node at fusion level 1 ("keep the default group", the decoder reading levels relative
  to the default fusion) and every other at level 0, priority level 0, decoded by the policy's
  decoder, so the reward PPO sees is that of the actions it is given. Where the graph has a
  known default fusion this decodes to the answer form exactly; without one (the decoder's
  absolute `fuse-by-priority` reading) fused nodes take the top level, and the episode is an
  answer candidate of its own.
After the methods, joint variants of the fitting seeds (rl/joint.py: merging beyond the default
fusion, critical-path-first priorities; all of them for the best seed, `merge+rank` for the
others) join as seeds of their own, scored as the policy's decoder
reads their actions; the placement-only ablation has none.
A seed that places a node on a device the policy masks (memory, host CPU) stays an answer
candidate but is not replayed (its log-probability would be -inf). Only `GraphEnvironment`s
are seeded (the profiled workloads' `ProfiledEnvironment` runs without a warm start).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from graph_ir.errors import CompilerOptError

if TYPE_CHECKING:
    from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment
    from cost_model.decisions import Decisions
    from cost_model.simulator.problem import SimulationProblem

__all__ = ["DEFAULT_SEEDS", "OTHER_SEED_CPU", "SEED_CPU", "Seed", "SeedCost", "SeedEpisode", "fitting_seeds", "joint_seeds", "mean_ready_width", "predicted_seed_cpu", "seed_actions", "seed_episode", "warm_start_seeds"]

logger = logging.getLogger(__name__)

# Cheapest first (the budget stops starting new ones): the reference is computed for the reward
# anyway; single-device, metis, scotch, critical-path and m-topo take 0.1-3 CPU s at paper sizes;
# dp 0.04-2.6 s up to 29k nodes since the fifth session's speed-up (it wins transformer-xl and
# bert-base training at 4/8xV100 by 7-10% over every other seed, RESULTS.md h5); m-etf 1-4 s on
# 2-5k nodes (15-146 s on 23-29k). m-sct, dp-ls, sa and cp-sat are left out: tens of CPU seconds
# per cell (RESULTS.md h1).
DEFAULT_SEEDS = ("human-expert", "single-device", "metis", "scotch", "critical-path", "m-topo", "dp", "m-etf")
# A method starts only when it is predicted to end within the warm start's CPU budget
# (`predicted_seed_cpu`), from CPU seconds measured on the paper-size suite (one thread).
# m-ETF scans its whole ready set at every step (passes/placement/baechi.py), so its cost grows
# with the graph's width as well as its size: RESULTS.md h18 measured 0.06-0.69 ms a node on 11
# graphs, 0.69 on inception-v3 training (mean ready width 759), 0.07 on transformer-xl inference
# (60); N x (0.3 ms + 0.6 us x width) bounds all 22 (graph, device count) cells, at most 5x over
# (the flat 1.6 ms a node it replaces was 2.3-27x over and dropped m-etf past ~6k nodes). Every
# other default seed took at most 0.11 ms a node.
@dataclass(frozen=True)
class SeedCost:
    """Predicted CPU seconds of a seed method: `per_node` + `per_node_width` x the mean ready width,
    times the node count."""

    per_node: float
    per_node_width: float = 0.0


SEED_CPU = {"m-etf": SeedCost(3e-4, 6e-7)}
OTHER_SEED_CPU = SeedCost(2e-4)


def mean_ready_width(problem: SimulationProblem) -> float:
    """The mean number of ready nodes over a first-in first-out topological traversal: how many
    candidates a list scheduler such as m-ETF compares at each step. O(N + E), once per problem."""
    width = _WIDTHS.get(problem)
    if width is None:
        width = _WIDTHS[problem] = _mean_ready_width(problem)
    return width


_WIDTHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # problem -> mean ready width


def _mean_ready_width(problem: SimulationProblem) -> float:
    count = problem.num_nodes
    if not count:
        return 0.0
    src, dst = problem.node_edges()
    waiting = np.bincount(dst, minlength=count).tolist()
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(count + 1)).tolist()
    succ = dst[order].tolist()
    ready = deque(n for n in range(count) if waiting[n] == 0)
    total = 0
    while ready:
        total += len(ready)
        node = ready.popleft()
        for s in succ[starts[node] : starts[node + 1]]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    return total / count


def predicted_seed_cpu(method: str, problem: SimulationProblem) -> float:
    """CPU seconds `method` is predicted to take at most on `problem` (`SEED_CPU`; the graph's
    `mean_ready_width` read only when the method's cost depends on it)."""
    cost = SEED_CPU.get(method, OTHER_SEED_CPU)
    width = mean_ready_width(problem) if cost.per_node_width else 0.0
    return problem.num_nodes * (cost.per_node + cost.per_node_width * width)


@dataclass
class Seed:
    method: str
    decisions: Decisions  # the method's placement, default fusion, priorities 0 (a joint seed: its actions decoded)
    score: EpisodeScore
    actions: torch.Tensor  # (N, 3) int64: the same placement as policy actions (seed_actions)
    cpu_seconds: float

    @property
    def fits(self) -> bool:
        return not (self.score.oom or self.score.invalid)


@dataclass
class SeedEpisode:
    """A seed as a PPO episode: actions (T, 1, N, 3) (the seed in every round), its score and
    decisions as the policy's decoder reads those actions, and its first-round input (N, 3)."""

    method: str
    actions: torch.Tensor
    score: EpisodeScore
    decisions: Decisions
    initial: torch.Tensor


def seed_actions(decisions: Decisions, fusion_levels: int, *, relative: bool = False) -> torch.Tensor:
    """(N, 3) int64 policy actions for classical decisions: the device; for a node in a fusion
    group the top fusion level, or with `relative` (levels read against the default fusion,
    `DecisionDecoder.relative_groups`) level 1, "keep the default group"; level 0 otherwise;
    priority level 0."""
    device = np.asarray(decisions.device, dtype=np.int64)
    fused = np.asarray(decisions.fusion_group) >= 0
    fusion = np.where(fused, 1 if relative else fusion_levels - 1, 0).astype(np.int64)
    return torch.from_numpy(np.stack([device, fusion, np.zeros_like(device)], axis=1))


def warm_start_seeds(
    env: GraphEnvironment, methods: Sequence[str], *, fusion_levels: int, priority_levels: int = 0, cpu_budget: float = 0.0
) -> list[Seed]:
    """Run `methods` in order on `env` and score them; no new method starts once `cpu_budget`
    CPU seconds are spent (0: no limit) or when it is predicted to end past them
    (`predicted_seed_cpu`). A method that fails is logged and skipped. With
    `priority_levels` (the policy's), the fitting seeds' joint variants follow (`joint_seeds`)."""
    seeds: list[Seed] = []
    began = time.process_time()
    for method in methods:
        spent = time.process_time() - began
        if cpu_budget and spent >= cpu_budget:
            logger.info("%s: warm start stops after %.1f CPU s (budget %.1f); not run: %s", env.label, spent, cpu_budget, method)
            break
        if cpu_budget and method != env.reference_name:
            predicted = predicted_seed_cpu(method, env.problem)
            if spent + predicted > cpu_budget:
                logger.info("%s: warm start skips %s (~%.1f CPU s predicted, %.1f of %.1f left)", env.label, method, predicted, cpu_budget - spent, cpu_budget)
                continue
        started = time.process_time()
        try:
            decisions = env.reference_decisions if method == env.reference_name else env.classical(method)
        except (CompilerOptError, ValueError) as err:
            logger.warning("%s: warm-start seed %s failed: %s", env.label, method, str(err).splitlines()[0])
            continue
        score = env.score_decisions(decisions)
        seeds.append(Seed(method, decisions, score, seed_actions(decisions, fusion_levels, relative=env.default_groups is not None), time.process_time() - started))
        logger.info("%s: seed %s %.4g s%s (%.1f CPU s)", env.label, method, score.step_time_s, " OOM" if score.oom else "", seeds[-1].cpu_seconds)
    if priority_levels:
        deadline = began + cpu_budget if cpu_budget else math.inf
        seeds.extend(joint_seeds(env, seeds, fusion_levels=fusion_levels, priority_levels=priority_levels, deadline=deadline))
    return seeds


def joint_seeds(
    env: GraphEnvironment, seeds: Sequence[Seed], *, fusion_levels: int, priority_levels: int, deadline: float = math.inf
) -> list[Seed]:
    """Joint variants (rl/joint.py) of the fitting seeds' placements, named `METHOD+FUSION+PRIORITY`;
    their decisions are the policy decoder's reading of the actions. The best seed gets every
    variant, the others (fastest first, each placement once) `merge+rank`: merging
    reorders the seeds (inception-v3 training 2xV100: critical-path 138.4 ms is the best seed,
    metis 151.7, but merged metis is 99.4 against merged critical-path 118.1). They run after the
    seed budget: one decode and simulation each (0.3 CPU s on 9.5k nodes), at most 2 + the seed
    count. Past `deadline` (process CPU seconds: the warm start's share) only the best seed's
    variants run: unbudgeted, the others took 6 CPU s on 29k-node GNMT and ran a 20 s row to 25."""
    from compiler_opt.rl.joint import joint_variants

    out: list[Seed] = []
    done: list[np.ndarray] = []
    for rank, seed in enumerate(fitting_seeds(seeds)):
        device = np.asarray(seed.decisions.device)
        if any(np.array_equal(device, d) for d in done):
            continue
        if rank and time.process_time() >= deadline:
            logger.info("%s: joint seeds stop at the warm start's budget; not run: %s and slower", env.label, seed.method)
            break
        done.append(device)
        variants = joint_variants(env, device, fusion_levels=fusion_levels, priority_levels=priority_levels)
        if rank:  # merging with critical-path-first priorities: the variant that won most (RESULTS.md h6)
            variants = [v for v in variants if v[0] == "merge+rank"] or variants[:1]
        out.extend(_joint_seed(env, seed, name, actions) for name, actions in variants)
    return out


def _joint_seed(env: GraphEnvironment, seed: Seed, name: str, actions: np.ndarray) -> Seed:
    began = time.process_time()
    decisions = env.decisions(actions)
    score = env.score_decisions(decisions)
    joint = Seed(f"{seed.method}+{name}", decisions, score, torch.from_numpy(actions), time.process_time() - began)
    logger.info("%s: joint seed %s %.4g s (%.1f CPU s)", env.label, joint.method, score.step_time_s, joint.cpu_seconds)
    return joint


def fitting_seeds(seeds: Sequence[Seed]) -> list[Seed]:
    """The seeds that fit (no OOM, valid), fastest first."""
    return sorted((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)


def seed_episode(env: GraphEnvironment, seed: Seed, iterations: int) -> SeedEpisode | None:
    """`seed` as a replayable PPO episode, or None when its placement uses a device the policy
    masks for some node (module docstring)."""
    actions = seed.actions
    mask = env.inputs.device_mask
    if not bool(mask[torch.arange(actions.shape[0]), actions[:, 0]].all()):
        logger.info("%s: seed %s uses masked devices; kept as an answer, not replayed", env.label, seed.method)
        return None
    decisions = env.decisions(actions.numpy())
    score = env.score_decisions(decisions)
    return SeedEpisode(seed.method, actions.view(1, 1, *actions.shape).expand(iterations, 1, -1, -1).clone(), score, decisions, actions)
