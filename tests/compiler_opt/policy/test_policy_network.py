"""The GO network: shapes, masking, stop-gradient segment memory, variable device counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler_opt.policy import GoPolicy, PolicyConfig, allowed_devices, policy_inputs
from compiler_opt.policy.encoder import SegmentAttention, Superposition
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem
from graph_ir.io.onnx_import import import_onnx

SMALL = PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=1, attention_layers=1)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def problem() -> SimulationProblem:
    graph = import_onnx(random_onnx_dag(120, seed=3))
    return SimulationProblem.from_graph(graph, load_topology("4xV100"))


def test_shapes_and_log_prob_consistency(problem: SimulationProblem) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    inputs = policy_inputs(problem)
    n, d = problem.num_nodes, problem.num_devices
    assert inputs.node_x.shape[0] == n and inputs.device_x.shape[0] == d and inputs.device_mask.shape == (n, d)
    sampled = policy.sample(inputs, 5, generator=torch.Generator().manual_seed(1))
    assert sampled.actions.shape == (SMALL.iterations, 5, n, 3)
    assert sampled.log_prob.shape == (5,) and torch.isfinite(sampled.log_prob).all()
    actions = sampled.actions
    assert int(actions[..., 1].max()) < SMALL.fusion_levels and int(actions[..., 2].max()) < SMALL.priority_levels
    # evaluate() teacher-forces the stored iterations and must give the sampler's log-probability.
    log_prob, entropy, value = policy.evaluate(inputs, actions)
    torch.testing.assert_close(log_prob, sampled.log_prob, rtol=1e-4, atol=1e-2)
    # Per decision too (per-decision PPO ratios start at exactly 1 up to float error).
    per_decision, _, _ = policy.evaluate_decisions(inputs, actions)
    assert per_decision.shape == sampled.decision_log_prob.shape == (SMALL.iterations, 5, n, 3)
    torch.testing.assert_close(per_decision, sampled.decision_log_prob, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(per_decision.sum((0, 2, 3)), sampled.log_prob, rtol=1e-5, atol=1e-3)
    assert entropy.shape == (5,) and (entropy > 0).all() and value.shape == ()
    log_prob.sum().backward()
    grads = [p.grad for p in policy.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_greedy_first_is_the_greedy_episode_beside_the_same_draws(problem: SimulationProblem) -> None:
    # One encoding for both: episode 0 is what greedy sampling answers, and episodes 1.. are
    # exactly the episodes a plain draw with the same generator gives.
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    inputs = policy_inputs(problem)
    mixed = policy.sample(inputs, 4, generator=torch.Generator().manual_seed(5), greedy_first=True)
    plain = policy.sample(inputs, 4, generator=torch.Generator().manual_seed(5))
    greedy = policy.sample(inputs, 1, greedy=True)
    assert torch.equal(mixed.actions[:, 1:], plain.actions[:, 1:])
    assert torch.equal(mixed.actions[:, :1], greedy.actions)
    torch.testing.assert_close(mixed.log_prob, torch.cat([greedy.log_prob, plain.log_prob[1:]]))
    torch.testing.assert_close(mixed.place_log_prob, torch.cat([greedy.place_log_prob, plain.place_log_prob[1:]]))
    assert not torch.equal(plain.actions[:, 0], greedy.actions[:, 0])  # the draw's episode 0 was not greedy


def test_no_masked_device_is_ever_sampled(problem: SimulationProblem) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    inputs = policy_inputs(problem)
    # The host CPU of 4xV100 is masked for every node by default.
    cpu = [i for i, dev in enumerate(problem.topology.devices) if dev.kind == "cpu"]
    assert cpu and not inputs.device_mask[:, cpu].any()
    rng = np.random.default_rng(0)
    mask = rng.random(inputs.device_mask.shape) < 0.5
    mask[np.arange(mask.shape[0]), rng.integers(0, mask.shape[1], mask.shape[0])] = True  # one device each
    inputs.device_mask = torch.from_numpy(mask)
    sampled = policy.sample(inputs, 64, generator=torch.Generator().manual_seed(2))
    device = sampled.actions[..., 0].numpy()  # (T, K, N)
    allowed = mask[np.arange(mask.shape[0])[None, None, :], device]
    assert allowed.all()
    greedy = policy.sample(inputs, 1, greedy=True).actions[..., 0].numpy()
    assert mask[np.arange(mask.shape[0])[None, None, :], greedy].all()


def test_memory_mask_forbids_devices_too_small() -> None:
    graph = import_onnx(random_onnx_dag(30, seed=1))
    topology = load_topology("2xV100")
    problem = SimulationProblem.from_graph(graph, topology)
    problem.node_bytes[:5] = topology.devices[0].memory_bytes * 2  # five nodes fit nowhere
    mask = allowed_devices(problem)
    assert mask.any(axis=1).all()  # every node keeps a device (the simulator then reports OOM)
    assert not mask[5:, [i for i, d in enumerate(topology.devices) if d.kind == "cpu"]].any()


@pytest.mark.parametrize("devices", ["2xV100", "8xV100"])
def test_one_policy_serves_any_device_count(devices: str) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    problem = SimulationProblem.from_graph(import_onnx(random_onnx_dag(50, seed=2)), load_topology(devices))
    sampled = policy.sample(policy_inputs(problem), 3, generator=torch.Generator().manual_seed(0))
    gpus = {i for i, d in enumerate(problem.topology.devices) if d.kind != "cpu"}
    assert set(np.unique(sampled.actions[..., 0].numpy()).tolist()) <= gpus


def test_segment_memory_carries_no_gradient() -> None:
    torch.manual_seed(0)
    layer = SegmentAttention(hidden=8, heads=2, segment=4)
    x = torch.randn(10, 8, requires_grad=True)  # segments [0:4], [4:8], [8:10] (padded)
    out = layer(x)
    assert out.shape == (10, 8)
    # The second segment reads the first as memory: its output depends on it ...
    bumped = x.detach().clone()
    bumped[:4] += torch.randn(4, 8)  # (a constant shift would vanish in the LayerNorm)
    assert not torch.allclose(layer(bumped)[4:8], out[4:8])
    # ... but no gradient flows back into the previous segment (Transformer-XL's stop-gradient).
    (grad,) = torch.autograd.grad(out[4:8].sum(), x)
    assert torch.count_nonzero(grad[:4]) == 0 and torch.count_nonzero(grad[4:8]) > 0


def test_superposition_starts_near_one() -> None:
    torch.manual_seed(0)
    module = Superposition(16)
    x = torch.randn(5, 16)
    scaled = module(x, torch.randn(16))
    torch.testing.assert_close(scaled, x, rtol=0.05, atol=0.05)


def test_first_round_logits_are_computed_once_for_the_batch(problem: SimulationProblem) -> None:
    """With no previous decisions every sample's tokens are the same: the heads run once and expand (forty-seventh
    session), giving each sample what a batch of one gives; a round with decisions still differs per sample."""
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    enc = policy.encode(policy_inputs(problem))
    with torch.no_grad():
        one = policy._logits(enc, None, 1)
        many = policy._logits(enc, None, 5)
        for a, b in zip(one, many):
            assert b.shape[0] == 5
            torch.testing.assert_close(b, a.expand_as(b), rtol=0, atol=0)
        previous = torch.stack([torch.randint(0, n, (5, problem.num_nodes)) for n in (problem.num_devices, SMALL.fusion_levels, SMALL.priority_levels)], -1)
        later = policy._logits(enc, previous, 5)
    assert not torch.equal(later[1][0], later[1][1])  # samples with other previous decisions get other logits


def test_cross_task_attention_is_multi_head_attention_over_the_three_tokens() -> None:
    """The broadcast form against a plain per-(sample, node) softmax(q k^T / sqrt(d)) v."""
    torch.manual_seed(0)
    heads = GoPolicy(SMALL).heads
    x = torch.randn(2, 7, 3, SMALL.hidden)
    d = SMALL.hidden // SMALL.heads
    q, k, v = heads.qkv(x).view(2, 7, 3, 3, SMALL.heads, d).unbind(-3)  # (B, N, tasks, heads, d)
    q, k, v = (t.transpose(-2, -3) for t in (q, k, v))  # (B, N, heads, tasks, d)
    expected = ((q @ k.transpose(-1, -2)) / d**0.5).softmax(-1) @ v
    expected = heads.mix(expected.transpose(-2, -3).reshape(2, 7, 3, SMALL.hidden))
    torch.testing.assert_close(heads._cross_task(x), expected, rtol=1e-5, atol=1e-6)
