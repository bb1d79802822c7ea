"""Imitation pretraining: the policy learns to place as the project's search places.

PPO at paper size barely moves the policy on this machine (WORKSPACE.md "Pretraining record":
20 updates per environment per hour, flat reward), and the search (warm-start seeds + the raced
group-move polish, `rl/polish.py`) finds placements 0.1-0.7x the human expert in seconds. So the
policy is pretrained by behaviour cloning of those placements (expert iteration's first step):

1. Targets: per training environment, the seeds and the polish run for `seconds` CPU seconds
   (`bench_go`'s `seeds+polish` row, the control without a policy); its placement is the target.
2. Canonical device labels: identical devices are interchangeable, so a target is relabelled so
   that the first device used in topological order is the lowest-ordinal one, and so on; the
   policy's contiguity prior and ordinal features then see one labelling, not D! of them.
3. Loss: cross-entropy of the placement logits against the target at both refinement rounds:
   round 1 from nothing, round 2 conditioned on round 1's greedy decisions (so the second round
   learns to correct the first, through the placement context, `policy/context.py`). Nodes
   whose target device is masked are skipped.
4. Fusion and scheduling targets (`heads="all"`): the searched placement's fastest joint variant
   (`joint_target`: the default fusion kept or merged beyond it, priorities flat or critical path
   first, rl/joint.py), as the policy's own fusion and priority levels; their cross-entropies join
   the placement's at both rounds. Without them the policy's fusion and scheduling heads keep
   whatever PPO taught them, and the placement it clones runs slower than the target did
   (rnnlm-2 at 2xV100: the target placement decoded with the policy's own levels is 0.63x the
   expert, with the target's levels 0.53x). Measured (RESULTS.md h12): at equal weights the
   levels' losses pulled the shared encoder away from the placement (zero-shot 0.592x -> 0.599x
   the expert over 30 cells), so `heads="placement"`, where those heads keep their priors, stays
   the default.

The checkpoint this writes is an ordinary policy checkpoint: zero-shot, fine-tune (which starts
from it) and PPO pretraining read it as any other.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from compiler_opt.policy.network import GoPolicy, gumbel_argmax
from compiler_opt.rl.config import IMITATION_HEADS
from compiler_opt.rl.environment import GraphEnvironment
from graph_ir._gc import gc_frozen
from graph_ir.io.atomic import atomic_path

__all__ = [
    "IMITATION_HEADS",
    "ImitationTarget",
    "canonical_devices",
    "colocation_loss",
    "imitation_loss",
    "imitate",
    "joint_target",
    "load_targets",
    "with_joint_target",
    "save_targets",
    "search_target",
]

# What `heads="levels"` trains: the fusion and priority heads' output layers alone, so the encoder
# the placement reads stays as it was (RESULTS.md h12: cloning all three heads together pulled
# the shared encoder away from the placement).
LEVEL_PARAMETERS = ("heads.fusion_out.", "heads.priority_out.")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImitationTarget:
    label: str  # the environment's label
    device: np.ndarray  # (N,) int64, canonical labels
    step_s: float  # the searched placement's step time
    reference_s: float  # the environment's reference (human expert) step time
    method: str  # the seed the search started from
    fusion: np.ndarray | None = None  # (N,) int64 fusion levels (joint_target), None: not known
    priority: np.ndarray | None = None  # (N,) int64 priority levels
    joint: str = ""  # the joint variant the levels came from ("keep+flat": the answer form)


def canonical_devices(device: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`device` (N,) relabelled among the devices every node may use (`mask` (N, D), columns in
    ordinal order): the first used in row order becomes the lowest, and so on; the rest keep
    their labels."""
    device = np.asarray(device, dtype=np.int64)
    usable = np.flatnonzero(np.asarray(mask, dtype=bool).all(axis=0))
    if usable.size == 0:
        return device.copy()
    usable_set = set(usable.tolist())
    seen = [d for d in dict.fromkeys(device.tolist()) if d in usable_set]
    order = seen + [d for d in usable.tolist() if d not in seen]
    remap = np.arange(mask.shape[1], dtype=np.int64)
    remap[order] = usable
    return remap[device]


