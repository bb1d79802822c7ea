"""The polish (local search from GO's best answer, then joint variants) and the joint variants themselves."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import compiler_opt.rl.go_pass  # noqa: F401 - registers `go` (the shared venv predates its entry point)
from compiler_opt.policy import PolicyConfig
from compiler_opt.rl import GraphEnvironment, TrainConfig, TrainConfigError, run_training
from compiler_opt.rl.joint import joint_variants, rank_priority_levels
from compiler_opt.rl.polish import MIN_SLICE, polish, start_candidates, start_placements
from compiler_opt.rl.warm_start import warm_start_seeds
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
def five_seeds(env: GraphEnvironment) -> list:
    """Five warm-start seeds' runs on `env`, shared by the pool tests (each runs dp and metis)."""
    return warm_start_seeds(env, ["round-robin", "metis", "single-device", "dp", "critical-path"], fusion_levels=4, priority_levels=8)


def _round_robin(env: GraphEnvironment) -> Decisions:
    """A poor start: consecutive nodes on different devices (a transfer on most edges)."""
    device = (np.arange(env.problem.num_nodes) % 4).astype(np.int32)
    return Decisions(device, env.default_fusion(device), np.zeros(env.problem.num_nodes))


def test_polish_improves_a_poor_start_and_scores_as_the_environment(env: GraphEnvironment) -> None:
    start = _round_robin(env)
    score = env.score_decisions(start)
    out = polish(env, start, score, cpu_seconds=0, evaluations=200, seed=0)
    assert out.improved and out.score.step_time_s < score.step_time_s
    assert 1 < out.evaluations <= 200
    again = env.score_decisions(out.decisions)
    assert again.step_time_s == out.score.step_time_s and not (again.oom or again.invalid)
    # A classical-style answer keeps the framework's default fusion: the whole default groups,
    # kept where their members share a device, so groups the poor start split fuse again.
    np.testing.assert_array_equal(out.decisions.fusion_group, env.default_fusion(out.decisions.device))
    assert (out.decisions.fusion_group >= 0).sum() > (start.fusion_group >= 0).sum()


def test_polish_keeps_the_answers_priorities(env: GraphEnvironment) -> None:
    start = _round_robin(env)
    priority = np.random.default_rng(0).integers(0, 8, env.problem.num_nodes).astype(np.float64)
    decisions = Decisions(start.device, start.fusion_group, priority)
    out = polish(env, decisions, env.score_decisions(decisions), cpu_seconds=0, evaluations=150, seed=1)
    assert out.improved
    np.testing.assert_array_equal(out.decisions.priority, priority)
    np.testing.assert_array_equal(out.decisions.fusion_group, env.default_fusion(out.decisions.device))


def test_joint_variants_are_policy_actions_and_absent_in_placement_only(env: GraphEnvironment) -> None:
    device = env.classical("metis").device
    variants = dict(joint_variants(env, device, fusion_levels=4, priority_levels=8))
    assert set(variants) == {"merge+flat", "merge+rank", "keep+rank"}
    for actions in variants.values():
        assert actions.shape == (env.problem.num_nodes, 3) and actions.dtype == np.int64
        np.testing.assert_array_equal(actions[:, 0], device)
        assert actions[:, 1].min() >= 0 and actions[:, 1].max() < 4 and actions[:, 2].min() >= 0 and actions[:, 2].max() < 8
    ranks = rank_priority_levels(env, 8)
    # Critical path first: a node's level never falls below that of a node with a shorter path.
    order = np.argsort(env.bottom_level, kind="stable")
    assert (np.diff(ranks[order]) >= 0).all() and ranks.min() == 0 and ranks.max() == 7
    only = GraphEnvironment("dag", env.graph, env.topology, problem=env.problem, placement_only=True)
    assert joint_variants(only, device, fusion_levels=4, priority_levels=8) == []
    assert dict(joint_variants(env, device, fusion_levels=2, priority_levels=1)) == {}  # nothing merges, no priorities


def test_polish_keeps_the_fastest_of_the_answer_the_search_and_the_variants(env: GraphEnvironment) -> None:
    start = env.classical("metis")
    score = env.score_decisions(start)
    out = polish(env, start, score, cpu_seconds=0, evaluations=1, fusion_levels=4, priority_levels=8)  # no move: the start itself
    steps = [env.score(actions).step_time_s for _, actions in joint_variants(env, start.device, fusion_levels=4, priority_levels=8)]
    assert out.score.step_time_s == min([score.step_time_s, *steps])
    assert out.score.step_time_s == env.score_decisions(out.decisions).step_time_s


