"""The training loop and the five modes.

- `go-one`: a fresh policy trained by PPO on one graph; the answer is the best episode seen.
- `pretrain`: PPO over many graphs (each iteration samples `graphs_per_iteration` environments).
- `zero-shot`: a pretrained policy, no training: its greedy decision and `zero_shot_samples`
  samples are simulated and the best is kept.
- `fine-tune`: a pretrained policy trained further on one graph for `iterations` iterations.
- `imitate`: pretraining by behaviour cloning of the placements the search finds
  (rl/imitation.py), `iterations` gradient steps; the answer per graph is the greedy decision.

`go-one` and `fine-tune` end with a polish (rl/polish.py): a local search from the best answer
and the fastest seeds, kept when faster, on the CPU budget PPO left (`polish_fraction` of it: PPO
stops early to leave it, or sooner when its next iteration would not fit or it has found no better
answer in `ppo_patience_cpu` CPU seconds; at least `polish_min_fraction` when the seeds and the
policy's start overran their share).

Seeded: the policy's initial weights, environment choice and every sample come from
`config.seed` (torch is set to deterministic algorithms where it has them). Progress shows the
best step time so far (as a ratio to the reference, averaged over graphs when there are many).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from compiler_opt.policy.checkpoint import load_checkpoint, save_checkpoint
from compiler_opt.policy.coarsen import coarsened_placements
from compiler_opt.policy.config import PolicyConfig
from compiler_opt.policy.network import GoPolicy
from compiler_opt.policy.partitioned import AGREEMENT_EXPONENTS, partitioned_placements
from compiler_opt.policy.smoothing import SMOOTHING_WEIGHTS, smooth_placement
from compiler_opt.rl.config import POLISH_RACES, TrainConfig, TrainConfigError
from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment
from compiler_opt.rl.polish import Polished, polish, start_candidates
from compiler_opt.rl.ppo import PPOTrainer
from compiler_opt.rl.rollout import GraphRollout, collect_rollouts, replay_episode
from compiler_opt.rl.saver import CheckpointSaver
from compiler_opt.rl.scalars import ScalarLogger
from compiler_opt.rl.warm_start import Seed, SeedEpisode, fitting_seeds, seed_episode, warm_start_seeds
from graph_ir._gc import gc_frozen

if TYPE_CHECKING:
    from cost_model.decisions import Decisions
    from graph_ir.graph import Graph

__all__ = [
    "JOINT_CANDIDATES", "WARM_ZERO_SHOT_POLISH_SECONDS", "WARM_ZERO_SHOT_SEED_SECONDS", "BestFound", "TrainResult", "build_environments", "load_graph", "make_policy", "policy_decodings", "run_training", "zero_shot",
]

# The ten-second zero-shot (RESULTS.md h18, pre-registered): the warm start's default seeds within
# 2 CPU s, the policy's edits of the best of them, then 3 CPU s of local search. Chosen among
# seeds + search = 5 s on the training split's 27 inference cells (2+3: 0.3824x the expert; 1+4,
# 3+2, 4+1: 0.3843-0.3902x), then held out: 1.043x fine-tune's (12 of 12 cells within 10%),
# 11.8% faster than the same seeds and search without the policy at equal CPU (but tied with a
# no-policy search that spends half its CPU on seeds: 0.3850x both), 7.1-9.7 CPU s on rnnlm-8's
# 10k nodes. `go{mode=zero-shot,seeds=default,seed-seconds=2,polish-seconds=3}`.
WARM_ZERO_SHOT_SEED_SECONDS = 2.0
WARM_ZERO_SHOT_POLISH_SECONDS = 3.0

# Zero-shot tries the joint variants of this many of its fastest distinct placements (chosen on
# the training split's inference cells: 4 beat 1 there, 0.409x vs 0.412x; RESULTS.md h15).
JOINT_CANDIDATES = 4

logger = logging.getLogger(__name__)


@dataclass
class BestFound:
    decisions: Decisions
    score: EpisodeScore
    env: GraphEnvironment
    evaluations: int = 0  # zero-shot: the candidates it simulated (0: not counted)

    @property
    def reference_step_s(self) -> float:
        return self.env.reference_step_s  # computed on first use

    @property
    def ratio(self) -> float:
        return self.score.step_time_s / self.reference_step_s


@dataclass
class TrainResult:
    policy: GoPolicy
    best: dict[str, BestFound]
    iterations: int
    seconds: float
    scalar_backend: str = ""
    history: list[dict[str, float]] = field(default_factory=list)
    # per iteration: env label -> {"reward": episode rewards, "ratio": step time / reference of the fitting, valid ones}
    env_history: list[dict[str, dict[str, list[float]]]] = field(default_factory=list)
    seeds: dict[str, list[Seed]] = field(default_factory=dict)  # warm start: env label -> the seeds run
    seed_cpu_seconds: float = 0.0  # CPU seconds the warm start took (seeds and their replay episodes)
    polished: dict[str, Polished] = field(default_factory=dict)  # env label -> its final polish (rl/polish.py)
    decoded: dict[str, list[BestFound]] = field(default_factory=dict)  # env label -> the policy's polish starts (_decoded_starts)


def load_graph(spec: str, *, paper: bool = False) -> tuple[str, Graph]:
    """A suite workload (`name`, `name:mode`, `name:mode@size=value...`; default sizes, or the
    paper's with `paper`, updated by the spec's) or a model file (`FILE#N`: module N of a
    multi-module HLO file); an XLA graph's cheap calls
    inlined, as `bench` does before its default fusion."""
    from compiler_opt.workloads import build_workload
    from compiler_opt.workloads.registry import parse_workload_spec, workload_spec_label, workload_spec_sizes

    parsed = parse_workload_spec(spec)
    if parsed is not None:
        workload, mode = parsed
        graph = build_workload(workload.name, mode, paper=paper, **workload_spec_sizes(spec))
        name = workload_spec_label(spec)
    else:
        import graph_ir
        from graph_ir.io.formats import split_module_spec

        path, module = split_module_spec(spec)  # FILE#N: module N of a multi-module HLO file
        name, graph = spec, graph_ir.load(path, module)
    from passes.fusion.defaults import XLA_GPU, default_fusion_name, inline_cheap_calls

    if default_fusion_name(graph) == XLA_GPU:
        # XLA inlines cheap calls before fusing; `bench` does the same, so both see one node set.
        inline_cheap_calls(graph)
    return name, graph


def build_environments(config: TrainConfig, graphs: Sequence[tuple[str, Graph]] | None = None) -> list[GraphEnvironment]:
    from cost_model.devices.loader import load_topology

    loaded = list(graphs) if graphs is not None else [load_graph(spec, paper=config.paper_sizes) for spec in config.workloads]
    envs = []
    for devices in config.devices:
        topology = load_topology(devices)
        for name, graph in loaded:
            envs.append(
                GraphEnvironment(
                    name, graph, topology, reference=config.reference, oom_penalty=config.oom_penalty, invalid_penalty=config.invalid_penalty
                )
            )
    return envs


def make_policy(config: TrainConfig) -> GoPolicy:
    """Fresh weights from the seed, or the checkpoint `init_checkpoint` (required for
    zero-shot and fine-tune; "default" means the checkpoint shipped in the package)."""
    torch.manual_seed(config.seed)
    if config.init_checkpoint:
        policy, _ = load_checkpoint(None if config.init_checkpoint == "default" else config.init_checkpoint)
        return policy
    if config.mode in ("zero-shot", "fine-tune"):
        raise TrainConfigError(f"mode {config.mode} needs a pretrained checkpoint (init_checkpoint)", field="init_checkpoint")
    return GoPolicy(PolicyConfig.from_dict(config.policy))


def _update_best(best: dict[str, BestFound], env: GraphEnvironment, decisions: Decisions, score: EpisodeScore) -> bool:
    """Keep `decisions` if they are the fastest fitting ones seen on `env`; True when kept."""
    if score.invalid or score.oom:
        return False
    known = best.get(env.label)
    if known is None or score.step_time_s < known.score.step_time_s:
        best[env.label] = BestFound(decisions, score, env)
        return True
    return False


@gc_frozen()  # the graph's objects out of the collector's scans (graph_ir._gc)
def zero_shot(
    policy: GoPolicy,
    env: GraphEnvironment,
    samples: int = 8,
    *,
    seed: int = 0,
    seeds: Sequence[str] = (),
    smoothing: Sequence[float] = SMOOTHING_WEIGHTS,
    coarsen: bool = True,
    partition: Sequence[float] = AGREEMENT_EXPONENTS,
    joint: int = JOINT_CANDIDATES,
    polish_seconds: float = 0.0,
    seed_seconds: float = 0.0,
    deadline: float | None = None,
    polish_race: str | None = None,
) -> BestFound:
    """The policy's greedy decision and `samples` sampled ones, simulated; the best by
    `EpisodeScore.rank_key` is kept (an OOM one only when nothing fits). Every refinement
    round's decision is a candidate, not only the last round's: the second round, trained to
    mend the first, sometimes undoes a better first answer (rnnlm-8 at 2xV100: greedy round 1
    0.81x the expert, round 2 0.94x). Needs no reference
    unless `seeds` names warm-start methods: then they run first, the episodes edit the best
    fitting seed (still no training), and the seed itself and the policy's unseeded greedy
    decision are candidates too, so a warm zero-shot is never worse than a cold one's greedy
    (inception-v3 training at 2xV100: the unseeded greedy fuses beyond the TF default, 130.1 ms,
    where every edit of the best seed stayed at 138.0). `smoothing`: the unseeded greedy
    answer's last round decoded again with neighbours asked to agree, one candidate per weight
    (policy/smoothing.py); () turns that off. `coarsen`: the unseeded greedy and best episodes'
    splits merged into fewer stages, down to one device, each a candidate (policy/coarsen.py).
    `partition`: the unseeded greedy answer's placement distributions read as co-location and
    cut by METIS, one candidate per agreement exponent and part count (policy/partitioned.py);
    () turns that off. `joint`: the joint variants (rl/joint.py: fusion merged beyond the default,
    priorities by bottom level) of this many fastest distinct candidates are candidates too; the
    fusion and priority heads are often slower than those (rnnlm-2 2xV100: 0.644x -> 0.536x the
    expert, RESULTS.md h15); 0 turns that off. `polish_seconds` > 0: the answer ends with that many
    CPU seconds of local search from it (rl/polish.py, the fine-tune's last step; the seeds' placements
    raced beside it when `seeds` are given), still no training: on the 12 held-out cells 5 s took the
    answer from 1.146x to 1.063x fine-tune's step time, and the same CPU seconds of classical seeds +
    local search without a policy score 1.063x too (RESULTS.md h17); 0 (default): the policy's answer alone.
    `polish_race` (`POLISH_RACES`): how that search's starts share its seconds (`polish(race=)`); default
    `TrainConfig.polish_race`, fine-tune's `sequential`: on the 27 training cells the ten-second warm zero-shot's
    3-second search ended 0.5% faster with it than with `halving` (pre-registered, RESULTS.md h, forty-fifth session).
    `seed_seconds` > 0: the warm start's CPU budget (`warm_start_seeds(cpu_budget=)`: no seed starts
    past it or is predicted to end past it), so a warm zero-shot's time can be bounded on large
    graphs (rnnlm-8, 10k nodes: the eight default seeds take 4-5 CPU s); 0: every seed runs.
    `deadline`: a process CPU time (`time.process_time()`) past which no further candidate is
    decoded or simulated and the best so far is the answer (the seeds, the sampled episodes and
    `polish_seconds` still run): fine-tune's start on a graph where the whole zero-shot would crowd
    out its search (gnmt-8, 29k nodes: 15-18 CPU s)."""
    if not polish_seconds >= 0:
        raise ValueError(f"polish_seconds must be >= 0 CPU seconds, got {polish_seconds}")
    if not seed_seconds >= 0:
        raise ValueError(f"seed_seconds must be >= 0 CPU seconds, got {seed_seconds}")
    polish_race = TrainConfig.polish_race if polish_race is None else polish_race
    if polish_race not in POLISH_RACES:
        raise ValueError(f"polish_race {polish_race!r}: expected one of {', '.join(POLISH_RACES)}")
    generator = torch.Generator().manual_seed(seed)
    # joint variants need a fusion decoder: none on a profiled problem (device arrays scored by another model)
    leaders = _Leaders(joint if isinstance(env, GraphEnvironment) else 0)
    head: Seed | None = None
    fitting: list[Seed] = []
    if seeds:
        fitting = fitting_seeds(
            warm_start_seeds(env, seeds, fusion_levels=policy.config.fusion_levels, priority_levels=policy.config.priority_levels, cpu_budget=seed_seconds)
        )
        head = fitting[0] if fitting else None
    start = {env.label: head.actions} if head is not None else None
    rollout = collect_rollouts(policy, [env], max(samples, 0) + 1, generator=generator, greedy_first=True, with_reward=False, initial=start)[0]
    index, score = rollout.best()
    leaders.offer_episodes(rollout)
    found, evaluations = _best_of_rounds(rollout, BestFound(rollout.decisions[index], score, env), leaders, deadline)
    evaluations += len(rollout.scores)
    cold = rollout
    late = _past(deadline)  # then the sampled episodes are the only candidates
    if head is not None and not late:
        evaluations += len(seeds)
        cold = collect_rollouts(policy, [env], 1, generator=generator, greedy_first=True, with_reward=False)[0]
        cold_index, cold_score = cold.best()
        leaders.offer_episodes(cold)
        if cold_score.rank_key < found.score.rank_key:
            found = BestFound(cold.decisions[cold_index], cold_score, env)
        found, more = _best_of_rounds(cold, found, leaders, deadline)
        evaluations += more + len(cold.scores)
    if smoothing and not late:
        found, more = _best_smoothed(cold, found, smoothing, leaders, deadline)
        evaluations += more
    if coarsen and not late:
        found, more = _best_coarsened(cold, found, leaders, deadline)
        evaluations += more
    if partition and not _past(deadline):  # checked again: the METIS cuts themselves take seconds at 29k nodes
        found, more = _best_partitioned(cold, found, partition, leaders, deadline)
        evaluations += more
    found, more = leaders.best_joint(found, policy.config, deadline)
    evaluations += more
    if head is not None:
        if head.score.rank_key <= found.score.rank_key:
            found = BestFound(head.decisions, head.score, env)
    if polish_seconds > 0 and isinstance(env, GraphEnvironment) and not (found.score.oom or found.score.invalid):
        found, more = _polished(policy, env, found, polish_seconds, seed, fitting, polish_race)
        evaluations += more
    return BestFound(found.decisions, found.score, env, evaluations)


def _polished(policy: GoPolicy, env: GraphEnvironment, found: BestFound, cpu_seconds: float, seed: int, seeds: Sequence[Seed],
              race: str) -> tuple[BestFound, int]:
    """`found`, or the faster result of `cpu_seconds` of local search from it (and from the
    fastest distinct seeds' placements as `TrainConfig.polish_start_order` ranks them, raced;
    rl/polish.py); and the simulations it took."""
    starts = TrainConfig.polish_starts
    others, pool = start_candidates(
        np.asarray(found.decisions.device), seeds, starts - 1, prefer=TrainConfig.polish_first_seeds, order=TrainConfig.polish_start_order
    )
    result = polish(env, found.decisions, found.score, cpu_seconds=cpu_seconds, seed=seed, others=others, pool=pool, max_starts=starts,
                    fusion_levels=policy.config.fusion_levels, priority_levels=policy.config.priority_levels,
                    priorities=TrainConfig.polish_priorities, race=race)
    if result.score.rank_key < found.score.rank_key:
        found = BestFound(result.decisions, result.score, env)
    return found, result.evaluations


class _Leaders:
    """The `size` fastest fitting distinct placements a zero-shot simulated, each with its best
    fusion and priority decisions so far: where its joint variants are tried."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: list[BestFound] = []

    def offer(self, found: BestFound) -> None:
        if self.size <= 0 or found.score.oom or found.score.invalid:
            return
        device = np.asarray(found.decisions.device)
        for i, item in enumerate(self.items):
            if np.array_equal(np.asarray(item.decisions.device), device):
                if found.score.step_time_s < item.score.step_time_s:
                    self.items[i] = found
                break
        else:
            self.items.append(found)
        self.items.sort(key=lambda f: f.score.step_time_s)
        del self.items[self.size :]

    def offer_episodes(self, rollout: GraphRollout) -> None:
        for decisions, score in zip(rollout.decisions, rollout.scores):
            self.offer(BestFound(decisions, score, rollout.env))

    def best_joint(self, found: BestFound, levels: PolicyConfig, deadline: float | None = None) -> tuple[BestFound, int]:
        """`found`, or a faster joint variant of a leader (none started past `deadline`); and how
        many variants were simulated."""
        from compiler_opt.rl.joint import best_joint_variant

        tried = 0
        for leader in self.items:
            if _past(deadline):
                break
            _, decisions, score, count = best_joint_variant(
                leader.env, leader.decisions, leader.score, fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels
            )
            tried += count
            if score.rank_key < found.score.rank_key:
                found = BestFound(decisions, score, leader.env)
        return found, tried