def search_target(
    env: GraphEnvironment, seconds: float, *, seed: int = 0, fusion_levels: int = 4, priority_levels: int = 8, race: str | None = None
) -> ImitationTarget:
    """The placement `seeds+polish` finds on `env` in `seconds` CPU seconds (module docstring;
    only the placement is imitated, so the polish scores no joint variants); `race`: the polish's
    (default `TrainConfig.polish_race`; `go_small.pt`'s targets were made with "halving")."""
    from compiler_opt.rl.polish import seeds_and_polish

    found = seeds_and_polish(env, seconds, seed=seed, fusion_levels=fusion_levels, priority_levels=priority_levels, joint=False, race=race)
    done = found.polished
    mask = env.inputs.device_mask.numpy()
    target = ImitationTarget(env.label, canonical_devices(done.decisions.device, mask), done.score.step_time_s, env.reference_step_s, found.head.method)
    return with_joint_target(env, target, fusion_levels=fusion_levels, priority_levels=priority_levels)


def joint_target(env: GraphEnvironment, device: np.ndarray, *, fusion_levels: int, priority_levels: int, tolerance: float = 0.005) -> tuple[np.ndarray, np.ndarray, str, float]:
    """Fusion and priority levels (N,) for placement `device`: its fastest fitting joint variant
    (rl/joint.py) or, where the decoder reads levels against a default fusion, the answer form
    (every node at level 1, "keep the default group", flat priorities), as the policy's decoder
    reads them; (fusion, priority, variant name, step seconds). Variants within `tolerance` of
    the fastest tie and the first in this order wins, so tied graphs get one consistent target:
    merge+rank, merge+flat, keep+rank, keep+flat. The placement-only ablation has no variants:
    its levels are zeros (its decoder ignores them)."""
    from compiler_opt.rl.joint import joint_variants

    device = np.asarray(device, dtype=np.int64)
    variants = dict(joint_variants(env, device, fusion_levels=fusion_levels, priority_levels=priority_levels))
    if env.default_groups is not None and not env.placement_only:
        variants["keep+flat"] = np.stack([device, np.ones_like(device), np.zeros_like(device)], axis=1)
    candidates = [(name, variants[name]) for name in ("merge+rank", "merge+flat", "keep+rank", "keep+flat") if name in variants]
    scored = []
    for name, actions in candidates:
        score = env.score(actions, with_reward=False)
        if not (score.oom or score.invalid):
            scored.append((name, actions, score.step_time_s))
    if not scored:
        zeros = np.zeros_like(device)
        return zeros, zeros.copy(), "", float("inf")
    fastest = min(step for _, _, step in scored)
    name, actions, step = next(c for c in scored if c[2] <= fastest * (1.0 + tolerance))
    return actions[:, 1].copy(), actions[:, 2].copy(), name, step


def with_joint_target(env: GraphEnvironment, target: ImitationTarget, *, fusion_levels: int, priority_levels: int) -> ImitationTarget:
    """`target` with fusion and priority levels (`joint_target`) when it has none."""
    if target.fusion is not None and target.priority is not None:
        return target
    fusion, priority, name, _ = joint_target(env, target.device, fusion_levels=fusion_levels, priority_levels=priority_levels)
    return replace(target, fusion=fusion, priority=priority, joint=name)


def save_targets(path: str | Path, targets: Sequence[ImitationTarget]) -> None:
    """All targets in one `.npz` (atomic)."""
    arrays: dict[str, np.ndarray] = {}
    for i, t in enumerate(targets):
        arrays[f"device_{i}"] = t.device
        if t.fusion is not None and t.priority is not None:
            arrays[f"fusion_{i}"] = t.fusion
            arrays[f"priority_{i}"] = t.priority
    arrays["labels"] = np.array([t.label for t in targets])
    arrays["steps"] = np.array([[t.step_s, t.reference_s] for t in targets], dtype=np.float64).reshape(len(targets), 2)
    arrays["methods"] = np.array([t.method for t in targets])
    arrays["joints"] = np.array([t.joint for t in targets])
    with atomic_path(Path(path)) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def load_targets(path: str | Path) -> list[ImitationTarget]:
    with np.load(path, allow_pickle=False) as data:
        labels, steps, methods = data["labels"].tolist(), data["steps"], data["methods"].tolist()
        joints = data["joints"].tolist() if "joints" in data.files else [""] * len(labels)
        return [
            ImitationTarget(
                str(labels[i]), data[f"device_{i}"], float(steps[i, 0]), float(steps[i, 1]), str(methods[i]),
                data[f"fusion_{i}"] if f"fusion_{i}" in data.files else None,
                data[f"priority_{i}"] if f"priority_{i}" in data.files else None,
                str(joints[i]),
            )
            for i in range(len(labels))
        ]


