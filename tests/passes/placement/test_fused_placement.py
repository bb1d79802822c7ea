"""Placement scored with the default fusion kept within each device (`fused` option)."""

from __future__ import annotations

import numpy as np

from compiler_opt.cli.simulate_lib import load_simulation_graph
from cost_model.costs import Target, simulate
from cost_model.decisions import Decisions, node_order
from passes.fusion.defaults import apply_default_fusion, colocated_groups
from passes.placement import PlacementContext, place_outcome


def _fused_step(outcome, groups: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    device = outcome.decisions.device
    return simulate(outcome.context.problem, Decisions(device, colocated_groups(groups, device), outcome.decisions.priority)).step_time_s


def test_fused_context_unfuses_only_groups_split_across_devices() -> None:
    graph, _ = load_simulation_graph("rnnlm-2:inference")
    apply_default_fusion(graph)
    target = Target.resolve(devices="2xV100", objective="latency")
    ctx = PlacementContext.from_graph(graph, target, fuse_within_device=True)
    groups = ctx.base.fusion_group
    device = np.zeros(ctx.num_nodes, dtype=np.int64)
    grouped = np.flatnonzero(groups >= 0)
    device[grouped[: grouped.size // 2]] = 1  # some groups end up split, the rest stay whole
    fused = ctx.decisions(device).fusion_group
    np.testing.assert_array_equal(fused, colocated_groups(groups, device))
    assert (fused >= 0).sum() < (groups >= 0).sum() and (fused >= 0).any()
    plain = PlacementContext.from_graph(graph, target).decisions(device).fusion_group
    np.testing.assert_array_equal(plain, groups)


def test_fusion_aware_annealing_never_ends_above_its_one_gpu_start() -> None:
    # Scored on the unfused graph, annealing spreads rnnlm-2's many small kernels over both GPUs
    # and the fused step of its answer is ~6x one GPU's; scored fused, it keeps what helps.
    graph, _ = load_simulation_graph("rnnlm-2:inference")
    apply_default_fusion(graph)
    groups = np.array([-1 if n.fusion_group is None else n.fusion_group for n in node_order(graph)], dtype=np.int32)
    target = Target.resolve(devices="2xV100", objective="latency")
    one_gpu = _fused_step(place_outcome(graph, "single-device", target, "latency", fused=True), groups)
    fused = _fused_step(place_outcome(graph, "sa", target, "latency", budget=150, fused=True), groups)
    assert fused <= one_gpu * (1 + 1e-9)
    for node in graph.all_nodes():
        node.fusion_group = None
    unfused = _fused_step(place_outcome(graph, "sa", target, "latency", budget=150), groups)
    assert unfused > fused


def test_local_search_with_group_moves_never_splits_a_group_it_moves() -> None:
    """`dp-ls{fused=true,group_moves=true}`: the search's units are the default fusion groups; from
    an unsplit start (one GPU) a group moves whole, never splits, and the fused step never rises
    above the start's."""
    from passes.placement.local_search import fusion_units, local_search

    graph, _ = load_simulation_graph("rnnlm-2:inference")
    apply_default_fusion(graph)
    target = Target.resolve(devices="2xV100", objective="latency")
    ctx = PlacementContext.from_graph(graph, target, fuse_within_device=True, budget=150)
    groups = np.asarray(ctx.base.fusion_group)
    units = fusion_units(groups)
    assert units.max() + 1 == (groups < 0).sum() + len(set(groups[groups >= 0].tolist()))
    start = np.zeros(ctx.num_nodes, dtype=np.int64)
    found = local_search(ctx, start, seed=0, units=units)
    assert ctx.evaluations == 150 and not np.array_equal(found, start)
    for g in set(groups[groups >= 0].tolist()):
        assert len(set(found[groups == g].tolist())) == 1
    score = PlacementContext.from_graph(graph, target, fuse_within_device=True)  # no budget: scoring only
    assert score.evaluate_key(found)[0] < score.evaluate_key(start)[0]
    outcome = place_outcome(graph, "dp-ls", target, "latency", budget=100, fused=True, group_moves=True)
    assert outcome.evaluations <= 100 and outcome.decisions.device.shape == (ctx.num_nodes,)