def _past(deadline: float | None) -> bool:
    """Whether the process CPU time has passed `deadline` (None: never)."""
    return deadline is not None and time.process_time() >= deadline


def _faster(env: GraphEnvironment, actions: np.ndarray, found: BestFound, leaders: _Leaders | None = None) -> BestFound:
    """`found`, or the decision `actions` (N, 3) decode to when it simulates faster (offered to
    `leaders` either way)."""
    decisions = env.decisions(actions)
    score = env.score_decisions(decisions, with_reward=False)
    candidate = BestFound(decisions, score, env)
    if leaders is not None:
        leaders.offer(candidate)
    return candidate if score.rank_key < found.score.rank_key else found


def _best_smoothed(
    rollout: GraphRollout, found: BestFound, weights: Sequence[float], leaders: _Leaders | None = None, deadline: float | None = None
) -> tuple[BestFound, int]:
    """`found`, or a faster smoothed decoding (policy/smoothing.py) of `rollout`'s greedy episode
    (episode 0, unseeded): its last round's placement log-probabilities, as sampled (no second
    encoding of the graph), decoded at each weight with that episode's fusion and priority
    levels; each distinct placement simulated once. Returns it and how many were simulated."""
    env = rollout.env
    log_probs = rollout.place_log_prob[0].numpy()
    last = rollout.actions[-1, 0].numpy()
    edges = env.inputs.edge_index.numpy()
    seen = {last[:, 0].tobytes()}
    for weight in weights:
        if _past(deadline):
            break
        device = smooth_placement(log_probs, edges, weight, start=last[:, 0])
        if device.tobytes() in seen:
            continue
        seen.add(device.tobytes())
        actions = last.copy()
        actions[:, 0] = device
        found = _faster(env, actions, found, leaders)
    return found, len(seen) - 1


