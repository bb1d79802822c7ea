"""The compiled fusion cycle check (passes/fusion/cycle_numba.py) refuses exactly the merges the
original pure-Python search refuses, `search_limit` refusals included, so fusion groups do not
depend on the engine. The original algorithm is kept here as the reference."""

from __future__ import annotations

import importlib.util
import random
from collections import deque
from collections.abc import Iterator

import numpy as np
import onnx
import pytest

from compiler_opt.workloads import build_workload
from compiler_opt.workloads.synthetic import random_onnx_dag
from graph_ir.clone import clone_graph
from graph_ir.graph import Graph
from graph_ir.io.onnx_import import import_onnx
from passes import run_pipeline
from passes.fusion import groups as fusion_groups
from passes.fusion.defaults import apply_default_fusion
from passes.fusion.fuse import greedy_fuse
from passes.fusion.groups import FusionGroups

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed (pip install compiler-opt[fast])")


# -- the reference: FusionGroups' search as it was before the compiled engine ---------------------
def reference_creates_cycle(groups: FusionGroups, ra: int, rb: int) -> bool:
    for src, dst in ((ra, rb), (rb, ra)):
        if all(groups.find(p) in (dst, src) for m in groups.members[dst] for p in groups.preds[m]):
            continue
        if _reference_reaches(groups, src, dst):
            return True
    return False


def _reference_reaches(groups: FusionGroups, src: int, dst: int) -> bool:
    seen = {src}
    queue: deque[int] = deque()
    for m in groups.members[src]:
        for s in groups.succs[m]:
            r = groups.find(s)
            if r != src and r != dst and r not in seen:
                seen.add(r)
                queue.append(r)
    visited = 0
    while queue:
        g = queue.popleft()
        for m in groups.members[g]:
            visited += 1
            if groups.search_limit is not None and visited > groups.search_limit:
                return True
            for s in groups.succs[m]:
                r = groups.find(s)
                if r == dst:
                    return True
                if r not in seen:
                    seen.add(r)
                    queue.append(r)
    return False


class CheckedGroups(FusionGroups):
    """Asks both searches at every legality check and records disagreements."""

    checks = 0
    cycles = 0

    def _creates_cycle(self, ra: int, rb: int) -> bool:
        fast = super()._creates_cycle(ra, rb)
        expected = reference_creates_cycle(self, ra, rb)
        assert fast == expected, f"groups {ra} and {rb}: engine says {fast}, reference {expected}"
        self.checks += 1
        self.cycles += expected
        return fast


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Select the engine per test and restore the choice afterwards."""
    yield
    monkeypatch.undo()
    fusion_groups.select_cycle_engine(refresh=True)


def _use(engine_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if engine_name == "python":
        monkeypatch.setenv(fusion_groups.NO_JIT_ENV, "1")
    else:
        monkeypatch.delenv(fusion_groups.NO_JIT_ENV, raising=False)
    assert fusion_groups.select_cycle_engine(refresh=True)[0] == engine_name


def _groups(graph: Graph) -> list[int | None]:
    return [node.fusion_group for node in graph]


@needs_numba
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limit", [2, 16, 4096, None])
def test_compiled_check_equals_reference_on_random_dags(seed: int, limit: int | None, engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """None: the exact check through the kept group order against the reference with no limit."""
    _use("numba", monkeypatch)
    graph = import_onnx(random_onnx_dag(220, seed=seed))
    groups = CheckedGroups(graph, max_nodes=12, search_limit=limit)
    greedy_fuse(groups)
    # Random merges between any two nodes (not just producer/consumer pairs) and splits, so
    # the check also meets cycles, the limit and groups rebuilt after a split.
    rng = random.Random(seed)
    n = len(groups.nodes)
    for step in range(600):
        if step % 150 == 149:
            groups.split(rng.randrange(n))
        groups.try_merge(rng.randrange(n), rng.randrange(n))
    assert groups.checks > 100 and groups.cycles > 0  # not vacuous
    groups.write()
    graph.verify()


@needs_numba
@pytest.mark.parametrize("seed", range(4))
def test_two_sided_search_answers_as_the_forward_window(seed: int, engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact check's search from both ends (`_forward_window_or_cycle`) against the one-sided
    forward window it replaced: the same cycle answer and, without a cycle, the same window."""
    _use("numba", monkeypatch)
    from passes.fusion import cycle_numba as jit
    graph = build_workload("rnnlm-2", "inference", steps=3 + seed)  # an unrolled RNN: long windows, cycles and not
    groups = FusionGroups(graph, max_nodes=6, search_limit=None)
    greedy_fuse(groups)
    rng = random.Random(seed)
    n = len(groups.nodes)
    pred_ptr, pred_idx, succ_ptr, succ_idx = groups._adjacency
    answers = {"cycle": 0, "window": 0}
    for _ in range(400):
        position = groups._positions()
        by_position = sorted({groups.find(i) for i in range(n)}, key=lambda r: position[r])
        first = rng.randrange(len(by_position) - 1)  # pairs a few places apart: cycles and windows both
        a, b = by_position[first], by_position[min(first + rng.randint(1, 12), len(by_position) - 1)]
        one, two = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        expected = jit._window(a, b, position[b], True, succ_ptr, succ_idx, position, groups._root, groups._head, groups._next, groups._seen, groups._stamp, one)
        got = jit._forward_window_or_cycle(a, b, position, groups._root, pred_ptr, pred_idx, succ_ptr, succ_idx, groups._head, groups._next, groups._seen, groups._stamp, two)
        assert got == expected, (a, b)
        if expected >= 0:
            assert sorted(one[:expected]) == sorted(two[:got])
        answers["cycle" if expected < 0 else "window"] += expected != 0
        groups.try_merge(rng.randrange(n), rng.randrange(n))  # the state moves on
    assert answers["cycle"] > 20 and answers["window"] > 20, answers  # both answers met, non-empty windows among them


