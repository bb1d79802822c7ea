"""The placement context (policy/context.py): hand-computed features, and the zero-initialised
layers that read them leave every older checkpoint's decisions unchanged."""

from __future__ import annotations

import pytest
import torch

from compiler_opt.policy import GoPolicy, PolicyConfig, load_checkpoint, policy_inputs, save_checkpoint
from compiler_opt.policy.context import CONTEXT_FEATURES, context_features, context_graph
from compiler_opt.policy.features import PolicyInputs
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem
from graph_ir.features import NODE_FEATURE_NAMES
from graph_ir.io.onnx_import import import_onnx

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

SMALL = PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=1, attention_layers=1)


def _tiny() -> PolicyInputs:
    # a -> b (300 bytes), a -> c (100), b -> c (100); node times 1, 2, 3 on both devices.
    return PolicyInputs(
        op_kind=torch.zeros(3, dtype=torch.int64),
        node_x=torch.zeros(3, len(NODE_FEATURE_NAMES)),
        edge_index=torch.tensor([[0, 0, 1], [1, 2, 2]]),
        graph_x=torch.zeros(8),
        device_x=torch.zeros(2, 9),
        device_mask=torch.ones(3, 2, dtype=torch.bool),
        position=torch.zeros(3),
        edge_bytes=torch.tensor([300.0, 100.0, 100.0]),
        node_time=torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]),
    )


def test_features_by_hand() -> None:
    graph = context_graph(_tiny())
    pair, node = context_features(graph, torch.tensor([[0, 1, 1]]), 2)
    assert pair.shape == (1, 3, 2, len(CONTEXT_FEATURES)) and node.shape == (1, 3, 3)
    f = {name: pair[0, ..., i] for i, name in enumerate(CONTEXT_FEATURES)}
    # c's inputs: 100 bytes from a (device 0), 100 from b (device 1): half each.
    assert f["in_share"][2].tolist() == pytest.approx([0.5, 0.5])
    # a's outputs: 300 bytes to b and 100 to c, both on device 1; b's input is all from a (device 0).
    assert f["out_share"][0].tolist() == pytest.approx([0.0, 1.0])
    assert f["in_share"][1].tolist() == pytest.approx([1.0, 0.0])
    # b sits on device 1: moving it to device 0 makes all its input local (+1) and its output remote (-1).
    assert f["in_gain"][1].tolist() == pytest.approx([1.0, 0.0]) and f["out_gain"][1].tolist() == pytest.approx([-1.0, 0.0])
    # Loads 1 (device 0) and 5 (device 1) over their mean 3.
    assert f["load"][0].tolist() == pytest.approx([1 / 3, 5 / 3]) and f["load_gain"][0].tolist() == pytest.approx([0.0, 4 / 3])
    assert f["weight"][2].tolist() == pytest.approx([1.0, 1.0])
    # The node view: co-located input and output shares, the own device's load.
    torch.testing.assert_close(node[0], torch.tensor([[0.0, 0.0, 1 / 3], [0.0, 1.0, 5 / 3], [0.5, 0.0, 5 / 3]]))


def test_missing_sizes_count_every_edge_and_node_once() -> None:
    inputs = _tiny()
    inputs.edge_bytes, inputs.node_time = None, None
    pair, _ = context_features(context_graph(inputs), torch.tensor([[0, 1, 1]]), 2)
    assert pair[0, 2, :, 0].tolist() == pytest.approx([0.5, 0.5])  # c: one edge from each device
    assert pair[0, 0, :, 1].tolist() == pytest.approx([0.0, 1.0])


@pytest.fixture(scope="module")
def inputs() -> PolicyInputs:
    graph = import_onnx(random_onnx_dag(80, seed=4))
    return policy_inputs(SimulationProblem.from_graph(graph, load_topology("4xV100")))


def test_zero_initialised_context_changes_no_logit(inputs: PolicyInputs) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(SMALL).eval()
    enc = policy.encode(inputs)
    assert enc.context is not None and inputs.edge_bytes is not None and inputs.node_time.shape == (inputs.num_nodes, inputs.num_devices)
    zeros = torch.zeros(2, inputs.num_nodes, dtype=torch.int64)
    previous = torch.stack([torch.randint(0, inputs.num_devices, (2, inputs.num_nodes)), zeros, zeros], -1)  # device, fusion, priority
    with torch.no_grad():
        with_context = policy._logits(enc, previous, 2, True)
        enc.context = None
        without = policy._logits(enc, previous, 2, True)
    for a, b in zip(with_context, without):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_context_layers_learn_and_old_checkpoints_load(inputs: PolicyInputs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A file written before the context existed (its keys dropped) loads with the layers at zero.
    torch.manual_seed(0)
    trained = GoPolicy(SMALL)
    with torch.no_grad():
        trained.heads.context_score[-1].weight.fill_(0.5)
    save_checkpoint(tmp_path / "p.pt", trained)
    payload = torch.load(tmp_path / "p.pt", weights_only=True)
    payload["state_dict"] = {k: v for k, v in payload["state_dict"].items() if not k.startswith("heads.context_")}
    torch.save(payload, tmp_path / "old.pt")
    policy, _ = load_checkpoint(tmp_path / "old.pt")
    assert float(policy.heads.context_score[-1].weight.detach().abs().sum()) == 0.0
    assert float(load_checkpoint(tmp_path / "p.pt")[0].heads.context_score[-1].weight.detach().abs().sum()) > 0
    # Gradients reach the context layers through PPO's evaluate.
    actions = policy.sample(inputs, 2, generator=torch.Generator().manual_seed(0)).actions
    log_prob, _, _ = policy.evaluate(inputs, actions)
    log_prob.sum().backward()
    assert float(policy.heads.context_score[-1].weight.grad.abs().sum()) > 0
    assert float(policy.heads.context_token.weight.grad.abs().sum()) > 0


def test_checkpoints_saved_before_the_path_columns_decide_as_before(inputs: PolicyInputs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A file whose node input layer reads three fewer columns (saved before graph_ir.features
    # appended topo_height, min_depth, min_height) loads with zero weights on them: the same
    # logits as the policy whose weights on those columns are zero, whatever the columns hold.
    torch.manual_seed(0)
    trained = GoPolicy(SMALL)
    with torch.no_grad():
        trained.encoder.inp[0].weight[:, -3:] = 0.0
    save_checkpoint(tmp_path / "p.pt", trained)
    payload = torch.load(tmp_path / "p.pt", weights_only=True)
    payload["state_dict"]["encoder.inp.0.weight"] = payload["state_dict"]["encoder.inp.0.weight"][:, :-3].clone()
    torch.save(payload, tmp_path / "old.pt")
    policy, _ = load_checkpoint(tmp_path / "old.pt")
    assert policy.encoder.inp[0].weight.shape == trained.encoder.inp[0].weight.shape
    assert float(policy.encoder.inp[0].weight.detach()[:, -3:].abs().sum()) == 0.0
    with torch.no_grad():
        for mine, theirs in zip(policy._logits(policy.encode(inputs), None, 1), trained._logits(trained.encode(inputs), None, 1)):
            torch.testing.assert_close(mine, theirs)
    # Any other shape mismatch is still refused.
    payload["state_dict"]["encoder.inp.0.weight"] = payload["state_dict"]["encoder.inp.0.weight"][:-1]
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(Exception, match="does not match the network"):
        load_checkpoint(tmp_path / "bad.pt")