def imitation_loss(
    policy: GoPolicy,
    env: GraphEnvironment,
    target: torch.Tensor,
    *,
    sampled: bool = False,
    generator: torch.Generator | None = None,
    levels: tuple[torch.Tensor, torch.Tensor] | None = None,
    colocation: float = 0.0,
    placement: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy of the placement logits against `target` (N,) at round 1 and round 2
    (conditioned on round 1's greedy decisions, or with `sampled` on decisions drawn from round
    1's distribution, as the zero-shot's sampled episodes are), over the nodes whose target is
    allowed. With `levels` (fusion (N,), priority (N,)) the fusion and priority heads'
    cross-entropies over every node are added to each round's. `colocation` > 0 adds that
    weight times `colocation_loss` to each round's. `placement=False`: the levels' cross-entropies
    alone (needs `levels`)."""
    if not placement and levels is None:
        raise ValueError("placement=False needs the fusion and priority levels")
    enc = policy.encode(env.inputs)
    place, fusion, priority = policy._logits(enc, None, 1)
    allowed = env.inputs.device_mask.gather(1, target[:, None]).squeeze(1)
    if not bool(allowed.any()):
        zero = place[torch.isfinite(place)].sum() * 0.0  # masked logits are -inf: -inf * 0 is nan
        return zero, zero
    cross_entropy = torch.nn.functional.cross_entropy

    def round_loss(logits: tuple[torch.Tensor, ...]) -> torch.Tensor:
        loss = cross_entropy(logits[0][0][allowed], target[allowed]) if placement else logits[1].new_zeros(())
        if colocation > 0 and placement:
            loss = loss + colocation * colocation_loss(logits[0][0], target, env.inputs.edge_index)
        if levels is not None:
            loss = loss + cross_entropy(logits[1][0], levels[0]) + cross_entropy(logits[2][0], levels[1])
        return loss

    first = round_loss((place, fusion, priority))
    if sampled:  # drawn as GoPolicy.sample draws
        previous = torch.stack([gumbel_argmax(logits.detach(), generator) for logits in (place, fusion, priority)], dim=-1)
    else:
        previous = torch.stack([place.argmax(-1), fusion.argmax(-1), priority.argmax(-1)], dim=-1).detach()
    if policy.config.iterations < 2:
        return first, first * 0.0
    second = round_loss(policy._logits(enc, previous, 1))
    return first, second


def colocation_loss(logits: torch.Tensor, target: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Label-free placement loss: per data edge, the probability that both ends land on one device
    (sum over devices of p(u, d) p(v, d)) against whether the target puts them on one device, as a
    binary cross-entropy averaged within each class (kept and cut edges weigh half each, since a
    split cuts few edges). A METIS target is a partition whose device labels the node features
    cannot predict (RESULTS.md h13); which edges it cuts is what this asks the policy to learn."""
    src, dst = edge_index[0], edge_index[1]
    if src.numel() == 0:
        return logits[torch.isfinite(logits)].sum() * 0.0
    p = torch.softmax(logits, dim=-1)  # masked devices (-inf) get 0
    same = (p[src] * p[dst]).sum(-1).clamp(1e-6, 1.0 - 1e-6)
    kept = target[src] == target[dst]
    loss = -torch.where(kept, same.log(), (1.0 - same).log())
    parts = [loss[mask].mean() for mask in (kept, ~kept) if bool(mask.any())]
    return sum(parts) / len(parts)


def imitate(
    policy: GoPolicy,
    envs: Sequence[GraphEnvironment],
    targets: Sequence[ImitationTarget],
    *,
    steps: int,
    learning_rate: float = 1e-3,
    seed: int = 0,
    max_grad_norm: float = 1.0,
    progress: bool = True,
    sampled_fraction: float = 0.0,
    by_gain: bool = False,
    heads: str = "placement",
    colocation: float = 0.0,
) -> list[dict[str, float]]:
    """`steps` Adam steps, each on one environment drawn at random; the history of losses. A
    `sampled_fraction` of the steps (drawn at random) condition round 2 on a sampled round 1
    (`imitation_loss`), so the second round also learns to mend the first round's samples.
    `by_gain`: environments are drawn in proportion to their target's gain over the reference,
    log(reference / target step), floored at 0.01 (advantage-weighted cloning: a target the
    search barely improved, often the expert's own split on a large graph, is rarely drawn).
    `heads`: "placement" clones the placement only; "all" the fusion and priority levels too
    (targets without levels get them from `joint_target` first); "levels" the levels alone,
    training only the two heads' output layers (`LEVEL_PARAMETERS`). `colocation`: weight of
    `colocation_loss` beside the placement's cross-entropy (0: off)."""
    if not 0.0 <= sampled_fraction <= 1.0:
        raise ValueError(f"sampled_fraction must be within [0, 1], got {sampled_fraction}")
    if heads not in IMITATION_HEADS:
        raise ValueError(f"heads must be one of {', '.join(IMITATION_HEADS)}, got {heads!r}")
    by_label = {t.label: t for t in targets}
    pairs = []
    gains = []
    for env in envs:
        target = by_label.get(env.label)
        if target is None:
            raise ValueError(f"no imitation target for {env.label}")
        if target.device.shape != (env.problem.num_nodes,):
            raise ValueError(f"{env.label}: target of {target.device.shape[0]} nodes, the graph has {env.problem.num_nodes}")
        levels = None
        if heads in ("all", "levels") and not env.placement_only:
            target = with_joint_target(env, target, fusion_levels=policy.config.fusion_levels, priority_levels=policy.config.priority_levels)
            levels = (torch.as_tensor(target.fusion, dtype=torch.int64), torch.as_tensor(target.priority, dtype=torch.int64))
        pairs.append((env, torch.as_tensor(target.device, dtype=torch.int64), levels))
        gains.append(max(math.log(target.reference_s / target.step_s), 0.01) if target.step_s > 0 and target.reference_s > 0 else 0.01)
    if not pairs:
        raise ValueError("no environments to imitate")
    if heads == "levels":
        kept = [i for i, pair in enumerate(pairs) if pair[2] is not None]  # placement-only environments have no levels
        if not kept:
            raise ValueError("no environment with fusion and priority levels to imitate")
        pairs, gains = [pairs[i] for i in kept], [gains[i] for i in kept]
        trained = [p for name, p in policy.named_parameters() if name.startswith(LEVEL_PARAMETERS)]
    else:
        trained = list(policy.parameters())
    policy.train()
    optimizer = torch.optim.Adam(trained, lr=learning_rate)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    draw = np.asarray(gains) / np.sum(gains)
    history: list[dict[str, float]] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc="imitate", unit="step", leave=False)
    began = time.process_time()
    # Only `trained` gets gradients: with heads="levels" backward then stops at the two output
    # layers instead of running through the encoder for gradients nobody applies.
    frozen = [p for p in policy.parameters() if p.requires_grad and not any(p is t for t in trained)]
    for p in frozen:
        p.requires_grad_(False)
    try:
        with gc_frozen():
            for step in range(steps):
                env, target, levels = pairs[int(rng.choice(len(pairs), p=draw))] if by_gain else pairs[int(rng.integers(len(pairs)))]
                sampled = bool(rng.random() < sampled_fraction) if sampled_fraction > 0 else False
                first, second = imitation_loss(
                    policy, env, target, sampled=sampled, generator=generator, levels=levels, colocation=colocation, placement=heads != "levels"
                )
                loss = first + second
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trained, max_grad_norm)
                optimizer.step()
                history.append({"step": step, "env": env.label, "round1": float(first.detach()), "round2": float(second.detach()), "sampled": sampled, "cpu_s": time.process_time() - began})
                if bar is not None:
                    recent = [h["round2"] for h in history[-20:]]
                    bar.set_postfix(loss=f"{np.mean(recent):.3f}")
                    bar.update(1)
    finally:
        for p in frozen:
            p.requires_grad_(True)
    if bar is not None:
        bar.close()
    policy.eval()
    if history and not all(math.isfinite(h["round1"]) for h in history):
        raise FloatingPointError("imitation loss is not finite")
    return history