def _best_coarsened(rollout: GraphRollout, found: BestFound, leaders: _Leaders | None = None, deadline: float | None = None) -> tuple[BestFound, int]:
    """`found`, or a faster coarsening (policy/coarsen.py) of `rollout`'s greedy episode or its
    best one, with that episode's fusion and priority levels; each distinct placement simulated
    once. Returns it and how many were simulated."""
    env = rollout.env
    mask = env.inputs.device_mask.numpy()
    final = rollout.actions[-1].numpy()
    seen: set[bytes] = set()
    for episode in dict.fromkeys((0, rollout.best()[0])):
        for device in coarsened_placements(final[episode, :, 0], mask):
            if _past(deadline):
                return found, len(seen)
            if device.tobytes() in seen:
                continue
            seen.add(device.tobytes())
            actions = final[episode].copy()
            actions[:, 0] = device
            found = _faster(env, actions, found, leaders)
    return found, len(seen)


def _best_partitioned(
    rollout: GraphRollout, found: BestFound, exponents: Sequence[float], leaders: _Leaders | None = None, deadline: float | None = None
) -> tuple[BestFound, int]:
    """`found`, or a faster partitioned decoding (policy/partitioned.py) of `rollout`'s greedy
    episode (episode 0, unseeded): its last round's placement log-probabilities, as sampled,
    with that episode's fusion and priority levels; each distinct placement simulated once.
    Returns it and how many were simulated."""
    env = rollout.env
    last = rollout.actions[-1, 0].numpy()
    placements = _greedy_partitions(rollout, exponents)
    tried = 0
    for device in placements:
        if _past(deadline):
            break
        actions = last.copy()
        actions[:, 0] = device
        found = _faster(env, actions, found, leaders)
        tried += 1
    return found, tried


