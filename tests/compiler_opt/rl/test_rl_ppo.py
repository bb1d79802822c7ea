"""PPO: advantages, and an update that improves a tiny task whose optimum is known."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from compiler_opt.policy import GoPolicy, PolicyConfig
from compiler_opt.rl import GraphEnvironment, TrainConfig, TrainConfigError, collect_rollouts, normalized_advantages, run_training
from compiler_opt.rl.ppo import PPOTrainer
from compiler_opt.rl.rollout import replay_episode
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from graph_ir.graph import Graph
from graph_ir.io.onnx_import import import_onnx

TINY = PolicyConfig(hidden=16, heads=2, segment=8, sage_layers=1, attention_layers=1)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def matmul_chain(length: int = 12, width: int = 512) -> Graph:
    """x -> (MatMul, Relu) x length: no parallelism, so any device switch only adds a transfer."""
    rng = np.random.default_rng(0)
    nodes, weights, prev = [], [], "x"
    for i in range(length):
        weights.append(numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"]))
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [256, width])], weights,
    )
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    return import_onnx(model)


def test_normalized_advantages_are_per_graph_standardised() -> None:
    adv = normalized_advantages(torch.tensor([-2.0, -1.0, -1.0, 0.0]))
    torch.testing.assert_close(adv.mean(), torch.tensor(0.0))
    torch.testing.assert_close(adv.pow(2).mean(), torch.tensor(1.0), rtol=1e-4, atol=1e-4)
    assert torch.equal(normalized_advantages(torch.full((3,), -1.5)), torch.zeros(3))


@pytest.mark.parametrize("ratio", ["decision", "episode"])
def test_ppo_improves_a_task_with_a_known_optimum(ratio: str) -> None:
    env = GraphEnvironment("chain", matmul_chain(), load_topology("2xV100"))
    n = env.problem.num_nodes
    # The optimum of a chain: one GPU with every epilogue fused (no transfer, fewest launches).
    one_gpu = np.full(n, 1, dtype=np.int32)
    optimum = env.score_decisions(Decisions(one_gpu, env.decoder.default_fusion(one_gpu), np.zeros(n))).step_time_s
    split = env.reference_step_s  # the layer-wise split pays one transfer
    assert optimum < split

    torch.manual_seed(0)
    policy = GoPolicy(TINY)

    def mean_step() -> float:
        rollout = collect_rollouts(policy, [env], 32, generator=torch.Generator().manual_seed(5))[0]
        return float(np.mean([s.step_time_s for s in rollout.scores]))

    before = mean_step()
    config = TrainConfig(mode="go-one", workloads=["chain"], devices=["2xV100"], iterations=40, samples_per_graph=8, learning_rate=1e-2, seed=0, ratio=ratio,
                         warm_start=[])  # learning from scratch (warm start: test_warm_start.py)
    result = run_training(config, envs=[env], policy=policy, progress=False, save=False)
    after = mean_step()
    assert after < before - 0.03 * optimum
    assert after - optimum < 0.75 * (before - optimum)
    best = result.best[env.label]
    assert best.score.step_time_s <= split * 1.0001 and not best.score.oom
    assert len(result.history) == 40 and all(np.isfinite(h["policy_loss"]) for h in result.history)


def test_per_decision_ppo_update_favours_the_better_episodes() -> None:
    """One update with per-decision ratios: episodes with a positive normalised advantage gain
    log-probability against those with a negative one, and unlike the episode ratio (the sum
    over every node and task, which leaves the clip range after one step) only a part of the
    decisions is clipped."""
    env = GraphEnvironment("chain", matmul_chain(), load_topology("2xV100"))
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    rollout = collect_rollouts(policy, [env], 16, generator=torch.Generator().manual_seed(1))[0]
    advantages = normalized_advantages(rollout.rewards)
    assert advantages.abs().sum() > 0
    config = TrainConfig(mode="go-one", workloads=["chain"], devices=["2xV100"], samples_per_graph=16, learning_rate=3e-3, ppo_epochs=4, ratio="decision")
    stats = PPOTrainer(policy, config).update([rollout])
    with torch.no_grad():
        new_log_prob, _, _ = policy.evaluate(env.inputs, rollout.actions)
    gained = new_log_prob - rollout.old_log_prob
    better, worse = gained[advantages > 0].mean(), gained[advantages < 0].mean()
    assert better > worse + 0.5, (better, worse)
    assert 0.0 <= stats.clip_fraction < 0.25 and np.isfinite(stats.policy_loss)


def test_replayed_best_episode_joins_the_batch_at_ratio_one() -> None:
    env = GraphEnvironment("chain", matmul_chain(4, 128), load_topology("2xV100"))
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    first, second = collect_rollouts(policy, [env, env], 4, generator=torch.Generator().manual_seed(2))
    index, score = first.best()
    replay_episode(policy, second, first.actions[:, index : index + 1], score, first.decisions[index])
    assert second.actions.shape[1] == 5 and len(second.scores) == len(second.decisions) == 5
    assert second.rewards[-1] == score.reward
    per_decision, _, _ = policy.evaluate_decisions(env.inputs, second.actions)
    torch.testing.assert_close(per_decision, second.old_decision_log_prob, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(second.old_log_prob[-1], first.old_log_prob[index], rtol=1e-4, atol=1e-3)
    config = TrainConfig(mode="go-one", workloads=["chain"], devices=["2xV100"], iterations=3, samples_per_graph=4, replay_best=True, policy=TINY.to_dict(), warm_start=[])
    result = run_training(config, envs=[env], progress=False, save=False)
    assert len(result.env_history) == 3 and all(len(h[env.label]["reward"]) == 4 for h in result.env_history)
    assert result.best[env.label].score.step_time_s <= min(min(h[env.label]["ratio"]) for h in result.env_history) * env.reference_step_s * 1.0001


def test_training_is_reproducible() -> None:
    env = GraphEnvironment("chain", matmul_chain(4, 128), load_topology("2xV100"))
    config = TrainConfig(mode="go-one", workloads=["chain"], devices=["2xV100"], iterations=2, samples_per_graph=4, seed=3, policy=TINY.to_dict())
    runs = [run_training(config, envs=[env], progress=False, save=False) for _ in range(2)]
    assert [h["reward_mean"] for h in runs[0].history] == [h["reward_mean"] for h in runs[1].history]
    for a, b in zip(runs[0].policy.state_dict().values(), runs[1].policy.state_dict().values()):
        assert torch.equal(a, b)


def test_config_errors_name_the_field() -> None:
    with pytest.raises(TrainConfigError, match="mode"):
        TrainConfig(mode="nope", workloads=["x"])
    with pytest.raises(TrainConfigError, match="one graph"):
        TrainConfig(mode="go-one", workloads=["a", "b"])
    with pytest.raises(TrainConfigError, match="ratio"):
        TrainConfig(mode="go-one", workloads=["a"], ratio="token")
    with pytest.raises(TrainConfigError, match="samples_per_graph"):
        TrainConfig(mode="pretrain", workloads=["a"], samples_per_graph=1)


def test_placement_only_environment_ignores_fusion_and_priority_actions() -> None:
    env = GraphEnvironment("chain", matmul_chain(4, 128), load_topology("2xV100"))
    ablation = GraphEnvironment("chain", env.graph, env.topology, problem=env.problem, placement_only=True)
    n = env.problem.num_nodes
    actions = np.stack([np.full(n, 1), np.zeros(n, dtype=np.int64), np.full(n, 5)], axis=1)
    joint = env.decisions(actions)
    only = ablation.decisions(actions)
    assert (joint.fusion_group == -1).all() and (joint.priority == 5).all()  # level 0: no merge starts
    np.testing.assert_array_equal(only.fusion_group, env.decoder.default_fusion(only.device))
    assert (only.fusion_group >= 0).any() and (only.priority == 0).all()


def test_entropy_target_moves_the_coefficient_toward_the_target() -> None:
    env = GraphEnvironment("chain", matmul_chain(4, 128), load_topology("2xV100"))
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    rollout = collect_rollouts(policy, [env], 4, generator=torch.Generator().manual_seed(0))[0]
    coefs = {}
    for target in (0.1, 50.0):  # far below and far above the per-node entropy (~3 nats summed over tasks)
        config = TrainConfig(mode="go-one", workloads=["chain"], ppo_epochs=1, samples_per_graph=4, entropy_coef=1e-3, entropy_target=target, entropy_rate=1e-3)
        trainer = PPOTrainer(GoPolicy(TINY), config)
        stats = trainer.update([rollout])
        assert stats.entropy_coef == 1e-3  # the coefficient used, then moved
        coefs[target] = trainer.entropy_coef
        torch.testing.assert_close(torch.tensor(trainer.entropy_coef), torch.tensor(1e-3 + 1e-3 * (target - stats.entropy)))
    assert coefs[0.1] < 1e-3 < coefs[50.0]
    fixed = PPOTrainer(GoPolicy(TINY), TrainConfig(mode="go-one", workloads=["chain"], ppo_epochs=1, samples_per_graph=4))
    fixed.update([rollout])
    assert fixed.entropy_coef == TrainConfig.entropy_coef
