"""Warm start: classical seeds for fine-tune / go-one, seeded episodes, masks, the `go` pass option."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import compiler_opt.rl.go_pass  # noqa: F401 - registers `go` (the shared venv predates its entry point)
from compiler_opt.policy import GoPolicy, PolicyConfig, load_checkpoint, save_checkpoint
from compiler_opt.rl import GraphEnvironment, TrainConfig, TrainConfigError, collect_rollouts, run_training
from compiler_opt.rl.warm_start import DEFAULT_SEEDS, seed_actions, seed_episode, warm_start_seeds
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from graph_ir.io.onnx_import import import_onnx
from passes import run_pipeline
from passes.infra.base import PassError

TINY = PolicyConfig(hidden=16, heads=2, segment=8, sage_layers=1, attention_layers=1)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def env() -> GraphEnvironment:
    return GraphEnvironment("dag", import_onnx(random_onnx_dag(60, seed=3)), load_topology("4xV100"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(tmp_path_factory.mktemp("warm") / "policy.pt", GoPolicy(TINY), command="test")


def test_seed_actions_encode_placement_fusion_and_priority(env: GraphEnvironment) -> None:
    seed = warm_start_seeds(env, ["metis"], fusion_levels=4)[0]
    actions = seed_actions(seed.decisions, 4)
    assert actions.shape == (env.problem.num_nodes, 3) and actions.dtype == torch.int64
    np.testing.assert_array_equal(actions[:, 0].numpy(), seed.decisions.device)
    np.testing.assert_array_equal(actions[:, 1].numpy() == 3, seed.decisions.fusion_group >= 0)
    assert (actions[:, 2] == 0).all()
    assert seed.score.step_time_s == env.score_decisions(seed.decisions).step_time_s


@pytest.mark.parametrize("mode", ["fine-tune", "go-one"])
def test_seeded_answer_is_never_worse_than_its_best_seed(env: GraphEnvironment, checkpoint: Path, mode: str) -> None:
    config = TrainConfig(
        mode=mode, workloads=["dag"], devices=["4xV100"], iterations=2, samples_per_graph=3, seed=1,
        init_checkpoint=str(checkpoint) if mode == "fine-tune" else "", policy=TINY.to_dict(),
    )
    assert config.seed_methods() == list(DEFAULT_SEEDS)  # on by default for these modes
    result = run_training(config, envs=[env], progress=False, save=False)
    seeds = result.seeds[env.label]
    assert [s.method for s in seeds[: len(DEFAULT_SEEDS)]] == list(DEFAULT_SEEDS)
    assert all("+" in s.method for s in seeds[len(DEFAULT_SEEDS) :])  # the best seed's joint variants (rl/joint.py)
    best_seed = min(s.score.step_time_s for s in seeds if s.fits)
    assert result.best[env.label].score.step_time_s <= best_seed
    # The first batch held the sampled episodes and the replayed seeds (distinct placements).
    assert len(result.env_history) == 2 and all(len(h[env.label]["reward"]) == 3 for h in result.env_history)
    assert 0 < result.seed_cpu_seconds


def test_seeded_episodes_edit_the_seed_and_log_probs_match_evaluation(env: GraphEnvironment) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    seed = warm_start_seeds(env, ["metis"], fusion_levels=TINY.fusion_levels)[0]
    rollout = collect_rollouts(policy, [env], 6, generator=torch.Generator().manual_seed(0), initial={env.label: seed.actions})[0]
    assert rollout.initial is not None and rollout.initial.shape == (6, env.problem.num_nodes, 3)
    moved = (rollout.actions[-1, :, :, 0] != seed.actions[:, 0]).float().mean()
    assert moved < 0.2  # the keep bonus: most nodes stay where the seed put them
    cold = collect_rollouts(policy, [env], 6, generator=torch.Generator().manual_seed(0))[0]
    assert (cold.actions[-1, :, :, 0] != seed.actions[:, 0]).float().mean() > moved
    per_decision, _, _ = policy.evaluate_decisions(env.inputs, rollout.actions, rollout.initial)
    torch.testing.assert_close(per_decision, rollout.old_decision_log_prob, rtol=1e-4, atol=1e-4)


def test_no_masked_device_is_sampled_with_seeds() -> None:
    # Host CPU beside the GPUs (masked for every node) and a seed that puts every node on it.
    env = GraphEnvironment("dag", import_onnx(random_onnx_dag(40, seed=5)), load_topology("2xV100"))
    mask = env.inputs.device_mask
    masked = [d for d in range(mask.shape[1]) if not mask[:, d].any()]
    assert masked, "the topology should have a device no node may use"
    n = env.problem.num_nodes
    on_masked = Decisions(np.full(n, masked[0]), np.full(n, -1), np.zeros(n))
    seed_input = seed_actions(on_masked, TINY.fusion_levels)
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    with torch.no_grad():
        policy.heads.keep.fill_(50.0)  # a huge keep bonus must still not pick a masked device
    sampled = policy.sample(env.inputs, 32, generator=torch.Generator().manual_seed(0), initial=seed_input)
    devices = sampled.actions[..., 0]
    assert bool(mask[torch.arange(n)[None, None, :].expand_as(devices), devices].all())
    assert torch.isfinite(sampled.log_prob).all()

    class _Seed:  # a classical answer on the masked device: kept as an answer, never replayed
        method, actions = "cpu", seed_input

    assert seed_episode(env, _Seed(), TINY.iterations) is None  # type: ignore[arg-type]


def test_checkpoint_without_keep_loads_and_unseeded_sampling_ignores_it(tmp_path: Path, env: GraphEnvironment) -> None:
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    path = save_checkpoint(tmp_path / "old.pt", policy)
    payload = torch.load(path, weights_only=True)
    del payload["state_dict"]["heads.keep"]  # as the checkpoints saved before warm start
    torch.save(payload, path)
    loaded, _ = load_checkpoint(path)
    with torch.no_grad():
        loaded.heads.keep.fill_(-3.0)
    a = policy.sample(env.inputs, 4, generator=torch.Generator().manual_seed(1))
    b = loaded.sample(env.inputs, 4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.actions, b.actions)


def test_warm_start_configuration_errors_and_off(env: GraphEnvironment) -> None:
    with pytest.raises(TrainConfigError, match="warm-start"):
        TrainConfig(mode="go-one", workloads=["dag"], warm_start=["no-such-method"])
    assert TrainConfig(mode="pretrain", workloads=["dag"]).seed_methods() == []
    config = TrainConfig(mode="go-one", workloads=["dag"], devices=["4xV100"], iterations=1, samples_per_graph=2, warm_start=[], policy=TINY.to_dict())
    result = run_training(config, envs=[env], progress=False, save=False)
    assert result.seeds == {} and result.seed_cpu_seconds < 1.0


@pytest.mark.parametrize("seeds", ["metis+single-device", "off", "auto"])
def test_go_pass_takes_seeds_in_a_pipeline_string(seeds: str, checkpoint: Path) -> None:
    graph = import_onnx(random_onnx_dag(50, seed=2))
    result = run_pipeline(graph, 'go{mode=fine-tune,checkpoint="%s",budget=1,samples=2,devices=2xV100,seeds=%s}' % (checkpoint, seeds))
    assert result.modified
    graph.verify()
    assert all(node.device in ("gpu0", "gpu1") for node in graph)


def test_go_pass_answer_is_no_worse_than_its_seed(checkpoint: Path) -> None:
    from cost_model.costs import SimulationProblem, simulate

    graph = import_onnx(random_onnx_dag(50, seed=4))
    topology = load_topology("4xV100")
    env = GraphEnvironment("g", graph, topology)
    seed = warm_start_seeds(env, ["critical-path"], fusion_levels=TINY.fusion_levels)[0]
    run_pipeline(graph, 'go{mode=one,budget=1,samples=2,devices=4xV100,seeds=critical-path}')
    step = simulate(SimulationProblem.from_graph(graph, topology), Decisions.from_graph(graph, topology)).step_time_s
    assert step <= seed.score.step_time_s * (1 + 1e-9)


def test_go_pass_default_seeds_warm_a_zero_shot(checkpoint: Path) -> None:
    """`seeds=default` is the default list in every mode; a zero-shot with it (bounded seeds, a short
    search) answers no slower than the best of those seeds; `auto` leaves a zero-shot cold."""
    from compiler_opt.rl.go_pass import GoPass
    from cost_model.costs import SimulationProblem, simulate

    assert GoPass(seeds="default")._warm_start() == list(DEFAULT_SEEDS) and GoPass(seeds="auto")._warm_start() is None
    graph = import_onnx(random_onnx_dag(60, seed=5))
    topology = load_topology("4xV100")
    best = min(s.score.step_time_s for s in warm_start_seeds(GraphEnvironment("g", graph, topology), DEFAULT_SEEDS, fusion_levels=TINY.fusion_levels) if s.fits)
    run_pipeline(graph, 'go{mode=zero-shot,checkpoint="%s",budget=1,devices=4xV100,seeds=default,seed-seconds=5,polish-seconds=0.2}' % checkpoint)
    graph.verify()
    step = simulate(SimulationProblem.from_graph(graph, topology), Decisions.from_graph(graph, topology)).step_time_s
    assert step <= best * (1 + 1e-9)


def test_go_pass_refuses_an_unknown_seed_method() -> None:
    with pytest.raises(PassError, match="seeds"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{mode=fine-tune,seeds=metis+nope}")


def test_zero_shot_with_seeds_is_no_worse_than_the_best_seed_and_off_by_default(env: GraphEnvironment, checkpoint: Path) -> None:
    from compiler_opt.rl import zero_shot

    policy, _ = load_checkpoint(checkpoint)
    seeds = warm_start_seeds(env, ["metis", "critical-path"], fusion_levels=TINY.fusion_levels)
    found = zero_shot(policy, env, 2, seed=0, seeds=["metis", "critical-path"])
    assert found.score.step_time_s <= min(s.score.step_time_s for s in seeds if s.fits)
    cold = zero_shot(policy, env, 0, seed=0)  # the unseeded greedy decision alone
    assert found.score.step_time_s <= cold.score.step_time_s
    assert TrainConfig(mode="zero-shot", workloads=["dag"]).seed_methods() == []
    graph = import_onnx(random_onnx_dag(50, seed=2))
    run_pipeline(graph, 'go{mode=zero-shot,checkpoint="%s",budget=1,devices=4xV100,seeds=metis}' % checkpoint)
    graph.verify()


def test_a_seed_predicted_to_overrun_the_budget_is_skipped(env: GraphEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a CPU budget, a method whose prior predicts it ends past the budget does not start
    (a per-node cost, or one that grows with the ready width); the reference is free and always
    runs; without a budget every method runs."""
    import compiler_opt.rl.warm_start as warm_start

    monkeypatch.setitem(warm_start.SEED_CPU, "metis", warm_start.SeedCost(1.0))  # 1 s a node: never fits 5 s
    seeds = warm_start.warm_start_seeds(env, ["human-expert", "metis", "single-device"], fusion_levels=4, cpu_budget=5.0)
    assert [s.method for s in seeds] == ["human-expert", "single-device"]
    width = warm_start.mean_ready_width(env.problem)
    monkeypatch.setitem(warm_start.SEED_CPU, "metis", warm_start.SeedCost(0.0, 6.0 / (width * env.problem.num_nodes)))  # 6 s
    seeds = warm_start.warm_start_seeds(env, ["human-expert", "metis", "single-device"], fusion_levels=4, cpu_budget=5.0)
    assert [s.method for s in seeds] == ["human-expert", "single-device"]
    assert [s.method for s in warm_start.warm_start_seeds(env, ["metis"], fusion_levels=4)] == ["metis"]