def _greedy_partitions(rollout: GraphRollout, exponents: Sequence[float]) -> list[np.ndarray]:
    """The distinct partitioned placements (policy/partitioned.py) of `rollout`'s greedy episode
    (episode 0): its last round's placement log-probabilities, as sampled."""
    inputs = rollout.env.inputs
    return partitioned_placements(
        rollout.place_log_prob[0].numpy(), inputs.edge_index.numpy(),
        None if inputs.edge_bytes is None else inputs.edge_bytes.numpy(),
        None if inputs.node_time is None else inputs.node_time.numpy(),
        inputs.device_mask.numpy(), rollout.actions[-1, 0, :, 0].numpy(), exponents=exponents,
    )


def policy_decodings(
    policy: GoPolicy, env: GraphEnvironment, *, seed: int = 0, partition: Sequence[float] = AGREEMENT_EXPONENTS, coarsen: bool = True
) -> list[BestFound]:
    """The policy's unseeded greedy answer and that answer's partitioned (policy/partitioned.py)
    and coarsened (policy/coarsen.py) placements with its fusion and priority levels, each
    distinct placement simulated once; the fitting ones, fastest first: fine-tune's polish
    starts after the zero-shot's answer (`TrainConfig.policy_starts` > 1)."""
    generator = torch.Generator().manual_seed(seed)
    rollout = collect_rollouts(policy, [env], 1, generator=generator, greedy_first=True, with_reward=False)[0]
    inputs = env.inputs
    last = rollout.actions[-1, 0].numpy()
    placements = _greedy_partitions(rollout, partition) if partition else []
    if coarsen:
        placements += coarsened_placements(last[:, 0], inputs.device_mask.numpy())
    found = [BestFound(rollout.decisions[0], rollout.scores[0], env)]
    seen = {last[:, 0].tobytes()}
    for device in placements:
        if device.tobytes() in seen:
            continue
        seen.add(device.tobytes())
        actions = last.copy()
        actions[:, 0] = device
        decisions = env.decisions(actions)
        found.append(BestFound(decisions, env.score_decisions(decisions, with_reward=False), env))
    fitting = [f for f in found if not (f.score.oom or f.score.invalid)]
    return sorted(fitting, key=lambda f: f.score.step_time_s)


