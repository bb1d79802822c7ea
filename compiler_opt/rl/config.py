"""`TrainConfig`: everything a training run depends on, at the driver edge only (MLGO style).

Stored in every checkpoint (with the command line) so a run can be reproduced.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from graph_ir.errors import CompilerOptError

__all__ = ["MODES", "POLISH_MODES", "WARM_START_MODES", "TrainConfig", "TrainConfigError", "unknown_placement_methods"]

MODES = ("go-one", "pretrain", "zero-shot", "fine-tune", "imitate")
IMITATION_HEADS = ("placement", "all", "levels")  # what mode imitate clones (rl/imitation.py)
RATIOS = ("decision", "episode")  # where PPO takes its importance ratio (rl/ppo.py)
# Modes that warm-start by default (`TrainConfig.warm_start=None`); measured in RESULTS.md (h4).
WARM_START_MODES = ("fine-tune", "go-one")
# Modes that end with a local-search polish of the best answer (rl/polish.py; RESULTS.md h6).
POLISH_MODES = ("fine-tune", "go-one")
# How the polish picks the warm-start seeds it races (rl/polish.start_candidates): by the seeds'
# own scores, or by the polish's own scoring of their placements.
START_ORDERS = ("seed", "polish")
# The priorities the polish's search scores placements with (rl/polish.py `_base`): the answer's, the default ones
# (what a classical placement is scored with), or both, each start raced under each.
POLISH_PRIORITIES = ("answer", "default", "both")
# How the polish's starts share its seconds (rl/polish.py): successive halving, or one after another, each searched
# until its local search stops on its own (`_sequential`, forty-fourth session).
POLISH_RACES = ("halving", "sequential")


def unknown_placement_methods(methods: list[str]) -> list[str]:
    """The names in `methods` that are no placement method (warm-start seeds are checked early)."""
    from passes.placement import METHODS

    return [m for m in methods if m not in METHODS]


class TrainConfigError(CompilerOptError):
    """A training configuration that cannot run (unknown mode, empty workload list, bad sizes)."""


@dataclass
class TrainConfig:
    mode: str = "pretrain"
    workloads: list[str] = field(default_factory=list)  # suite names ("rnnlm-2", "gnmt-4:inference") or model files
    paper_sizes: bool = False  # suite workloads at their paper sizes (model files are taken as they are)
    devices: list[str] = field(default_factory=lambda: ["4xV100"])  # one environment per (workload, devices)
    iterations: int = 100  # PPO iterations (zero-shot: ignored)
    graphs_per_iteration: int = 4  # environments sampled per iteration
    samples_per_graph: int = 8  # episodes per environment per iteration (K)
    # Measured with benchmarks/bench_go_learning.py (WORKSPACE.md, "Making PPO learn"): with
    # per-decision ratios few decisions are clipped, so a larger step and more epochs are safe,
    # and the entropy bonus must be small (at 0.01 it outweighed the advantage signal and the
    # per-node entropy rose while training).
    ppo_epochs: int = 4
    learning_rate: float = 3e-3
    clip: float = 0.2
    ratio: str = "decision"  # PPO importance ratio per decision (token-level) or per episode (rl/ppo.py)
    replay_best: bool = False  # add each environment's best episode so far to its PPO batch (self-imitation)
    # Warm start (rl/warm_start.py): classical placement methods run first, the best seeds the
    # search. None: the mode's default (`seed_methods`: DEFAULT_SEEDS in WARM_START_MODES); []: off.
    warm_start: list[str] | None = None
    warm_start_fraction: float = 0.5  # at most this share of max_cpu_seconds starts seed methods (0 budget: all run)
    seed_replay: int = 2  # the best this many seeds join the first PPO batch
    # Polish (rl/polish.py): fine-tune and GO-one end with a local search from the best answer,
    # scored as the environment scores it. With a CPU budget it gets this share of it (PPO stops
    # early to leave it); without one, at most `polish_evaluations` simulations. 0: off.
    polish_fraction: float = 0.5
    # When the phases before it overran their share (a 29k-node graph's seeds and policy start), the
    # polish still gets at least this share of max_cpu_seconds (never more than `polish_fraction`),
    # and otherwise only what is left.
    polish_min_fraction: float = 0.25
    polish_evaluations: int = 300
    # The polish races this many start placements: the answer's and the fastest distinct warm-start
    # seeds' (fastest as `polish_start_order` ranks them; rl/polish.py; RESULTS.md h7). 1: the answer's only.
    polish_starts: int = 4
    # Of those starts, up to this many are the policy's own answers, before the seeds: the cold
    # zero-shot's answer (so a fine-tune is never slower than a zero-shot), then the greedy
    # answer's partitioned / coarsened decodings, fastest first (rl/trainer._decoded_starts).
    # 0: seeds only.
    policy_starts: int = 1
    # The policy's decoded start above is a cold zero-shot: its greedy answer and this many samples. 0 (the default
    # since the forty-eighth session's pre-registered test, RESULTS.md h: 27 training cells B/A 0.9992, 12 held-out
    # cells 0.9959, slower on none of 78 runs) keeps the greedy answer and its decodings only, and leaves the polish
    # the samples' CPU (gnmt-8: 3-5 of 20 CPU s). 8 was the default before. The zero-shot mode's own samples are
    # `zero_shot_samples`.
    decoded_start_samples: int = 0
    # With a CPU budget an iteration starts only when it is expected to end within PPO's share:
    # the last iteration's CPU seconds, or before the first this x nodes x samples (one torch
    # thread on this 2-core machine: 0.18-0.36 ms, RESULTS.md h6).
    ppo_cpu_per_node_sample: float = 3.5e-4
    polish_group_moves: bool = True  # the polish's local search moves whole fusion groups (else single nodes)
    polish_move_order: str = "random"  # the polish's local-search move order (local_search.MOVE_ORDERS)
    # Warm-start seeds whose placements the polish races right after the policy's starts, before
    # the fastest seeds (rl/polish.start_placements), whatever their own score: a start's score
    # says little about where its search ends (RESULTS.md h20).
    polish_first_seeds: tuple[str, ...] = ()
    # How the polish picks the seeds it races (START_ORDERS): "polish", the fastest as the polish's
    # search scores their placements (the default since RESULTS.md h22: 27 training cells 0.32%
    # faster, 5 faster by > 1% and 2 slower; held out a tie); "seed", the fastest by their own
    # scores (each seed's own fusion and priorities), the order before the thirty-eighth session.
    polish_start_order: str = "polish"
    # The priorities the polish's search scores with (POLISH_PRIORITIES): "answer", the answer's own (the default);
    # "default", the graph's default ones; "both", every start raced under each (twice the starts; forty-second
    # session, RESULTS.md h: the default priorities searched 4.1% faster on one held-out cell and 1.4% slower on another).
    polish_priorities: str = "answer"
    # How the polish's starts share its seconds (POLISH_RACES): "sequential" (fastest start first, each until its search
    # stalls; rl/polish._sequential; the default since the forty-fourth session's second pre-registered test, RESULTS.md
    # h: ten held-out cells B/A 0.984, 27 training cells 0.990) or "halving" (successive halving, the default before).
    polish_race: str = "sequential"
    # With a CPU budget and a polish, PPO stops once no iteration has improved any environment's
    # best answer for this many CPU seconds (counted from its first iteration), and the polish gets
    # the rest. 0: off (PPO runs to its share, the default before RESULTS.md h23: 27 training cells
    # 0.18% faster, 2 faster by > 1% and none slower; held out a tie; both within the rows' own
    # run-to-run spread).
    ppo_patience_cpu: float = 4.0
    entropy_coef: float = 1e-3
    entropy_target: float = 0.0  # > 0: per-node entropy target; entropy_coef becomes a signed controller (rl/ppo.py)
    entropy_rate: float = 1e-3  # the controller's step per unit of entropy error per update
    value_coef: float = 0.5
    max_grad_norm: float = 1.0
    reference: str = "human-expert"  # classical placement whose step time scales the reward
    oom_penalty: float = 1.0
    invalid_penalty: float = 4.0
    seed: int = 0
    max_seconds: float = 0.0  # stop after this much wall time (0: no limit)
    max_cpu_seconds: float = 0.0  # stop after this much CPU time of this process (0: no limit): fair budgets on a shared machine
    checkpoint_every_s: float = 300.0
    out_dir: str = "runs/go"
    init_checkpoint: str = ""  # start from these weights (fine-tune; zero-shot)
    zero_shot_samples: int = 8  # zero-shot: greedy answer plus this many samples, best kept
    policy: dict[str, int] = field(default_factory=dict)  # PolicyConfig overrides
    # Imitation pretraining (mode imitate, rl/imitation.py): `iterations` Adam steps of behaviour
    # cloning on the placements seeds + polish find in `imitation_seconds` CPU seconds per
    # environment; `imitation_targets`: a targets file to reuse (written to out_dir otherwise).
    imitation_seconds: float = 10.0
    imitation_targets: str = ""
    # The fraction of imitation steps whose round 2 is conditioned on a sampled round 1 (the
    # zero-shot's sampled episodes), not the greedy one.
    imitation_sampled: float = 0.0
    # Draw imitation environments in proportion to their target's gain over the reference.
    imitation_by_gain: bool = False
    # The heads imitation trains: "placement", "all" (the fusion and priority levels of the
    # target's fastest joint variant too, rl/imitation.py), or "levels" (those levels alone, on
    # the two heads' output layers only).
    imitation_heads: str = "placement"
    # Weight of the co-location loss beside the placement cross-entropy (rl/imitation.py); 0: off.
    imitation_colocation: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TrainConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}", field="mode")
        if self.ratio not in RATIOS:
            raise TrainConfigError(f"ratio must be one of {', '.join(RATIOS)}, got {self.ratio!r}", field="ratio")
        if not self.workloads:
            raise TrainConfigError("no workloads to train on", field="workloads")
        if self.mode in ("go-one", "fine-tune", "zero-shot") and len(self.workloads) * len(self.devices) != 1:
            raise TrainConfigError(f"mode {self.mode} works on one graph and one topology", field="workloads")
        for name in ("iterations", "graphs_per_iteration", "samples_per_graph", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise TrainConfigError(f"{name} must be at least 1, got {getattr(self, name)}", field=name)
        if self.samples_per_graph < 2 and self.mode not in ("zero-shot", "imitate"):
            raise TrainConfigError("samples_per_graph must be at least 2 (advantages are normalised per graph)", field="samples_per_graph")
        # NaN passes every `<` check and reached torch's optimizer as an internal error (forty-ninth session)
        for name in ("learning_rate", "clip", "max_grad_norm", "checkpoint_every_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise TrainConfigError(f"{name} must be a finite number > 0, got {getattr(self, name)}", field=name)
        for name in ("entropy_target", "entropy_rate", "value_coef", "oom_penalty", "invalid_penalty", "max_seconds", "max_cpu_seconds"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise TrainConfigError(f"{name} must be a finite number >= 0, got {getattr(self, name)}", field=name)
        if not math.isfinite(self.entropy_coef):
            raise TrainConfigError(f"entropy_coef must be a finite number, got {self.entropy_coef}", field="entropy_coef")

        if not 0.0 <= self.warm_start_fraction <= 1.0:
            raise TrainConfigError(f"warm_start_fraction must be within [0, 1], got {self.warm_start_fraction}", field="warm_start_fraction")
        if not 0.0 <= self.polish_fraction < 1.0:
            raise TrainConfigError(f"polish_fraction must be within [0, 1), got {self.polish_fraction}", field="polish_fraction")
        if not 0.0 <= self.polish_min_fraction < 1.0:
            raise TrainConfigError(f"polish_min_fraction must be within [0, 1), got {self.polish_min_fraction}", field="polish_min_fraction")
        if self.polish_evaluations < 0:
            raise TrainConfigError(f"polish_evaluations must be >= 0, got {self.polish_evaluations}", field="polish_evaluations")
        if self.decoded_start_samples < 0:
            raise TrainConfigError(f"decoded_start_samples must be >= 0, got {self.decoded_start_samples}", field="decoded_start_samples")
        if self.ppo_cpu_per_node_sample < 0:
            raise TrainConfigError(f"ppo_cpu_per_node_sample must be >= 0, got {self.ppo_cpu_per_node_sample}", field="ppo_cpu_per_node_sample")
        if not 0.0 <= self.imitation_sampled <= 1.0:
            raise TrainConfigError(f"imitation_sampled must be within [0, 1], got {self.imitation_sampled}", field="imitation_sampled")
        if self.imitation_heads not in IMITATION_HEADS:
            raise TrainConfigError(f"imitation_heads must be one of {', '.join(IMITATION_HEADS)}, got {self.imitation_heads!r}", field="imitation_heads")
        if not (self.imitation_colocation >= 0 and math.isfinite(self.imitation_colocation)):
            raise TrainConfigError(f"imitation_colocation must be a finite number >= 0, got {self.imitation_colocation}", field="imitation_colocation")
        if not self.imitation_seconds > 0:
            raise TrainConfigError(f"imitation_seconds must be > 0, got {self.imitation_seconds}", field="imitation_seconds")
        if self.policy:  # sizes of fresh weights (a checkpoint's own sizes win, `make_policy`)
            from compiler_opt.policy.config import PolicyConfig

            PolicyConfig.from_dict(self.policy)  # unknown fields and bad sizes fail here, not after the targets' search
        from passes.placement.local_search import MOVE_ORDERS

        if self.polish_move_order not in MOVE_ORDERS:
            raise TrainConfigError(
                f"polish_move_order must be one of {', '.join(MOVE_ORDERS)}, got {self.polish_move_order!r}", field="polish_move_order"
            )
        if self.polish_start_order not in START_ORDERS:
            raise TrainConfigError(
                f"polish_start_order must be one of {', '.join(START_ORDERS)}, got {self.polish_start_order!r}", field="polish_start_order"
            )
        if self.polish_priorities not in POLISH_PRIORITIES:
            raise TrainConfigError(
                f"polish_priorities must be one of {', '.join(POLISH_PRIORITIES)}, got {self.polish_priorities!r}", field="polish_priorities"
            )
        if self.polish_race not in POLISH_RACES:
            raise TrainConfigError(f"polish_race must be one of {', '.join(POLISH_RACES)}, got {self.polish_race!r}", field="polish_race")
        if not (math.isfinite(self.ppo_patience_cpu) and self.ppo_patience_cpu >= 0):
            raise TrainConfigError(f"ppo_patience_cpu must be a finite number >= 0, got {self.ppo_patience_cpu}", field="ppo_patience_cpu")
        if self.polish_starts < 1:
            raise TrainConfigError(f"polish_starts must be at least 1, got {self.polish_starts}", field="polish_starts")
        if self.policy_starts < 0:
            raise TrainConfigError(f"policy_starts must be >= 0, got {self.policy_starts}", field="policy_starts")
        if self.seed_replay < 0:
            raise TrainConfigError(f"seed_replay must be >= 0, got {self.seed_replay}", field="seed_replay")
        self.polish_first_seeds = tuple(self.polish_first_seeds)  # a list from a checkpoint's JSON
        unknown = unknown_placement_methods(list(self.polish_first_seeds))
        if unknown:
            from passes.placement import METHODS

            raise TrainConfigError(f"unknown placement methods {unknown} in polish_first_seeds; known: {', '.join(METHODS)}", field="polish_first_seeds")
        unknown = unknown_placement_methods(self.warm_start or [])
        if unknown:
            from passes.placement import METHODS

            raise TrainConfigError(f"unknown warm-start placement methods {unknown}; known: {', '.join(METHODS)}", field="warm_start")

    def seed_methods(self) -> list[str]:
        """The warm-start methods this run uses (empty: no warm start)."""
        if self.warm_start is not None:
            return list(self.warm_start)
        if self.mode in WARM_START_MODES:
            from compiler_opt.rl.warm_start import DEFAULT_SEEDS

            return list(DEFAULT_SEEDS)
        return []

    def polishes(self) -> bool:
        """Whether this run ends with a polish (rl/polish.py): the searching single-graph modes."""
        return self.mode in POLISH_MODES and self.polish_fraction > 0 and (self.max_cpu_seconds > 0 or self.polish_evaluations > 0)

    def polish_share(self) -> float:
        """The share of `max_cpu_seconds` PPO leaves to the polish."""
        return self.polish_fraction if self.polishes() and self.max_cpu_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