def test_mean_ready_width_counts_the_ready_set_at_every_step() -> None:
    """A chain has one ready node at every step; k independent nodes have k, k-1, ..., 1 (mean
    (k+1)/2); a diamond a->{b,c}->d has 1, 2, 1, 1; the m-ETF prediction grows with the width."""
    from onnx import TensorProto, helper

    from compiler_opt.rl.warm_start import mean_ready_width, predicted_seed_cpu
    from cost_model.devices.loader import load_topology
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.io.onnx_import import import_onnx

    def problem(edges: list[tuple[int, int]], count: int) -> SimulationProblem:
        nodes = []
        for n in range(count):
            inputs = [f"y{a}" for a, b in edges if b == n] or ["x"]
            nodes.append(helper.make_node("Add" if len(inputs) == 2 else "Relu", inputs, [f"y{n}"], name=f"n{n}"))
        info = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [4]) for name in ["x"] + [f"y{n}" for n in range(count)]]
        model = helper.make_model(helper.make_graph(nodes, "g", info[:1], info[1:]), opset_imports=[helper.make_opsetid("", 17)])
        return SimulationProblem.from_graph(import_onnx(model), load_topology("2xV100"))

    assert mean_ready_width(problem([(0, 1), (1, 2), (2, 3)], 4)) == 1.0
    assert mean_ready_width(problem([], 5)) == 3.0
    assert mean_ready_width(problem([(0, 1), (0, 2), (1, 3), (2, 3)], 4)) == 5 / 4
    wide, chain = problem([], 5), problem([(0, 1), (1, 2), (2, 3), (3, 4)], 5)
    assert predicted_seed_cpu("m-etf", wide) > predicted_seed_cpu("m-etf", chain) == pytest.approx(5 * (3e-4 + 6e-7))
    assert predicted_seed_cpu("metis", wide) == predicted_seed_cpu("metis", chain) == pytest.approx(5 * 2e-4)