def _best_of_rounds(rollout: GraphRollout, found: BestFound, leaders: _Leaders | None = None, deadline: float | None = None) -> tuple[BestFound, int]:
    """`found`, or a faster decision of an earlier refinement round of `rollout`'s episodes
    (each distinct one simulated once; none past `deadline`), and how many were simulated."""
    env = rollout.env
    seen: set[bytes] = set()
    for step in rollout.actions[:-1]:
        for actions in step.numpy():
            if _past(deadline):
                return found, len(seen)
            key = actions.tobytes()
            if key in seen:
                continue
            seen.add(key)
            found = _faster(env, actions, found, leaders)
    return found, len(seen)


@gc_frozen()
def run_training(
    config: TrainConfig,
    *,
    command: str = "",
    envs: Sequence[GraphEnvironment] | None = None,
    policy: GoPolicy | None = None,
    progress: bool = True,
    save: bool = True,
) -> TrainResult:
    """Run `config.mode` (module docstring). `save=False`: no checkpoints or scalar files (the
    `go` pass's fine-tune and GO-one runs, whose result is the decisions)."""
    began = time.monotonic()
    began_cpu = time.process_time()
    torch.use_deterministic_algorithms(True, warn_only=True)
    envs = list(envs) if envs is not None else build_environments(config)
    policy = policy if policy is not None else make_policy(config)
    best: dict[str, BestFound] = {}
    if config.mode == "zero-shot":
        for env in envs:
            best[env.label] = zero_shot(policy, env, config.zero_shot_samples, seed=config.seed, seeds=config.seed_methods())
        return TrainResult(policy, best, 0, time.monotonic() - began)
    if config.mode == "imitate":
        return _run_imitation(config, envs, policy, command=command, progress=progress, save=save, began=began)

    trainer = PPOTrainer(policy, config)
    scalars = ScalarLogger(config.out_dir) if save else None
    saver = CheckpointSaver(config.out_dir, every_s=config.checkpoint_every_s, train_config=config.to_dict(), command=command) if save else None
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    history: list[dict[str, float]] = []
    # env label -> its best episode so far as a replayable episode (actions (T, 1, N, 3), ...)
    replayed: dict[str, SeedEpisode] = {}
    initial: dict[str, torch.Tensor] = {}  # warm start: env label -> the (N, 3) decisions its episodes edit
    seed_began = time.process_time()
    seeds, pending = _warm_start(config, envs, policy, best, initial, replayed)
    seed_cpu = time.process_time() - seed_began
    # The policy's start may not eat into the polish's share: past it, the zero-shot keeps what it has.
    start_deadline = began_cpu + config.max_cpu_seconds * (1 - config.polish_fraction) if config.max_cpu_seconds and config.polishes() else None
    decoded = _decoded_starts(config, envs, policy, best, start_deadline)
    env_history: list[dict[str, dict[str, list[float]]]] = []
    bar = _progress(config.iterations, progress)
    iteration = 0
    ppo_cpu = config.max_cpu_seconds * (1.0 - config.polish_share())  # PPO stops here (the polish has the rest)
    last_cost: float | None = None  # the last iteration's CPU seconds
    # PPO's patience (h23): the CPU time of its last improvement, or of its start
    patience = config.ppo_patience_cpu if config.max_cpu_seconds and config.polishes() else 0.0
    improved_cpu = time.process_time()
    try:
        for iteration in range(1, config.iterations + 1):
            started = time.monotonic()
            started_cpu = time.process_time()
            chosen = rng.choice(len(envs), size=min(config.graphs_per_iteration, len(envs)), replace=False)
            batch = [envs[i] for i in sorted(chosen.tolist())]
            if config.max_cpu_seconds and not _iteration_fits(config, batch, last_cost, ppo_cpu - (started_cpu - began_cpu)):
                iteration -= 1
                break
            rollouts = collect_rollouts(policy, batch, config.samples_per_graph, generator=generator, initial=initial)
            sampled_rewards = torch.cat([r.rewards for r in rollouts])  # before any replayed episode
            episodes = {r.env.label: _episode_record(r) for r in rollouts}
            oom = float(np.mean([s.oom for r in rollouts for s in r.scores]))
            for rollout in rollouts:
                label = rollout.env.label
                index, score = rollout.best()
                kept = replayed.get(label)
                seeded = rollout.initial is not None
                if _update_best(best, rollout.env, rollout.decisions[index], score):
                    improved_cpu = time.process_time()
                    first = rollout.initial[index].clone() if rollout.initial is not None else None
                    replayed[label] = SeedEpisode("sampled", rollout.actions[:, index : index + 1].clone(), score, rollout.decisions[index], first)
                    if seeded:
                        initial[label] = rollout.actions[-1, index].clone()  # later episodes edit the new best
                elif config.replay_best and kept is not None and (kept.initial is not None) == seeded:
                    replay_episode(policy, rollout, kept.actions, kept.score, kept.decisions, kept.initial)
                for episode in pending.pop(label, []):  # warm-start seeds join the first batch of their env
                    if (episode.initial is not None) == seeded:
                        replay_episode(policy, rollout, episode.actions, episode.score, episode.decisions, episode.initial)
            stats = trainer.update(rollouts)
            rewards = sampled_rewards
            ratios = [b.ratio for b in best.values()]
            record = {
                "iteration": iteration,
                "reward_mean": float(rewards.mean()),
                "reward_max": float(rewards.max()),
                "oom_fraction": oom,
                "best_ratio_geomean": float(np.exp(np.mean(np.log(ratios)))) if ratios else math.nan,
                "policy_loss": stats.policy_loss,
                "value_loss": stats.value_loss,
                "entropy": stats.entropy,
                "entropy_coef": stats.entropy_coef,
                "clip_fraction": stats.clip_fraction,
                "grad_norm": stats.grad_norm,
                "seconds": time.monotonic() - started,
                "cpu_seconds": time.process_time() - began_cpu,
            }
            history.append(record)
            env_history.append(episodes)
            if scalars is not None and saver is not None:
                for key, value in record.items():
                    if key != "iteration":
                        scalars.scalar(f"train/{key}", value, iteration)
                saver.step(policy, record["reward_mean"], record)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(best=_best_text(best, envs), reward=f"{record['reward_mean']:.3f}")
            if config.max_seconds and time.monotonic() - began >= config.max_seconds:
                logger.info("stopping after %.0f s (max_seconds)", time.monotonic() - began)
                break
            last_cost = time.process_time() - started_cpu
            if config.max_cpu_seconds and time.process_time() - began_cpu >= ppo_cpu:
                logger.info("stopping after %.0f CPU s (max_cpu_seconds, %.0f%% left to the polish)", time.process_time() - began_cpu, 100 * config.polish_share())
                break
            if patience and time.process_time() - improved_cpu >= patience:
                logger.info("PPO stops after %d iterations: no better answer in %.1f CPU s (ppo_patience_cpu); the polish gets the rest", iteration, patience)
                break
    finally:
        if bar is not None:
            bar.close()
        if scalars is not None:
            scalars.close()
    if saver is not None:
        saver.step(policy, float("-inf"), history[-1] if history else {}, final=True)
    polished = _polish(config, envs, best, policy.config, seeds, time.process_time() - began_cpu, decoded) if config.polishes() else {}
    backend = scalars.backend if scalars is not None else "none"
    return TrainResult(policy, best, iteration, time.monotonic() - began, backend, history, env_history, seeds, seed_cpu, polished, decoded)