def test_warm_start_appends_the_seeds_joint_variants(env: GraphEnvironment) -> None:
    seeds = warm_start_seeds(env, ["metis", "single-device"], fusion_levels=4, priority_levels=8)
    head, other = sorted(seeds[:2], key=lambda s: s.score.step_time_s)
    assert head.fits and other.fits
    # every variant of the best seed, merge+rank of the other
    names = [f"{head.method}+{v}" for v in ("merge+flat", "merge+rank", "keep+rank")] + [f"{other.method}+merge+rank"]
    assert [s.method for s in seeds[2:]] == names
    for seed in seeds[2:]:
        source = head if seed.method.startswith(head.method + "+") else other
        np.testing.assert_array_equal(seed.decisions.device, source.decisions.device)
        assert seed.score.step_time_s == env.score(seed.actions.numpy()).step_time_s
    assert len(warm_start_seeds(env, ["metis"], fusion_levels=4)) == 1  # no priority levels given: no variants


def test_polish_never_returns_worse_and_stops_at_its_cpu_share(env: GraphEnvironment) -> None:
    best = env.classical("dp")
    score = env.score_decisions(best)
    began = time.process_time()
    out = polish(env, best, score, cpu_seconds=0.3, seed=0)
    assert time.process_time() - began < 0.3 + 2.0  # one evaluation past the deadline at most, plus setup
    assert out.score.step_time_s <= score.step_time_s
    with pytest.raises(ValueError, match="bound"):
        polish(env, best, score, cpu_seconds=0)


def test_training_ends_with_the_polish_in_searching_modes(env: GraphEnvironment) -> None:
    assert not TrainConfig(mode="pretrain", workloads=["dag"]).polishes()
    assert not TrainConfig(mode="zero-shot", workloads=["dag"]).polishes()
    assert not TrainConfig(mode="go-one", workloads=["dag"], polish_fraction=0.0).polishes()
    assert TrainConfig(mode="go-one", workloads=["dag"], max_cpu_seconds=10).polish_share() == TrainConfig.polish_fraction
    with pytest.raises(TrainConfigError, match="polish_fraction"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_fraction=1.0)
    with pytest.raises(TrainConfigError, match="polish_evaluations"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_evaluations=-1)
    config = TrainConfig(
        mode="go-one", workloads=["dag"], devices=["4xV100"], iterations=1, samples_per_graph=2, warm_start=["metis"],
        polish_evaluations=40, policy=TINY.to_dict(),
    )
    result = run_training(config, envs=[env], progress=False, save=False)
    polished = result.polished[env.label]
    assert 0 < polished.evaluations <= 40
    best = result.best[env.label]
    assert best.score.step_time_s <= polished.start_step_s
    assert best.score.step_time_s == env.score_decisions(best.decisions).step_time_s


