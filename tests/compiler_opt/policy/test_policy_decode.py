"""Decoding actions to simulator decisions, and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler_opt.policy import CheckpointError, DecisionDecoder, GoPolicy, PolicyConfig, load_checkpoint, policy_inputs, save_checkpoint
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem, simulate
from graph_ir.io.onnx_import import import_onnx
from passes.fusion.by_priority import fuse_by_priority

SMALL = PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=1, attention_layers=1)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decoder_fusion_equals_fuse_by_priority(seed: int) -> None:
    graph = import_onnx(random_onnx_dag(150, seed=seed))
    topology = load_topology("2xV100")
    problem = SimulationProblem.from_graph(graph, topology)
    rng = np.random.default_rng(seed)
    n = problem.num_nodes
    device = rng.integers(1, 3, n).astype(np.int32)  # the two GPUs
    levels = rng.integers(0, 4, n).astype(np.float64)
    actions = np.stack([device, levels, rng.integers(0, 8, n)], axis=1)
    decoded = DecisionDecoder(problem).decisions(actions)
    # A decoder that gives up cycle searches early fuses less, but stays legal.
    fast = DecisionDecoder(problem, search_limit=8).decisions(actions)
    simulate(problem, fast)
    assert (fast.fusion_group >= 0).sum() <= (decoded.fusion_group >= 0).sum()
    # The pass on the IR, with the same placement written on the nodes.
    Decisions(device, np.full(n, -1), np.zeros(n)).apply(graph, topology, nodes=problem.nodes)
    fuse_by_priority(graph, levels)
    expected = np.array([-1 if node.fusion_group is None else node.fusion_group for node in problem.nodes])
    np.testing.assert_array_equal(decoded.fusion_group, expected)
    assert (decoded.fusion_group >= 0).sum() > 10  # the comparison is not vacuous
    np.testing.assert_array_equal(decoded.device, device)
    simulate(problem, decoded)  # legal: no fusion cycle, devices in range


def test_default_fusion_is_the_fuse_pass() -> None:
    from passes import run_pipeline

    graph = import_onnx(random_onnx_dag(120, seed=5))
    topology = load_topology("2xV100")
    problem = SimulationProblem.from_graph(graph, topology)
    device = np.full(problem.num_nodes, 1, dtype=np.int32)
    groups = DecisionDecoder(problem).default_fusion(device)
    Decisions(device, np.full(problem.num_nodes, -1), np.zeros(problem.num_nodes)).apply(graph, topology, nodes=problem.nodes)
    run_pipeline(graph, "fuse")
    expected = np.array([-1 if node.fusion_group is None else node.fusion_group for node in problem.nodes])
    np.testing.assert_array_equal(groups, expected)


def test_save_load_gives_identical_decisions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    problem = SimulationProblem.from_graph(import_onnx(random_onnx_dag(80, seed=4)), load_topology("4xV100"))
    inputs = policy_inputs(problem)
    path = save_checkpoint(tmp_path / "p.pt", policy, train_config={"mode": "pretrain", "lr": 1e-3}, command="compiler-opt train x")
    loaded, meta = load_checkpoint(path)
    assert meta["command"] == "compiler-opt train x" and meta["train_config"]["lr"] == 1e-3
    assert meta["policy_config"] == SMALL.to_dict()
    for greedy in (True, False):
        a = policy.sample(inputs, 3, generator=torch.Generator().manual_seed(7), greedy=greedy)
        b = loaded.sample(inputs, 3, generator=torch.Generator().manual_seed(7), greedy=greedy)
        assert torch.equal(a.actions, b.actions)
        torch.testing.assert_close(a.log_prob, b.log_prob)
    decoder = DecisionDecoder(problem)
    final = a.actions[-1].numpy()
    assert decoder.decisions(final[0]) == DecisionDecoder(problem).decisions(b.actions[-1, 0].numpy())


def test_bad_checkpoints_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(junk)
    junk.write_text("garbage\n")  # torch raises UnpicklingError with a page of advice: replaced by a short line
    with pytest.raises(CheckpointError, match="not a torch file of tensors") as caught:
        load_checkpoint(junk)
    assert "weights_only=False" not in str(caught.value)
    other = tmp_path / "other.pt"
    torch.save({"format": 99}, other)
    with pytest.raises(CheckpointError, match="format"):
        load_checkpoint(other)
