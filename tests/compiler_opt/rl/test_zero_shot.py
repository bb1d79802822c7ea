"""Zero-shot decoding (rl/trainer.zero_shot): every refinement round's decision is a candidate."""

from __future__ import annotations

import torch

from compiler_opt.policy import GoPolicy, PolicyConfig
from compiler_opt.rl import GraphEnvironment, zero_shot
from compiler_opt.rl.rollout import collect_rollouts
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.devices.loader import load_topology
from graph_ir.io.onnx_import import import_onnx


def test_the_answer_is_the_fastest_decision_of_any_round() -> None:
    torch.set_num_threads(1)
    env = GraphEnvironment("dag", import_onnx(random_onnx_dag(80, seed=3)), load_topology("4xV100"))
    torch.manual_seed(2)  # an untrained policy whose middle round beats its last
    policy = GoPolicy(PolicyConfig(hidden=16, heads=2, segment=8, sage_layers=1, attention_layers=1, iterations=3))
    found = zero_shot(policy, env, 5, seed=4)
    # The same episodes again (zero_shot seeds its generator with `seed`), every round scored.
    rollout = collect_rollouts(policy, [env], 6, generator=torch.Generator().manual_seed(4), greedy_first=True, with_reward=False)[0]
    assert rollout.actions.shape[0] == 3
    steps = [[env.score(a, with_reward=False).step_time_s for a in rollout.actions[t].numpy()] for t in range(3)]
    assert found.score.step_time_s == min(min(s) for s in steps)
    assert min(steps[1]) < min(steps[-1])  # so the test sees an earlier round win
    assert env.score_decisions(found.decisions, with_reward=False).step_time_s == found.score.step_time_s
    distinct = {a.tobytes() for t in range(2) for a in rollout.actions[t].numpy()}
    assert found.evaluations == 6 + len(distinct)
