"""The HDP-style reference: masks, shapes, and REINFORCE learning a task whose optimum is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler_opt.policy.config import PolicyConfigError
from compiler_opt.policy.features import NUM_OP_KINDS
from compiler_opt.policy.hdp import HdpPolicy, HdpPolicyConfig, node_devices
from compiler_opt.rl import GraphEnvironment
from compiler_opt.rl.config import TrainConfigError
from compiler_opt.rl.hdp import HdpConfig, train_hdp
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology

from test_rl_ppo import matmul_chain  # same folder (rootdir-relative import mode)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def test_sample_shapes_and_no_masked_device() -> None:
    env = GraphEnvironment("chain", matmul_chain(6, 64), load_topology("4xV100"))
    inputs = env.inputs
    mask = inputs.device_mask.clone()
    mask[::2, 1] = False  # even nodes may not use device 1
    mask[1, :] = False
    mask[1, 3] = True  # node 1 only on device 3
    inputs.device_mask = mask
    torch.manual_seed(0)
    policy = HdpPolicy(NUM_OP_KINDS, inputs.num_devices, HdpPolicyConfig(groups=3, hidden=8))  # 4 GPUs + host
    out = policy.sample(inputs, 16, generator=torch.Generator().manual_seed(1))
    n = inputs.num_nodes
    assert out.group.shape == (16, n) and out.group_device.shape == (16, 3) and out.device.shape == (16, n)
    assert out.log_prob.shape == (16,) and out.log_prob.requires_grad and torch.isfinite(out.log_prob).all()
    assert mask[torch.arange(n).unsqueeze(0), out.device].all()
    with pytest.raises(PolicyConfigError, match="built for 2 devices"):
        HdpPolicy(NUM_OP_KINDS, 2).sample(inputs, 1)


def test_node_devices_moves_nodes_off_masked_devices() -> None:
    mask = torch.tensor([[True, True], [False, True], [True, False]])
    group = torch.tensor([[0, 0, 1]])
    group_device = torch.tensor([[0, 1]])
    assert node_devices(group, group_device, mask).tolist() == [[0, 1, 0]]


def test_reinforce_learns_a_task_with_a_known_optimum() -> None:
    env = GraphEnvironment("chain", matmul_chain(), load_topology("2xV100"))
    n = env.problem.num_nodes
    one_gpu = np.full(n, 1, dtype=np.int32)
    optimum = env.score_decisions(Decisions(one_gpu, env.decoder.default_fusion(one_gpu), np.zeros(n)))
    result = train_hdp(env, HdpConfig(groups=4, hidden=16, samples=8, iterations=30, learning_rate=2e-2, seed=0))
    first, last = result.history[0]["reward_mean"], np.mean([h["reward_mean"] for h in result.history[-5:]])
    # Untrained: groups land on both GPUs (transfers); trained: every episode is the optimum.
    assert first < optimum.reward - 0.05
    assert last == pytest.approx(optimum.reward, abs=0.01)
    assert result.score.step_time_s == pytest.approx(optimum.step_time_s, rel=1e-6)
    assert result.evaluations == 30 * 8 and result.curve and result.curve[-1][1] == result.score.step_time_s


def test_training_is_seeded() -> None:
    env = GraphEnvironment("chain", matmul_chain(4, 128), load_topology("2xV100"))
    config = HdpConfig(groups=3, hidden=8, samples=4, iterations=3, seed=2)
    runs = [train_hdp(env, config) for _ in range(2)]
    assert [h["reward_mean"] for h in runs[0].history] == [h["reward_mean"] for h in runs[1].history]
    with pytest.raises(TrainConfigError, match="groups"):
        HdpConfig(groups=0)