def test_classical_seeds_run_on_the_environments_own_problem(env: GraphEnvironment) -> None:
    """The environment places on its own problem (no second problem built from the graph): the
    same placements as the pass on the same default costs; an unknown method is a clear error."""
    from passes.placement import place
    from passes.placement.context_base import PlacementError

    for method in ("metis", "critical-path", "dp", "m-etf"):
        np.testing.assert_array_equal(env.classical(method).device, place(env.graph, method, env.topology).device)
    with pytest.raises(PlacementError, match="unknown placement method 'nope'"):
        env.classical("nope")


def test_joint_seeds_past_the_deadline_are_the_best_seeds_only(env: GraphEnvironment) -> None:
    """Joint variants of the best seed always run; those of the other seeds only within the warm
    start's CPU budget (past it they ran a 20 s row to 25 on GNMT)."""
    import math

    from compiler_opt.rl.warm_start import fitting_seeds, joint_seeds

    seeds = warm_start_seeds(env, ["human-expert", "metis", "single-device", "critical-path"], fusion_levels=4)
    best = fitting_seeds(seeds)[0].method
    free = joint_seeds(env, seeds, fusion_levels=4, priority_levels=8, deadline=math.inf)
    late = joint_seeds(env, seeds, fusion_levels=4, priority_levels=8, deadline=0.0)
    assert {s.method.split("+")[0] for s in late} == {best}
    assert len({s.method.split("+")[0] for s in free}) > 1
    assert [s.method for s in late] == [s.method for s in free][: len(late)]
