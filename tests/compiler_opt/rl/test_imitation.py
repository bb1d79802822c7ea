"""Imitation pretraining (rl/imitation.py): canonical labels by hand, the policy learns a known
placement, targets round-trip, and `compiler-opt train --mode imitate` runs end to end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from compiler_opt.cli.main import main
from compiler_opt.policy import GoPolicy, PolicyConfig, load_checkpoint
from compiler_opt.rl import GraphEnvironment
from compiler_opt.rl.imitation import ImitationTarget, canonical_devices, colocation_loss, imitate, imitation_loss, load_targets, save_targets
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.devices.loader import load_topology
from graph_ir.io.onnx_import import import_onnx

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def test_canonical_labels_by_hand() -> None:
    # Devices 0-2 usable by every node, device 3 (a host, say) by none but node 4.
    mask = np.ones((5, 4), dtype=bool)
    mask[:4, 3] = False
    # First used in row order: 2, then 0; 1 unused. So 2 -> 0, 0 -> 1, 1 -> 2; device 3 keeps its label.
    assert canonical_devices(np.array([2, 2, 0, 2, 3]), mask).tolist() == [0, 0, 1, 0, 3]
    # Already canonical: unchanged; relabelling twice changes nothing.
    once = canonical_devices(np.array([1, 0, 0, 2, 1]), mask)
    assert once.tolist() == [0, 1, 1, 2, 0]
    assert canonical_devices(once, mask).tolist() == once.tolist()


def _env() -> GraphEnvironment:
    graph = import_onnx(random_onnx_dag(60, seed=7))
    return GraphEnvironment("dag", graph, load_topology("2xV100"))


def test_the_policy_learns_a_known_placement(tmp_path: Path) -> None:
    env = _env()
    n = env.problem.num_nodes
    # A placement the untrained policy does not make (it starts near a layer-wise split) but can
    # express: by op kind, which the encoder embeds.
    kinds = env.inputs.op_kind.numpy()
    assert len(np.unique(kinds)) > 1 and n == kinds.size
    mask = env.inputs.device_mask.numpy()
    usable = np.flatnonzero(mask.all(0))  # the two GPUs (the host CPU is masked)
    device = canonical_devices(usable[np.isin(kinds, np.unique(kinds)[::2]).astype(np.int64)], mask)
    assert set(device.tolist()) == set(usable.tolist())
    target = ImitationTarget(env.label, device, 1.0, 2.0, "hand")
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=2, attention_layers=1))
    with torch.no_grad():
        before = [float(x) for x in imitation_loss(policy, env, torch.as_tensor(device))]
    history = imitate(policy, [env], [target], steps=150, learning_rate=1e-2, progress=False)
    assert len(history) == 150 and history[-1]["round1"] < before[0] / 2 and history[-1]["round2"] < before[1] / 2
    enc = policy.encode(env.inputs)
    with torch.no_grad():
        greedy = policy._logits(enc, None, 1)[0].argmax(-1)[0].numpy()
    assert (greedy == device).mean() > 0.9
    # Targets round-trip through their file.
    save_targets(tmp_path / "t.npz", [target])
    (loaded,) = load_targets(tmp_path / "t.npz")
    assert loaded.label == env.label and loaded.method == "hand" and loaded.step_s == 1.0 and loaded.reference_s == 2.0
    np.testing.assert_array_equal(loaded.device, device)
    with pytest.raises(ValueError, match="no imitation target"):
        imitate(policy, [env], [ImitationTarget("other", device, 1.0, 2.0, "hand")], steps=1, progress=False)


def test_round_two_learns_from_sampled_first_rounds() -> None:
    env = _env()
    mask = env.inputs.device_mask.numpy()
    usable = np.flatnonzero(mask.all(0))
    depth_split = (np.arange(env.problem.num_nodes) >= env.problem.num_nodes // 2).astype(np.int64)
    device = canonical_devices(usable[depth_split], mask)
    target = ImitationTarget(env.label, device, 1.0, 2.0, "hand")
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=2, attention_layers=1))
    tensor = torch.as_tensor(device)
    # A sampled first round differs from the greedy one, and the same generator seed draws it again.
    with torch.no_grad():
        greedy = imitation_loss(policy, env, tensor)[1]
        drawn = [imitation_loss(policy, env, tensor, sampled=True, generator=torch.Generator().manual_seed(3))[1] for _ in range(2)]
    assert float(drawn[0]) == float(drawn[1]) and float(drawn[0]) != float(greedy)
    history = imitate(policy, [env], [target], steps=120, learning_rate=1e-2, progress=False, sampled_fraction=1.0)
    assert all(h["sampled"] for h in history)
    assert np.mean([h["round2"] for h in history[-10:]]) < np.mean([h["round2"] for h in history[:10]]) / 2
    mixed = imitate(policy, [env], [target], steps=40, learning_rate=1e-3, progress=False, sampled_fraction=0.5, seed=1)
    assert 0 < sum(h["sampled"] for h in mixed) < 40
    with pytest.raises(ValueError, match="sampled_fraction"):
        imitate(policy, [env], [target], steps=1, progress=False, sampled_fraction=1.5)


def test_colocation_loss_by_hand_and_it_ignores_labels() -> None:
    # Chain 0 - 1 - 2 over two devices: node 0 sure of device 0, node 1 even, node 2 sure of device 1.
    logits = torch.tensor([[20.0, -20.0], [0.0, 0.0], [-20.0, 20.0]])
    edges = torch.tensor([[0, 1], [1, 2]])
    # p_same is 1/2 on both edges; target {0, 0, 1}: edge (0, 1) kept, (1, 2) cut; each class a half.
    assert float(colocation_loss(logits, torch.tensor([0, 0, 1]), edges)) == pytest.approx(math.log(2), rel=1e-4)
    # Swapping the target's labels changes nothing: only which edges it cuts counts.
    assert float(colocation_loss(logits, torch.tensor([1, 1, 0]), edges)) == pytest.approx(math.log(2), rel=1e-4)
    # Every edge kept: the sure ends disagree with each other, so keeping (1, 2) costs, and both edges weigh equally.
    sure = torch.tensor([[20.0, -20.0], [20.0, -20.0], [-20.0, 20.0]])
    assert float(colocation_loss(sure, torch.tensor([0, 0, 0]), edges)) == pytest.approx((0.0 - math.log(1e-6)) / 2, rel=1e-3)


def test_colocation_weight_trains_and_bad_weights_are_refused() -> None:
    from compiler_opt.rl.config import TrainConfig, TrainConfigError

    env = _env()
    mask = env.inputs.device_mask.numpy()
    usable = np.flatnonzero(mask.all(0))
    device = canonical_devices(usable[(np.arange(env.problem.num_nodes) >= env.problem.num_nodes // 2).astype(np.int64)], mask)
    target = ImitationTarget(env.label, device, 1.0, 2.0, "hand")
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=2, attention_layers=1))
    tensor = torch.as_tensor(device)
    with torch.no_grad():
        plain, with_col = imitation_loss(policy, env, tensor)[0], imitation_loss(policy, env, tensor, colocation=2.0)[0]
        extra = colocation_loss(policy._logits(policy.encode(env.inputs), None, 1)[0][0], tensor, env.inputs.edge_index)
    assert float(with_col) == pytest.approx(float(plain) + 2.0 * float(extra), rel=1e-5)
    before = float(extra)
    imitate(policy, [env], [target], steps=80, learning_rate=1e-2, progress=False, colocation=1.0)
    with torch.no_grad():
        after = float(colocation_loss(policy._logits(policy.encode(env.inputs), None, 1)[0][0], tensor, env.inputs.edge_index))
    assert after < before / 2
    with pytest.raises(TrainConfigError, match="imitation_colocation"):
        TrainConfig(mode="imitate", workloads=["rnnlm-2"], imitation_colocation=-1.0)


def test_draws_by_gain_favour_targets_the_search_improved() -> None:
    graph = import_onnx(random_onnx_dag(40, seed=5))
    envs = [GraphEnvironment("dag", graph, load_topology(t)) for t in ("2xV100", "4xV100")]
    targets = []
    for env, ratio in zip(envs, (1.0, math.exp(-1.0))):  # gains log(1/ratio): 0 (floored at 0.01) and 1
        mask = env.inputs.device_mask.numpy()
        device = np.full(env.problem.num_nodes, np.flatnonzero(mask.all(0))[0], dtype=np.int64)  # all on the first GPU
        targets.append(ImitationTarget(env.label, device, ratio, 1.0, "hand"))
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=16, heads=2, segment=8, sage_layers=1, attention_layers=1))
    drawn = [h["env"] for h in imitate(policy, envs, targets, steps=60, progress=False, by_gain=True)]
    assert drawn.count(envs[1].label) >= 55  # expected 60 x 1 / 1.01
    uniform = [h["env"] for h in imitate(policy, envs, targets, steps=60, progress=False)]
    assert 15 <= uniform.count(envs[1].label) <= 45
    # A target on a device no node may use (the host) teaches nothing, and its loss is 0, not nan.
    host = np.zeros(envs[0].problem.num_nodes, dtype=np.int64)
    assert not envs[0].inputs.device_mask.numpy()[:, 0].any()
    first, second = imitation_loss(policy, envs[0], torch.as_tensor(host))
    assert float(first.detach()) == 0.0 and float(second.detach()) == 0.0


def test_cli_imitate_writes_targets_and_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "dag.onnx"
    onnx.save(random_onnx_dag(40, seed=2), str(model))
    out = tmp_path / "run"
    argv = ["train", "--mode", "imitate", "--workloads", str(model), "--devices", "2xV100", "--iterations", "3",
            "--imitation-seconds", "0.5", "--lr", "1e-3", "--checkpoint", "default", "--out", str(out), "--threads", "1"]
    assert main(argv) == 0
    assert "ratio to reference" in capsys.readouterr().out
    (target,) = load_targets(out / "targets.npz")
    assert target.label.endswith("@2xV100") and target.step_s <= target.reference_s * 1.000001
    _, meta = load_checkpoint(out / "imitated.pt")
    assert meta["command"].startswith("compiler-opt train --mode imitate") and meta["train_config"]["imitation_seconds"] == 0.5
    assert target.label in meta["extra"]["imitation"]
    # Reusing the targets searches nothing more: the file is read, not rewritten.
    stamp = (out / "targets.npz").stat().st_mtime_ns
    assert main([*argv[:-4], "--targets", str(out / "targets.npz"), "--imitation-sampled", "0.5", "--imitation-by-gain", "--out", str(out), "--threads", "1"]) == 0
    assert (out / "targets.npz").stat().st_mtime_ns == stamp
    assert main(["train", "--mode", "imitate", "--workloads", str(model), "--imitation-seconds", "0", "--out", str(out)]) == 2
    assert "imitation_seconds" in capsys.readouterr().err
    assert main(["train", "--mode", "imitate", "--workloads", str(model), "--imitation-sampled", "2", "--out", str(out)]) == 2
    assert "imitation_sampled" in capsys.readouterr().err


def test_the_polish_race_reaches_the_config_and_the_imitation_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler_opt.cli.main import build_parser
    from compiler_opt.cli.train_lib import config_from_args
    from compiler_opt.rl import polish as polish_module
    from compiler_opt.rl.config import POLISH_RACES, TrainConfig

    base = ["train", "--mode", "imitate", "--workloads", "rnnlm-2:inference"]
    assert config_from_args(build_parser().parse_args(base)).polish_race == TrainConfig.polish_race
    assert config_from_args(build_parser().parse_args([*base, "--polish-race", "halving"])).polish_race == "halving"
    for race in POLISH_RACES:  # the flag offers every race the config knows
        assert config_from_args(build_parser().parse_args([*base, "--polish-race", race])).polish_race == race
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--polish-race", "fastest"])
    races: list[str] = []
    original = polish_module.polish

    def spy(*args, **kwargs):
        races.append(kwargs["race"])
        return original(*args, **kwargs)

    monkeypatch.setattr(polish_module, "polish", spy)
    model = tmp_path / "dag.onnx"
    onnx.save(random_onnx_dag(30, seed=3), str(model))
    argv = ["train", "--mode", "imitate", "--workloads", str(model), "--devices", "2xV100", "--iterations", "1",
            "--imitation-seconds", "0.3", "--checkpoint", "default", "--polish-race", "halving", "--out", str(tmp_path / "run"), "--threads", "1"]
    assert main(argv) == 0
    assert races == ["halving"]  # the targets' search ran the race asked for


def test_joint_target_is_the_fastest_variant_and_the_heads_learn_it(tmp_path: Path) -> None:
    from compiler_opt.rl.imitation import joint_target, with_joint_target
    from compiler_opt.rl.joint import joint_variants

    env = _env()
    mask = env.inputs.device_mask.numpy()
    usable = np.flatnonzero(mask.all(0))
    device = canonical_devices(usable[(np.arange(env.problem.num_nodes) % 3 == 0).astype(np.int64)], mask)
    fusion, priority, name, step = joint_target(env, device, fusion_levels=4, priority_levels=8)
    # Every candidate scored by hand: the chosen one is within the tolerance of the fastest.
    candidates = dict(joint_variants(env, device, fusion_levels=4, priority_levels=8))
    if env.default_groups is not None:
        candidates["keep+flat"] = np.stack([device, np.ones_like(device), np.zeros_like(device)], axis=1)
    steps = {n: env.score(a, with_reward=False).step_time_s for n, a in candidates.items()}
    assert name in steps and step == pytest.approx(steps[name]) and step <= min(steps.values()) * 1.005
    np.testing.assert_array_equal(np.stack([device, fusion, priority], axis=1), candidates[name])
    # The placement-only ablation has no variants: zero levels.
    flat = joint_target(env.as_placement_only(), device, fusion_levels=4, priority_levels=8)
    assert flat[2] == "" and not flat[0].any() and not flat[1].any()
    target = with_joint_target(env, ImitationTarget(env.label, device, step, 2 * step, "hand"), fusion_levels=4, priority_levels=8)
    assert target.joint == name and target.fusion is not None and target.priority is not None
    save_targets(tmp_path / "t.npz", [target, ImitationTarget("other", device, 1.0, 2.0, "hand")])
    loaded, other = load_targets(tmp_path / "t.npz")
    np.testing.assert_array_equal(loaded.fusion, fusion)
    np.testing.assert_array_equal(loaded.priority, priority)
    assert loaded.joint == name and other.fusion is None and other.priority is None and other.joint == ""
    # heads="all": the fusion and priority heads learn the target's levels at both rounds.
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=2, attention_layers=1))
    levels = (torch.as_tensor(fusion), torch.as_tensor(priority))
    with torch.no_grad():
        placement_only = imitation_loss(policy, env, torch.as_tensor(device))
        joint = imitation_loss(policy, env, torch.as_tensor(device), levels=levels)
    assert float(joint[0]) > float(placement_only[0]) and float(joint[1]) > float(placement_only[1])
    history = imitate(policy, [env], [ImitationTarget(env.label, device, 1.0, 2.0, "hand")], steps=150, learning_rate=1e-2, progress=False, heads="all")
    assert history[-1]["round1"] < float(joint[0]) / 2 and history[-1]["round2"] < float(joint[1]) / 2
    with torch.no_grad():
        _, fusion_logits, priority_logits = policy._logits(policy.encode(env.inputs), None, 1)
    assert (fusion_logits.argmax(-1)[0].numpy() == fusion).mean() > 0.9
    assert (priority_logits.argmax(-1)[0].numpy() == priority).mean() > 0.8
    with pytest.raises(ValueError, match="heads"):
        imitate(policy, [env], [target], steps=1, progress=False, heads="fusion")


def test_levels_only_trains_the_two_output_layers_and_learns_the_levels() -> None:
    """heads="levels": only the fusion and priority heads' output layers move, so the round-1
    placement logits stay exactly as they were, and the level loss falls."""
    from compiler_opt.rl.imitation import LEVEL_PARAMETERS, with_joint_target

    env = _env()
    mask = env.inputs.device_mask.numpy()
    usable = np.flatnonzero(mask.all(0))
    device = canonical_devices(usable[(np.arange(env.problem.num_nodes) % 3 == 0).astype(np.int64)], mask)
    target = with_joint_target(env, ImitationTarget(env.label, device, 1.0, 2.0, "hand"), fusion_levels=4, priority_levels=8)
    levels = (torch.as_tensor(target.fusion), torch.as_tensor(target.priority))
    torch.manual_seed(0)
    policy = GoPolicy(PolicyConfig(hidden=32, heads=4, segment=16, sage_layers=2, attention_layers=1))
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    with torch.no_grad():
        place_before = policy._logits(policy.encode(env.inputs), None, 1)[0]
        level_loss = imitation_loss(policy, env, torch.as_tensor(device), levels=levels, placement=False)
    assert math.isfinite(float(level_loss[0])) and float(level_loss[0]) > 0
    history = imitate(policy, [env], [target], steps=150, learning_rate=3e-2, progress=False, heads="levels")
    assert all(math.isfinite(h["round1"]) for h in history)
    assert history[-1]["round1"] < float(level_loss[0]) / 2
    for name, p in policy.named_parameters():
        moved = not torch.equal(p.detach(), before[name])
        assert moved == name.startswith(LEVEL_PARAMETERS), name
    with torch.no_grad():
        place_after, fusion_logits, _ = policy._logits(policy.encode(env.inputs), None, 1)
    assert torch.equal(place_after, place_before)
    assert (fusion_logits.argmax(-1)[0].numpy() == target.fusion).mean() > 0.9
    with pytest.raises(ValueError, match="levels"):
        imitation_loss(policy, env, torch.as_tensor(device), placement=False)