def test_go_pass_polish_option() -> None:
    with pytest.raises(PassError, match="polish"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{mode=one,polish=-1}")
    graph = import_onnx(random_onnx_dag(30, seed=5))
    assert run_pipeline(graph, "go{mode=one,budget=1,samples=2,devices=2xV100,seeds=metis,polish=20}").modified
    graph.verify()


def test_polish_races_its_starts_by_successive_halving(env: GraphEnvironment) -> None:
    """From a poor answer with two classical placements as other starts (and the answer's own,
    dropped): as many starts race as get MIN_SLICE simulations each in the first of their rounds
    (3 starts: 3 rounds); a first-round slice is exactly the search a polish from that start alone
    with that slice makes, so the answer is no worse than any of them."""
    start = _round_robin(env)
    score = env.score_decisions(start)
    others = [env.classical("metis").device, env.classical("dp").device, start.device]
    assert polish(env, start, score, cpu_seconds=0, evaluations=2 * 2 * MIN_SLICE, seed=4, others=others).starts == 2
    assert polish(env, start, score, cpu_seconds=0, evaluations=2 * 2 * MIN_SLICE - 1, seed=4, others=others).starts == 1
    cap = 3 * 3 * MIN_SLICE + 1  # + the timed simulation that sizes the race
    out = polish(env, start, score, cpu_seconds=0, evaluations=cap, seed=4, others=others)
    assert out.starts == 3 and 0 <= out.winner < 3 and 0 < out.evaluations <= cap
    first_slice = (cap - 1) // 3 // 3
    alone = []
    for i, device in enumerate([start.device, *others[:2]]):
        one = Decisions(np.asarray(device), env.default_fusion(np.asarray(device)), np.zeros(env.problem.num_nodes))
        alone.append(polish(env, one, env.score_decisions(one), cpu_seconds=0, evaluations=first_slice, seed=4 + i).score.step_time_s)
    assert out.score.step_time_s <= min(alone) and out.score.step_time_s < score.step_time_s
    assert out.score.step_time_s == env.score_decisions(out.decisions).step_time_s
    single = polish(env, start, score, cpu_seconds=0, evaluations=cap, seed=4)
    assert single.starts == 1 and single.winner == 0


def test_the_polish_starts_are_the_fastest_distinct_seed_placements(env: GraphEnvironment) -> None:
    seeds = warm_start_seeds(env, ["round-robin", "metis", "single-device", "dp"], fusion_levels=4, priority_levels=8)
    fitting = sorted((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)
    answer = fitting[0].decisions.device
    distinct: list[np.ndarray] = []
    for seed in fitting:
        device = np.asarray(seed.decisions.device)
        if not np.array_equal(device, answer) and not any(np.array_equal(device, d) for d in distinct):
            distinct.append(device)
    assert len(distinct) >= 2  # joint seeds share their source's placement
    got = start_placements(answer, seeds, 2)
    assert len(got) == 2 and all(np.array_equal(a, b) for a, b in zip(got, distinct[:2]))
    assert start_placements(answer, seeds, 0) == []
    with pytest.raises(TrainConfigError, match="polish_starts"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_starts=0)


def test_the_polish_moves_whole_fusion_groups(env: GraphEnvironment) -> None:
    """The search's units are the fusion groups (other nodes alone); from a start that splits no
    group, a search whose moves carry whole groups never splits one."""
    from passes.placement.local_search import fusion_units

    zeros = np.zeros(env.problem.num_nodes, dtype=np.int32)
    groups = np.asarray(env.default_fusion(zeros))
    assert (groups >= 0).sum() > len(set(groups[groups >= 0].tolist())), "the graph needs multi-node fusion groups"
    unit = fusion_units(groups)
    for g in set(groups[groups >= 0].tolist()):
        assert len(set(unit[groups == g].tolist())) == 1
    alone = groups < 0
    assert len(set(unit[alone].tolist())) == alone.sum() and not set(unit[alone].tolist()) & set(unit[~alone].tolist())
    device = (unit % 4).astype(np.int32)  # a poor start: the units round-robin over the devices, no group split
    start = Decisions(device, env.default_fusion(device), np.zeros(device.size))
    score = env.score_decisions(start)
    out = polish(env, start, score, cpu_seconds=0, evaluations=300, seed=2)
    assert out.improved
    for g in set(groups[groups >= 0].tolist()):
        assert len(set(out.decisions.device[groups == g].tolist())) == 1, f"group {g} was split"
    nodes = polish(env, start, score, cpu_seconds=0, evaluations=300, seed=2, group_moves=False)
    assert nodes.improved and nodes.score.step_time_s == env.score_decisions(nodes.decisions).step_time_s


def test_ppo_starts_an_iteration_only_when_it_fits_the_cpu_budget(env: GraphEnvironment) -> None:
    """With a CPU budget, an iteration predicted (before the first: per node and sample) to run
    past PPO's share is not started; the answer is then the best seed, polished."""
    common = dict(
        mode="go-one", workloads=["dag"], devices=["4xV100"], iterations=50, samples_per_graph=2, warm_start=["metis"],
        max_cpu_seconds=4.0, policy=TINY.to_dict(),
    )
    slow = run_training(TrainConfig(**common, ppo_cpu_per_node_sample=1.0), envs=[env], progress=False, save=False)
    assert slow.iterations == 0 and not slow.history
    seed = min(s.score.step_time_s for s in slow.seeds[env.label] if s.fits)
    assert slow.best[env.label].score.step_time_s <= seed and env.label in slow.polished
    # the polish gets what PPO left: more than its own share when PPO ran no iteration
    assert slow.polished[env.label].cpu_budget > 4.0 * TrainConfig.polish_fraction
    fast = run_training(TrainConfig(**common, ppo_cpu_per_node_sample=0.0), envs=[env], progress=False, save=False)
    assert fast.iterations >= 1
    with pytest.raises(TrainConfigError, match="ppo_cpu_per_node_sample"):
        TrainConfig(mode="go-one", workloads=["dag"], ppo_cpu_per_node_sample=-1.0)


def test_ppo_patience_hands_the_rest_of_the_budget_to_the_polish(env: GraphEnvironment) -> None:
    """`ppo_patience_cpu`: PPO stops once no iteration has found a better answer for that many CPU
    seconds, and the polish gets what PPO left. A patience shorter than one iteration's update
    stops PPO after its first iteration, improved or not."""
    common = dict(
        mode="go-one", workloads=["dag"], devices=["4xV100"], iterations=50, samples_per_graph=2, warm_start=["metis"],
        max_cpu_seconds=4.0, policy=TINY.to_dict(), ppo_cpu_per_node_sample=0.0,
    )
    patient = run_training(TrainConfig(**common, ppo_patience_cpu=0.0), envs=[env], progress=False, save=False)
    assert patient.iterations > 1
    hasty = run_training(TrainConfig(**common, ppo_patience_cpu=1e-6), envs=[env], progress=False, save=False)
    assert hasty.iterations == 1
    assert hasty.polished[env.label].cpu_budget > 4.0 * TrainConfig.polish_fraction
    assert hasty.polished[env.label].cpu_budget > patient.polished[env.label].cpu_budget
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(TrainConfigError, match="ppo_patience_cpu"):
            TrainConfig(mode="go-one", workloads=["dag"], ppo_patience_cpu=bad)


def test_the_placement_only_view_shares_what_the_environment_computed(env: GraphEnvironment) -> None:
    reference = env.reference_decisions  # computed (and cached) on the joint environment
    only = env.as_placement_only()
    assert only.placement_only and not env.placement_only and only.problem is env.problem
    assert only.reference_decisions is reference and only.reference_step_s == env.reference_step_s
    assert joint_variants(only, reference.device, fusion_levels=4, priority_levels=8) == []


def test_the_policys_decodings_come_first_among_the_other_starts(env: GraphEnvironment) -> None:
    seeds = warm_start_seeds(env, ["metis", "single-device", "dp"], fusion_levels=4, priority_levels=8)
    answer = sorted((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)[0].decisions.device
    mine = (np.arange(env.problem.num_nodes) % 2).astype(np.int32)
    got = start_placements(answer, seeds, 2, first=[mine, np.asarray(answer)])
    assert np.array_equal(got[0], mine) and not np.array_equal(got[1], answer)  # the answer's own placement is never another start
    assert np.array_equal(got[1], start_placements(answer, seeds, 1)[0])  # then the fastest seed's
    with pytest.raises(TrainConfigError, match="policy_starts"):
        TrainConfig(mode="go-one", workloads=["dag"], policy_starts=-1)


def test_policy_decodings_are_distinct_fitting_and_fastest_first(env: GraphEnvironment) -> None:
    from compiler_opt.policy import GoPolicy
    from compiler_opt.rl.trainer import policy_decodings

    import torch

    torch.manual_seed(0)
    found = policy_decodings(GoPolicy(TINY), env, seed=0)
    assert len(found) >= 2  # the greedy answer and at least one METIS cut of it
    times = [f.score.step_time_s for f in found]
    assert times == sorted(times) and not any(f.score.oom or f.score.invalid for f in found)
    keys = {np.asarray(f.decisions.device).tobytes() for f in found}
    assert len(keys) == len(found)
    for f in found:  # scored as the environment scores them
        assert env.score_decisions(f.decisions).step_time_s == pytest.approx(f.score.step_time_s)
    alone = policy_decodings(GoPolicy(TINY), env, seed=0, partition=(), coarsen=False)
    assert len(alone) == 1


def test_fine_tune_races_the_policys_answers(env: GraphEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `policy_starts` the polish's first other starts are the policy's answers: the cold
    zero-shot's (so the fine-tune is never slower than it), then the greedy answer's other
    decodings, fastest first, other than the answer itself."""
    import copy

    import torch

    import compiler_opt.rl.trainer as trainer
    from compiler_opt.policy import GoPolicy
    from compiler_opt.rl import zero_shot

    others: list[list[np.ndarray]] = []
    pools: list[list[np.ndarray]] = []

    races: list[str] = []

    def spy(*args, **kwargs):  # the real polish, its other starts recorded
        others.append(kwargs["others"])
        pools.append(kwargs["pool"])
        races.append(kwargs["race"])
        return polish(*args, **kwargs)

    monkeypatch.setattr(trainer, "polish", spy)
    common = dict(
        mode="go-one", workloads=["dag"], devices=["4xV100"], iterations=1, samples_per_graph=2, warm_start=["metis", "dp"],
        polish_evaluations=400, policy=TINY.to_dict(),
    )
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    fresh = copy.deepcopy(policy)
    config = TrainConfig(**common, policy_starts=2)
    result = trainer.run_training(config, envs=[env], policy=policy, progress=False, save=False)
    cold = zero_shot(fresh, env, config.decoded_start_samples, seed=config.seed)
    decoded = result.decoded[env.label]
    times = [d.score.step_time_s for d in decoded]
    assert times == sorted(times) and cold.score.step_time_s in times
    assert result.best[env.label].score.step_time_s <= cold.score.step_time_s
    answer = result.polished[env.label].start_step_s
    mine = [np.asarray(d.decisions.device) for d in decoded if d.score.step_time_s != answer][:2]
    assert result.polished[env.label].starts >= 2 and np.array_equal(others[0][0], mine[0])
    # the seeds come as a pool the polish orders by its own scoring (the default start order, h22)
    assert TrainConfig.polish_start_order == "polish" and len(pools[0]) >= 2
    # the starts one after another, by the forty-fourth session's second test (RESULTS.md h)
    assert races == [config.polish_race] == ["sequential"]
    torch.manual_seed(0)
    seeds_only = run_training(TrainConfig(**common, policy_starts=0), envs=[env], policy=GoPolicy(TINY), progress=False, save=False)
    assert seeds_only.decoded == {}


def test_decoded_start_samples_size_the_policys_start(env: GraphEnvironment) -> None:
    """The policy's decoded start is a cold zero-shot with `decoded_start_samples` samples (default 0, by the
    forty-eighth session's pre-registered test), whatever `zero_shot_samples` (the zero-shot mode's) says."""
    import torch

    from compiler_opt.policy import GoPolicy
    from compiler_opt.rl import zero_shot
    from compiler_opt.rl.trainer import _decoded_starts

    assert TrainConfig.decoded_start_samples == 0 and TrainConfig.zero_shot_samples == 8
    torch.manual_seed(0)
    policy = GoPolicy(TINY)
    common = dict(mode="go-one", workloads=["dag"], devices=["4xV100"], polish_evaluations=100, policy=TINY.to_dict())
    counts = {}
    for start, zero in ((0, 5), (3, 0)):
        config = TrainConfig(**common, decoded_start_samples=start, zero_shot_samples=zero)
        decoded = _decoded_starts(config, [env], policy, {})
        counts[start] = decoded[env.label][0].evaluations
        alone = zero_shot(policy, env, start, seed=config.seed)
        assert counts[start] == alone.evaluations
        assert decoded[env.label][0].score.step_time_s == pytest.approx(alone.score.step_time_s)
    assert counts[3] > counts[0]
    with pytest.raises(TrainConfigError, match="decoded_start_samples"):
        TrainConfig(mode="go-one", workloads=["dag"], decoded_start_samples=-1)


def test_seeds_and_polish_takes_the_seed_budget_it_is_given(env: GraphEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default the seeds get fine-tune's share of the seconds, and a seed predicted past it is
    skipped; `seed_seconds=0` runs every seed (a warm zero-shot's), the control the same seeds."""
    import compiler_opt.rl.warm_start as warm_start
    from compiler_opt.rl.polish import seeds_and_polish

    monkeypatch.setitem(warm_start.SEED_CPU, "m-etf", warm_start.SeedCost(1.0))  # 1 s a node: past any share here
    methods = lambda done: {s.method for s in done.seeds if "+" not in s.method}  # noqa: E731 - joint seeds aside
    assert "m-etf" not in methods(seeds_and_polish(env, 0.3, fusion_levels=4, priority_levels=0))
    every = seeds_and_polish(env, 0.3, fusion_levels=4, priority_levels=0, seed_seconds=0.0)
    assert methods(every) == set(warm_start.DEFAULT_SEEDS)
    assert every.polished.score.step_time_s <= every.head.score.step_time_s


@pytest.mark.parametrize(("spent", "share"), [(0.0, 1.0), (1.5, 0.625), (3.5, 0.25), (9.0, 0.25)])
def test_the_polish_gets_what_is_left_and_at_least_its_floor(env: GraphEnvironment, spent: float, share: float) -> None:
    """The polish's CPU budget: what the run's budget left after `spent`, at least
    `polish_min_fraction` of it when the phases before overran (a 29k-node graph's seeds and start)."""
    from compiler_opt.rl.trainer import BestFound, _polish

    config = TrainConfig(mode="go-one", workloads=["dag"], max_cpu_seconds=4.0, polish_min_fraction=0.25)
    decisions = env.reference_decisions
    best = {env.label: BestFound(decisions, env.score_decisions(decisions, with_reward=False), env)}
    polished = _polish(config, [env], best, TINY, {}, spent)
    assert polished[env.label].cpu_budget == pytest.approx(4.0 * share)
    if spent > 4.0:  # the floor never exceeds the polish's own share
        small = TrainConfig(mode="go-one", workloads=["dag"], max_cpu_seconds=4.0, polish_fraction=0.1, polish_min_fraction=0.25)
        assert _polish(small, [env], best, TINY, {}, spent)[env.label].cpu_budget == pytest.approx(0.4)
    with pytest.raises(TrainConfigError, match="polish_min_fraction"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_min_fraction=1.0)


def _three_seeds(env: GraphEnvironment) -> tuple[list, list, np.ndarray, object, np.ndarray]:
    """Three seeds' runs, the fitting ones fastest first, the answer (the fastest's placement), the
    slowest seed placed unlike it, and a placement of the policy's (alternate devices)."""
    seeds = warm_start_seeds(env, ["metis", "single-device", "round-robin"], fusion_levels=4, priority_levels=8)
    fitting = sorted((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)
    answer = fitting[0].decisions.device
    slowest = next(s for s in reversed(fitting) if not np.array_equal(s.decisions.device, answer))
    mine = (np.arange(env.problem.num_nodes) % 2).astype(np.int32)
    return seeds, fitting, answer, slowest, mine


def test_preferred_seeds_come_after_the_policys_starts_whatever_their_score(env: GraphEnvironment) -> None:
    seeds, fitting, answer, slowest, mine = _three_seeds(env)
    got = start_placements(answer, seeds, 3, first=[mine], prefer=[slowest.method, "not-a-seed-here"])
    assert np.array_equal(got[0], mine) and np.array_equal(got[1], slowest.decisions.device)
    assert np.array_equal(got[2], start_placements(answer, seeds, 1)[0])  # then the fastest other seed's
    # a preferred seed placed like the answer is no extra start
    same = start_placements(answer, seeds, 2, prefer=[fitting[0].method])
    assert all(not np.array_equal(d, answer) for d in same)
    assert TrainConfig(mode="go-one", workloads=["dag"], polish_first_seeds=["dp"]).polish_first_seeds == ("dp",)
    with pytest.raises(TrainConfigError, match="polish_first_seeds"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_first_seeds=("no-such-method",))


def test_the_pool_fills_the_race_fastest_first_as_the_search_scores_placements(env: GraphEnvironment, five_seeds: list) -> None:
    """`polish_start_order="polish"`: the seeds' placements are ranked by the search's own scoring
    (default groups within each device, the answer's priorities), not by the seeds' own scores."""
    from compiler_opt.rl.polish import _base, _fill_from_pool, _PolishContext

    seeds = five_seeds
    fitting = sorted((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s)
    answer = fitting[0].decisions
    others, pool = start_candidates(answer.device, seeds, 2, order="polish")
    assert others == [] and len(pool) == len(fitting)
    ctx = _PolishContext(env, _base(env, answer), deadline=math.inf, evaluations=None)
    starts = [np.asarray(answer.device, dtype=np.int64)]
    filled = _fill_from_pool(ctx, starts, pool, 3)
    distinct = []
    for p in pool:
        if not np.array_equal(p, answer.device) and not any(np.array_equal(p, d) for d in distinct):
            distinct.append(np.asarray(p))
    assert len(distinct) >= 3
    keys = [ctx.evaluate_key(d) for d in distinct]
    expected = [distinct[i] for i in sorted(range(len(distinct)), key=lambda i: keys[i])[:2]]
    assert len(filled) == 3 and np.array_equal(filled[0], starts[0])
    assert all(np.array_equal(a, b) for a, b in zip(filled[1:], expected))
    assert _fill_from_pool(ctx, starts, pool, 1) == starts  # no room: no simulation, no change
    # the race then takes them: three starts, never slower than the answer
    score = env.score_decisions(answer)
    out = polish(env, answer, score, cpu_seconds=0, evaluations=3 * 3 * MIN_SLICE + 10, seed=1, others=others, pool=pool, max_starts=3)
    assert out.starts == 3 and out.score.step_time_s <= score.step_time_s


def test_the_pool_ranking_gives_up_whole_when_the_budget_runs_out(env: GraphEnvironment, five_seeds: list) -> None:
    """A budget spent while the pool is being scored leaves the race's starts as they were: a
    half-ranked pool would race whichever seeds happened to be scored first."""
    from compiler_opt.rl.polish import _base, _fill_from_pool, _PolishContext

    seeds = five_seeds
    answer = min((s for s in seeds if s.fits), key=lambda s: s.score.step_time_s).decisions
    _, pool = start_candidates(answer.device, seeds, 2, order="polish")
    starts = [np.asarray(answer.device, dtype=np.int64)]
    assert sum(not np.array_equal(p, answer.device) for p in pool) >= 2
    by_count = _PolishContext(env, _base(env, answer), deadline=math.inf, evaluations=1)  # room to score one
    assert _fill_from_pool(by_count, starts, pool, 3) == starts
    by_time = _PolishContext(env, _base(env, answer), deadline=time.process_time() - 1, evaluations=None)
    assert _fill_from_pool(by_time, starts, pool, 3) == starts
    # and the polish as a whole still answers, never slower than its start
    score = env.score_decisions(answer)
    out = polish(env, answer, score, cpu_seconds=0, evaluations=2, seed=1, pool=pool, max_starts=3)
    assert out.starts == 1 and out.score.step_time_s <= score.step_time_s


def test_start_candidates_keep_the_policys_and_preferred_starts_first(env: GraphEnvironment) -> None:
    seeds, fitting, answer, slowest, mine = _three_seeds(env)
    by_seed, none = start_candidates(answer, seeds, 3, first=[mine], prefer=[slowest.method])
    assert none == [] and all(np.array_equal(a, b) for a, b in zip(by_seed, start_placements(answer, seeds, 3, first=[mine], prefer=[slowest.method])))
    raced, pool = start_candidates(answer, seeds, 3, first=[mine], prefer=[slowest.method], order="polish")
    assert len(raced) == 2 and np.array_equal(raced[0], mine) and np.array_equal(raced[1], slowest.decisions.device)
    assert len(pool) == len(fitting)
    assert len(start_candidates(answer, seeds, 1, first=[mine], order="polish")[0]) == 1
    with pytest.raises(ValueError, match="start order"):
        start_candidates(answer, seeds, 3, order="fastest")
    with pytest.raises(TrainConfigError, match="polish_start_order"):
        TrainConfig(mode="go-one", workloads=["dag"], polish_start_order="fastest")


def test_seeds_and_polish_by_the_polish_start_order(env: GraphEnvironment) -> None:
    from compiler_opt.rl.polish import seeds_and_polish

    out = seeds_and_polish(env, 3.0, seed=0, start_order="polish", seed_seconds=0)
    assert 1 <= out.polished.starts <= TrainConfig.polish_starts
    assert out.polished.score.step_time_s <= out.head.score.step_time_s


def test_the_polish_searches_under_the_default_priorities_or_both(env: GraphEnvironment) -> None:
    """`priorities="default"`: the search scores with the default priorities (what a classical placement is scored with)
    and its answer carries them; `"both"`: every start raced under the answer's and the default ones, each first-round
    slice the search a polish under that source alone makes, so the answer is no worse than either."""
    start = _round_robin(env)
    priority = np.random.default_rng(0).integers(0, 8, env.problem.num_nodes).astype(np.float64)
    answer = Decisions(start.device, start.fusion_group, priority)
    score = env.score_decisions(answer)
    default = polish(env, answer, score, cpu_seconds=0, evaluations=150, seed=1, priorities="default")
    assert default.improved and default.starts == 1
    np.testing.assert_array_equal(default.decisions.priority, Decisions.default(env.problem.num_nodes).priority)
    assert default.score.step_time_s == env.score_decisions(default.decisions).step_time_s
    cap = 2 * 2 * MIN_SLICE + 1  # two entries (one placement, two sources): two rounds; + the timed simulation
    both = polish(env, answer, score, cpu_seconds=0, evaluations=cap, seed=4, priorities="both")
    assert both.starts == 2 and both.evaluations <= cap
    first_slice = (cap - 1) // 2 // 2
    alone = [polish(env, answer, score, cpu_seconds=0, evaluations=first_slice, seed=4 + i, priorities=source).score.step_time_s
             for i, source in enumerate(("answer", "default"))]
    assert both.score.step_time_s <= min(alone)
    assert both.score.step_time_s == env.score_decisions(both.decisions).step_time_s
    others = [env.classical("metis").device]  # two placements under two sources: four entries when affordable
    assert polish(env, answer, score, cpu_seconds=0, evaluations=3 * 4 * MIN_SLICE + 1, seed=4, others=others, priorities="both").starts == 4
    with pytest.raises(ValueError, match="polish priorities 'graph'"):
        polish(env, answer, score, cpu_seconds=0, evaluations=10, priorities="graph")
    with pytest.raises(TrainConfigError, match="polish_priorities"):
        TrainConfig(workloads=["dag"], polish_priorities="graph")


def test_the_polish_can_search_its_starts_one_after_another() -> None:
    """`race="sequential"`: the fastest start (as the search scores it) is searched first, alone, until its local search
    stalls on its own; then the next start; then continuations of the best while they still find something. So with a
    cap the first search cannot reach, only that start is searched; with room for everything, the answer is no worse
    than the first start's lone search (the same search, run to its stall), more than one search runs, and the polish
    stops before its cap once every search has stalled."""
    small = GraphEnvironment("dag20", import_onnx(random_onnx_dag(20, seed=5)), load_topology("2xV100"))
    device = (np.arange(small.problem.num_nodes) % 2).astype(np.int32)
    start = Decisions(device, small.default_fusion(device), np.zeros(small.problem.num_nodes))
    score = small.score_decisions(start)
    others = [small.classical("metis").device, small.classical("dp").device]
    placements = [start.device, *others]
    fastest = min(range(3), key=lambda i: small.score_decisions(
        Decisions(np.asarray(placements[i]), small.default_fusion(np.asarray(placements[i])), np.zeros(small.problem.num_nodes))).step_time_s)

    capped = polish(small, start, score, cpu_seconds=0, evaluations=40, seed=2, others=others, race="sequential")
    assert capped.searches == 1 and capped.winner == fastest and capped.evaluations <= 40 and capped.starts == 3
    assert capped.score.step_time_s == small.score_decisions(capped.decisions).step_time_s

    cap = 10**6
    out = polish(small, start, score, cpu_seconds=0, evaluations=cap, seed=2, others=others, race="sequential")
    assert out.searches >= 3 and out.evaluations < cap
    first = Decisions(np.asarray(placements[fastest]), small.default_fusion(np.asarray(placements[fastest])), np.zeros(small.problem.num_nodes))
    alone = polish(small, first, small.score_decisions(first), cpu_seconds=0, evaluations=cap, seed=2)
    assert alone.evaluations < cap  # it stalled: the sequential polish ran the same search first
    assert out.score.step_time_s <= alone.score.step_time_s and out.score.step_time_s <= score.step_time_s
    assert out.score.step_time_s == small.score_decisions(out.decisions).step_time_s
    timed = polish(small, start, score, cpu_seconds=0.3, seed=2, others=others, race="sequential")
    assert timed.cpu_seconds < 0.3 + 0.25
    with pytest.raises(ValueError, match="polish race 'fastest'"):
        polish(small, start, score, cpu_seconds=0, evaluations=10, race="fastest")
    with pytest.raises(TrainConfigError, match="polish_race"):
        TrainConfig(workloads=["dag"], polish_race="fastest")