def _iteration_fits(config: TrainConfig, batch: Sequence[GraphEnvironment], last_cost: float | None, left: float) -> bool:
    """Whether one more PPO iteration is expected to end within the `left` CPU seconds of PPO's
    budget: the last iteration's cost, or before the first `ppo_cpu_per_node_sample` x nodes x
    samples. One iteration on a 29k-node graph costs ~60 CPU s here: started anyway, it ran a
    20-second budget to 90 (RESULTS.md h6)."""
    nodes = sum(env.inputs.num_nodes for env in batch)
    predicted = last_cost if last_cost is not None else config.ppo_cpu_per_node_sample * nodes * config.samples_per_graph
    if predicted <= left:
        return True
    logger.info("PPO stops: the next iteration (~%.1f CPU s for %d nodes) would not end within the %.1f CPU s left", predicted, nodes, max(left, 0.0))
    return False


def _run_imitation(
    config: TrainConfig, envs: Sequence[GraphEnvironment], policy: GoPolicy, *, command: str, progress: bool, save: bool, began: float
) -> TrainResult:
    """Mode imitate (rl/imitation.py): search targets (or reuse `imitation_targets`), clone them
    for `iterations` steps, save `imitated.pt`; each environment's greedy answer is the result."""
    from compiler_opt.rl.imitation import imitate, load_targets, save_targets, search_target

    out = Path(config.out_dir)
    targets = load_targets(config.imitation_targets) if config.imitation_targets else []
    known = {t.label for t in targets}
    missing = [env for env in envs if env.label not in known]
    from tqdm import tqdm

    for env in tqdm(missing, desc="imitation targets", unit="graph", leave=False, disable=not progress or not missing):
        target = search_target(env, config.imitation_seconds, seed=config.seed, race=config.polish_race)
        targets.append(target)
        logger.info("%s: target %.4g s (%.3fx the reference, from %s)", env.label, target.step_s, target.step_s / target.reference_s, target.method)
        if save:
            save_targets(out / "targets.npz", targets)  # after each: a stopped run keeps what it searched
    history = imitate(
        policy, envs, targets, steps=config.iterations, learning_rate=config.learning_rate, seed=config.seed, progress=progress,
        sampled_fraction=config.imitation_sampled, by_gain=config.imitation_by_gain, heads=config.imitation_heads,
        colocation=config.imitation_colocation,
    )
    if save:
        save_checkpoint(
            out / "imitated.pt", policy, train_config=config.to_dict(), command=command,
            extra={"imitation": {t.label: [t.step_s, t.reference_s, t.method] for t in targets}},
        )
    # The fit on the training graphs: the policy's own answer, not its coarsenings, partitions or joint variants.
    best = {env.label: zero_shot(policy, env, 0, seed=config.seed, coarsen=False, partition=(), joint=0) for env in envs}
    return TrainResult(policy, best, config.iterations, time.monotonic() - began, history=history)


