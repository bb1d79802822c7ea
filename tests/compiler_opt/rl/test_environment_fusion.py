"""GO's environment scores a classical placement exactly as `compiler-opt bench` (RESULTS.md (d)) does."""

from __future__ import annotations

import numpy as np
import pytest

from compiler_opt.cli.bench_lib import BenchSpec, run_bench
from compiler_opt.rl import GraphEnvironment, load_graph
from cost_model.costs import simulate
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from passes.fusion.defaults import apply_default_fusion, colocated_groups, default_group_array
from passes.placement import place
from graph_ir.order import node_order


def test_default_group_array_matches_apply_default_fusion_without_touching_the_graph() -> None:
    _, graph = load_graph("rnnlm-2:inference")  # cheap calls already inlined
    before = [(n.fusion_group, n.device) for n in node_order(graph)]
    name, groups = default_group_array(graph)
    assert name == "xla-gpu" and groups is not None and (groups >= 0).sum() > 0
    assert [(n.fusion_group, n.device) for n in node_order(graph)] == before
    applied = graph.clone()
    apply_default_fusion(applied)
    written = np.array([-1 if n.fusion_group is None else n.fusion_group for n in node_order(applied)])
    np.testing.assert_array_equal(groups, written)


def test_default_group_array_ignores_devices_and_keeps_given_groups() -> None:
    _, graph = load_graph("rnnlm-2:inference")
    _, unplaced = default_group_array(graph)
    nodes = node_order(graph)
    for i, node in enumerate(nodes):
        node.device = f"gpu:{i % 2}"  # every edge crosses devices: a placement-aware fusion fuses nothing
    _, placed = default_group_array(graph)
    np.testing.assert_array_equal(placed, unplaced)
    assert [n.device for n in nodes] == [f"gpu:{i % 2}" for i in range(len(nodes))]
    nodes[0].fusion_group = 7
    name, given = default_group_array(graph)
    assert name == "given" and given[0] == 7 and (given[1:] == -1).all()


def test_environment_scores_a_classical_placement_like_bench() -> None:
    topology = load_topology("2xV100")
    _, graph = load_graph("rnnlm-2:inference")
    env = GraphEnvironment("rnnlm-2:inference", graph, topology)
    decisions = env.classical("metis")
    # bench's path: default fusion on the unplaced graph, placement, groups kept within each device.
    _, groups = default_group_array(graph)
    device = place(graph, "metis", topology).device
    expected = Decisions(device, colocated_groups(groups, device), np.zeros(len(device)))
    np.testing.assert_array_equal(decisions.fusion_group, expected.fusion_group)
    assert env.score_decisions(decisions).step_time_s == pytest.approx(simulate(env.problem, expected).step_time_s, rel=1e-12)
    # and the number bench itself reports for the same cell
    rows = run_bench(BenchSpec(workloads=["rnnlm-2:inference"], methods=["metis"], devices=["2xV100"], equal_time=False, paper_sizes=False), progress=False)
    row = next(r for r in rows if r["method"] == "metis")
    assert row["nodes"] == env.problem.num_nodes
    assert row["objective_value"] == pytest.approx(env.score_decisions(decisions).step_time_s, rel=1e-9)


def test_placement_only_uses_the_framework_fusion() -> None:
    topology = load_topology("2xV100")
    _, graph = load_graph("rnnlm-2:inference")
    env = GraphEnvironment("rnnlm-2:inference", graph, topology, placement_only=True)
    actions = np.zeros((env.problem.num_nodes, 3), dtype=np.int64)
    decisions = env.decisions(actions)
    np.testing.assert_array_equal(decisions.fusion_group, env.default_groups)  # one device: every group kept


def _partition(groups: np.ndarray) -> set[frozenset[int]]:
    out: dict[int, set[int]] = {}
    for i, g in enumerate(groups.tolist()):
        if g >= 0:
            out.setdefault(g, set()).add(i)
    return {frozenset(m) for m in out.values()}


def test_joint_fusion_levels_are_read_against_the_default_fusion() -> None:
    from compiler_opt.rl.warm_start import seed_actions

    topology = load_topology("2xV100")
    _, graph = load_graph("rnnlm-2:inference")
    env = GraphEnvironment("rnnlm-2:inference", graph, topology)
    seed = env.classical("metis")
    keep = seed_actions(seed, 4, relative=True).numpy()
    # level 1 on the fused nodes keeps exactly the default groups within each device
    decoded = env.decisions(keep)
    assert _partition(decoded.fusion_group) == _partition(seed.fusion_group) and len(_partition(seed.fusion_group)) > 0
    assert env.score_decisions(decoded).step_time_s == env.score_decisions(seed).step_time_s
    # level 0 everywhere dissolves every group
    dissolve = keep.copy()
    dissolve[:, 1] = 0
    assert (env.decisions(dissolve).fusion_group < 0).all()
    # levels 2+ merge further: every kept default group lies inside one final group, and the
    # result is a valid fusion (the simulator accepts it)
    more = keep.copy()
    more[:, 1] = 3
    merged = env.decisions(more)
    final = merged.fusion_group
    for group in _partition(seed.fusion_group):
        assert len({int(final[i]) for i in group}) == 1 and final[next(iter(group))] >= 0
    assert sum(len(g) for g in _partition(final)) > sum(len(g) for g in _partition(seed.fusion_group))
    assert not env.score_decisions(merged).invalid
