"""RL training of the GO policy, one module per role (MLGO style): `environment` (a graph on a
topology, scored by the simulator), `rollout` (episode collection), `ppo` (the trainer), `config`
(the run's configuration), `saver` (checkpoints), `scalars` (TensorBoard/CSV), `trainer` (the
loop and the go-one / pretrain / zero-shot / fine-tune modes), `warm_start` (classical placements
that seed fine-tune and go-one).
"""

from __future__ import annotations

from compiler_opt.rl.config import MODES, TrainConfig, TrainConfigError
from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment
from compiler_opt.rl.ppo import PPOStats, PPOTrainer, normalized_advantages
from compiler_opt.rl.rollout import GraphRollout, collect_rollouts
from compiler_opt.rl.trainer import BestFound, TrainResult, build_environments, load_graph, make_policy, run_training, zero_shot

__all__ = [
    "MODES",
    "BestFound",
    "EpisodeScore",
    "GraphEnvironment",
    "GraphRollout",
    "PPOStats",
    "PPOTrainer",
    "TrainConfig",
    "TrainConfigError",
    "TrainResult",
    "build_environments",
    "collect_rollouts",
    "load_graph",
    "make_policy",
    "normalized_advantages",
    "run_training",
    "zero_shot",
]