def _decoded_starts(
    config: TrainConfig, envs: Sequence[GraphEnvironment], policy: GoPolicy, best: dict[str, BestFound], deadline: float | None = None
) -> dict[str, list[BestFound]]:
    """Per environment, when the run polishes with `policy_starts` of the policy's answers: the
    cold zero-shot's answer (`zero_shot` with `decoded_start_samples`, no candidate past `deadline`,
    the end of the CPU share before the polish's: so a fine-tune is never slower than a zero-shot
    in that time), then with more starts the greedy answer's other decodings (`policy_decodings`),
    fastest first. The fastest is an answer candidate at once."""
    decoded: dict[str, list[BestFound]] = {}
    if not config.polishes() or config.policy_starts == 0:
        return decoded
    for env in envs:
        if not isinstance(env, GraphEnvironment):
            continue  # a profiled workload: no fusion decode or partitioned cut to polish
        cold = zero_shot(policy, env, config.decoded_start_samples, seed=config.seed, deadline=deadline)
        found = [cold] if not (cold.score.oom or cold.score.invalid) else []
        if config.policy_starts > 1:
            found = sorted(found + policy_decodings(policy, env, seed=config.seed), key=lambda f: f.score.step_time_s)
        decoded[env.label] = found
        if found:
            _update_best(best, env, found[0].decisions, found[0].score)
    return decoded


