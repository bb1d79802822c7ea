"""The decoder's compiled merge loop (passes/fusion/cycle_numba.py) against its Python loop: the
same groups, with the 4096-node search and with the exact ordered check (`search_limit=None`)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import compiler_opt.policy.decode as decode
from compiler_opt.policy import DecisionDecoder
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem, simulate
from cost_model.decisions import Decisions
from graph_ir.io.onnx_import import import_onnx

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed (pip install compiler-opt[fast])")


def _case(seed: int, n: int = 300) -> tuple[SimulationProblem, np.ndarray, np.ndarray, np.ndarray]:
    problem = SimulationProblem.from_graph(import_onnx(random_onnx_dag(n, seed=seed)), load_topology("4xV100"))
    rng = np.random.default_rng(seed)
    count = problem.num_nodes
    device = (np.arange(count) * 3 // count + 1).astype(np.int32)  # contiguous stages, so merges are possible
    flip = rng.random(count) < 0.1
    device[flip] = rng.integers(1, 5, int(flip.sum()))
    levels = rng.integers(0, 5, count).astype(np.float64)
    base = DecisionDecoder(problem).default_fusion(np.ones(count, dtype=np.int32))  # a legal default to read levels against
    return problem, device, levels, base


def _python(decoder_args: dict, problem: SimulationProblem, device: np.ndarray, levels: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode, "select_cycle_engine", lambda **kwargs: ("python", None))
        decoder = DecisionDecoder(problem, **decoder_args)
        return decoder.relative_groups(levels, device, base), decoder.fusion_groups(levels, device)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("limit", [4096, 6, None])
def test_compiled_loop_equals_python_loop(seed: int, limit: int | None) -> None:
    problem, device, levels, base = _case(seed)
    decoder = DecisionDecoder(problem, search_limit=limit)
    relative, absolute = decoder.relative_groups(levels, device, base), decoder.fusion_groups(levels, device)
    expected_relative, expected_absolute = _python({"search_limit": limit}, problem, device, levels, base)
    np.testing.assert_array_equal(relative, expected_relative)
    np.testing.assert_array_equal(absolute, expected_absolute)
    assert (relative >= 0).sum() > 20 and (absolute >= 0).sum() > 0  # not vacuous
    for groups in (relative, absolute):
        simulate(problem, Decisions(device, groups, np.zeros(problem.num_nodes)))  # legal: no cycle between groups


def test_exact_check_fuses_what_a_small_limit_refuses() -> None:
    problem, device, levels, base = _case(5, n=400)
    exact = DecisionDecoder(problem, search_limit=None).relative_groups(levels, device, base)
    tight = DecisionDecoder(problem, search_limit=2).relative_groups(levels, device, base)
    assert (exact >= 0).sum() > (tight >= 0).sum()


def test_group_positions_refuse_a_cyclic_grouping() -> None:
    from passes.fusion.cycle_numba import group_positions

    # 0 -> 1 -> 2 with {0, 2} one group: the contracted graph has the cycle {0, 2} -> {1} -> {0, 2}.
    succ_ptr = np.array([0, 1, 2, 2], dtype=np.int64)
    succ_idx = np.array([1, 2], dtype=np.int64)
    root = np.array([0, 1, 0], dtype=np.int64)
    head = np.array([0, 1, 2], dtype=np.int64)
    nxt = np.array([2, -1, -1], dtype=np.int64)
    with pytest.raises(ValueError, match="cycle"):
        group_positions(root, head, nxt, succ_ptr, succ_idx)
    root = np.arange(3, dtype=np.int64)  # singletons: positions in topological order
    position = group_positions(root, np.arange(3, dtype=np.int64), np.full(3, -1, dtype=np.int64), succ_ptr, succ_idx)
    assert position.tolist() == [0, 1, 2]


def test_environments_decode_exactly_by_default() -> None:
    from compiler_opt.rl import GraphEnvironment

    graph = import_onnx(random_onnx_dag(60, seed=9))
    topology = load_topology("2xV100")
    assert GraphEnvironment("g", graph, topology).decoder.search_limit is None
    limited = GraphEnvironment("g", graph, topology, exact_cycles=False)
    assert limited.decoder.search_limit == decode.SEARCH_LIMIT
    assert limited.as_placement_only().decoder.search_limit == decode.SEARCH_LIMIT  # the ablation keeps the choice


def test_a_cyclic_default_fusion_is_named_not_decoded() -> None:
    """Groups a graph arrives with (the default the levels are read against) that close a cycle:
    a clear `DecisionError` on the fusion field, as the simulator gives for the reference."""
    from cost_model.decisions import DecisionError
    from passes.fusion.groups import data_edges

    problem, device, levels, _ = _case(1, n=60)
    _, preds, succs = data_edges(problem.nodes)
    middle = next(b for b in range(problem.num_nodes) if preds[b] and succs[b])
    base = np.full(problem.num_nodes, -1, dtype=np.int32)
    base[[preds[middle][0], succs[middle][0]]] = 0  # a -> b -> c with {a, c} one group
    with pytest.raises(DecisionError, match="form a cycle"):
        DecisionDecoder(problem).relative_groups(np.ones(problem.num_nodes), np.ones(problem.num_nodes, dtype=np.int32), base)