def _real_graphs(example_model, onnx_backend_data) -> list[tuple[str, Graph]]:  # type: ignore[no-untyped-def]
    return [
        ("small_cnn", import_onnx(onnx.load(example_model))),
        ("squeezenet", import_onnx(onnx.load(onnx_backend_data / "light" / "light_squeezenet.onnx"))),
        ("rnnlm-2 (JAX HLO)", build_workload("rnnlm-2", "inference", steps=4)),
    ]


@needs_numba
def test_both_engines_give_identical_groups_on_real_graphs(example_model, onnx_backend_data, engine: None, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fused_any = False
    for label, graph in _real_graphs(example_model, onnx_backend_data):
        for limit in (8, 4096, None):
            _use("numba", monkeypatch)
            checked = CheckedGroups(clone_graph(graph), search_limit=limit)
            greedy_fuse(checked)
            assert checked.checks > 0, label
        results = {}
        for name in ("python", "numba"):
            _use(name, monkeypatch)
            fused = clone_graph(graph)
            run_pipeline(fused, "fuse")
            default = clone_graph(graph)
            apply_default_fusion(default)
            results[name] = (_groups(fused), _groups(default))
        assert results["python"] == results["numba"], label
        fused_any = fused_any or any(g is not None for g in results["numba"][0])
    assert fused_any


@needs_numba
def test_decoder_groups_do_not_depend_on_the_engine(engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler_opt.policy import DecisionDecoder
    from cost_model.devices.loader import load_topology
    from cost_model.simulator import SimulationProblem

    problem = SimulationProblem.from_graph(import_onnx(random_onnx_dag(150, seed=9)), load_topology("2xV100"))
    rng = np.random.default_rng(9)
    n = problem.num_nodes
    actions = np.stack([rng.integers(1, 3, n), rng.integers(0, 4, n), rng.integers(0, 8, n)], axis=1)
    out = {}
    for name in ("python", "numba"):
        _use(name, monkeypatch)
        out[name] = [DecisionDecoder(problem, search_limit=limit).decisions(actions).fusion_group for limit in (4, 4096)]
    for python, numba in zip(out["python"], out["numba"]):
        np.testing.assert_array_equal(python, numba)
    assert (out["numba"][1] >= 0).sum() > 10


def test_no_jit_selects_python(engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _use("python", monkeypatch)
    assert fusion_groups.cycle_engine_name() == "python"
    graph = import_onnx(random_onnx_dag(60, seed=1))
    groups = CheckedGroups(graph)
    greedy_fuse(groups)  # the Python path agrees with the reference too
    assert groups.checks > 0


def _adopt_graph() -> Graph:
    """x -> Relu -> ReduceSum, ReduceMax (two reductions of one value: sibling-fusion material)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 1]) for n in ("s", "m")]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("ReduceSum", ["r", "axes"], ["s"], keepdims=1),
        helper.make_node("ReduceMax", ["r", "axes"], ["m"], keepdims=1),
    ]
    model = helper.make_model(helper.make_graph(nodes, "adopt", [x], outs, [axes]), opset_imports=[helper.make_opsetid("", 18)])
    return import_onnx(model)


def test_adopt_joins_a_whole_group_and_counts_one_hero() -> None:
    graph = _adopt_graph()
    groups = FusionGroups(graph)
    heroes = [i for i, h in enumerate(groups.heroes) if h]
    assert len(heroes) >= 2  # two reductions: try_merge would refuse them in one group
    members = sorted({*heroes[:2], 0})
    groups.adopt(members)
    assert sorted(groups.group(members[0])) == members and groups.heroes[groups.find(members[0])] == 1
    assert groups.num_groups == 1