def _polish(
    config: TrainConfig,
    envs: Sequence[GraphEnvironment],
    best: dict[str, BestFound],
    levels: PolicyConfig,
    seeds: dict[str, list[Seed]],
    spent: float,
    decoded: dict[str, list[BestFound]] | None = None,
) -> dict[str, Polished]:
    """Each environment's best answer polished by local search and joint variants (rl/polish.py),
    which replaces it when faster; the search gets the CPU budget left after `spent` (PPO stops
    early to leave it `polish_fraction`), at least `polish_min_fraction` of it when the phases
    before overran, split evenly between the environments. The search races the answer's placement against the fastest
    distinct placements of `policy_starts` of the policy's `decoded` placements, then of the
    environment's fitting warm-start seeds (`polish_starts` in all)."""
    out: dict[str, Polished] = {}
    floor = min(config.polish_min_fraction, config.polish_fraction)
    total = max(config.max_cpu_seconds * floor, config.max_cpu_seconds - spent) if config.max_cpu_seconds else 0.0
    share = total / max(len(envs), 1)
    for env in envs:
        found = best.get(env.label)
        if found is None or not isinstance(env, GraphEnvironment):
            continue  # nothing fits, or a profiled workload (device arrays scored by another model)
        answer = np.asarray(found.decisions.device)
        mine = [np.asarray(d.decisions.device) for d in (decoded or {}).get(env.label, [])]
        mine = [d for d in mine if not np.array_equal(d, answer)][: config.policy_starts]
        others, pool = start_candidates(
            answer, seeds.get(env.label, []), config.polish_starts - 1, first=mine, prefer=config.polish_first_seeds, order=config.polish_start_order
        )
        result = polish(
            env, found.decisions, found.score, cpu_seconds=share, evaluations=None if share > 0 else config.polish_evaluations, seed=config.seed,
            fusion_levels=levels.fusion_levels, priority_levels=levels.priority_levels, others=others, pool=pool,
            max_starts=config.polish_starts, group_moves=config.polish_group_moves, move_order=config.polish_move_order,
            priorities=config.polish_priorities, race=config.polish_race,
        )
        out[env.label] = result
        if result.improved:
            best[env.label] = BestFound(result.decisions, result.score, env)
    return out


def _warm_start(
    config: TrainConfig,
    envs: Sequence[GraphEnvironment],
    policy: GoPolicy,
    best: dict[str, BestFound],
    initial: dict[str, torch.Tensor],
    replayed: dict[str, SeedEpisode],
) -> tuple[dict[str, list[Seed]], dict[str, list[SeedEpisode]]]:
    """Run the warm-start seeds of every environment (rl/warm_start.py): the best fitting seed
    becomes the environment's best answer and its episodes' first-round input; the best
    `seed_replay` replayable seeds are returned per environment to join its first PPO batch
    (and, scored as episodes, are answer candidates too)."""
    methods = config.seed_methods()
    seeds: dict[str, list[Seed]] = {}
    pending: dict[str, list[SeedEpisode]] = {}
    if not methods:
        return seeds, pending
    budget = config.max_cpu_seconds * config.warm_start_fraction / len(envs)
    levels = policy.config.fusion_levels
    for env in envs:
        if not isinstance(env, GraphEnvironment):
            # ProfiledEnvironment: its placements are device arrays scored by another model; no seeds.
            logger.info("%s: no warm start for %s", env.label, type(env).__name__)
            continue
        found = warm_start_seeds(env, methods, fusion_levels=levels, priority_levels=policy.config.priority_levels, cpu_budget=budget)
        seeds[env.label] = found
        fitting = fitting_seeds(found)
        if not fitting:
            logger.warning("%s: no warm-start seed fits in memory; episodes start from scratch", env.label)
            continue
        head = fitting[0]
        _update_best(best, env, head.decisions, head.score)
        initial[env.label] = head.actions
        episodes = []
        for seed in fitting:
            if len(episodes) >= config.seed_replay:
                break
            if any(torch.equal(seed.actions, e.initial) for e in episodes):
                continue  # two methods, one placement
            episode = seed_episode(env, seed, policy.config.iterations)
            if episode is not None:
                episodes.append(episode)
                # Scored as the policy's decoder reads it: the classical score where the graph has a
                # default fusion (relative levels), else fuse-by-priority on its levels, which can
                # beat the classical score: an answer candidate like any episode.
                _update_best(best, env, episode.decisions, episode.score)
        pending[env.label] = episodes
        if episodes and episodes[0].method == head.method:
            replayed[env.label] = episodes[0]
        logger.info("%s: warm start from %s (%.4g s) of %d seeds", env.label, head.method, head.score.step_time_s, len(found))
    return seeds, pending


def _episode_record(rollout: GraphRollout) -> dict[str, list[float]]:
    ref = rollout.env.reference_step_s
    ratios = [s.step_time_s / ref for s in rollout.scores if not (s.oom or s.invalid)]
    return {"reward": rollout.rewards.tolist(), "ratio": ratios}


def _best_text(best: dict[str, BestFound], envs: Sequence[GraphEnvironment]) -> str:
    if len(envs) == 1 and best:
        found = next(iter(best.values()))
        return f"{found.score.step_time_s * 1e3:.3f} ms ({found.ratio:.3f}x ref)"
    ratios = [b.ratio for b in best.values()]
    return f"{float(np.exp(np.mean(np.log(ratios)))):.3f}x ref" if ratios else "-"


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="PPO", unit="it", dynamic_ncols=True)
