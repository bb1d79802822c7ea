"""The event loop: the numba-compiled loop equals the pure-Python loop to the last bit, both
produce valid list schedules, and the engine choice falls back to Python without numba."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cost_model.decisions import Decisions
from cost_model.devices import DeviceSpec, Link, Topology
from cost_model.simulator import SimulationProblem, simulate
from cost_model.simulator import engine
from graph_ir import DType, Graph, TensorType, Value

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (pip install compiler-opt[fast])")
# A few durations that tie, are zero, or whose sums round (0.1 + 0.2 != 0.3).
DURATIONS = st.sampled_from([0.0, 0.0, 1.0, 1.0, 2.0, 0.1, 0.2, 0.3, 1e-9, 1e-3]) | st.floats(0.0, 10.0)


@pytest.fixture(autouse=True)
def _fresh_engine_choice() -> Iterator[None]:
    # Tests below switch engines; leave the process-wide choice as they found it.
    saved = engine._engine
    yield
    engine._engine = saved


@st.composite
def task_graphs(draw: st.DrawFn) -> dict:
    """Random task graphs in the layout `build_task_graph` produces: CSR successors (duplicate
    edges allowed), pending = in-degree, ranks a random permutation; sometimes a cycle."""
    count = draw(st.integers(0, 40))
    num_resources = draw(st.integers(1, 5))
    duration = np.array(draw(st.lists(DURATIONS, min_size=count, max_size=count)), dtype=np.float64)
    resource = np.array(draw(st.lists(st.integers(0, num_resources - 1), min_size=count, max_size=count)), dtype=np.int64)
    rank = np.array(draw(st.permutations(range(count))), dtype=np.int64)
    edges: list[tuple[int, int]] = []
    if count >= 2:
        pair = st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)).filter(lambda e: e[0] != e[1])
        drawn = draw(st.lists(pair, max_size=3 * count))
        # Forward edges in a random topological order keep the graph acyclic unless asked not to.
        order = draw(st.permutations(range(count)))
        position = {task: i for i, task in enumerate(order)}
        edges = [(a, b) if position[a] < position[b] else (b, a) for a, b in drawn]
        if draw(st.booleans()) and edges:
            edges.append(edges[0][::-1])  # one back edge: a cycle, its tasks never run
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    order = np.argsort(src, kind="stable")
    succ_ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=count), out=succ_ptr[1:])
    by_rank = np.empty(count, dtype=np.int64)
    by_rank[rank] = np.arange(count, dtype=np.int64)
    return dict(
        num_resources=num_resources,
        duration=duration,
        resource=resource,
        rank=rank,
        by_rank=by_rank,
        succ_ptr=succ_ptr,
        succ=dst[order],
        pending=np.bincount(dst, minlength=count).astype(np.int64),
    )


def _python(graph: dict) -> tuple[np.ndarray, np.ndarray, int]:
    return engine._python_arrays(**{k: v.copy() if isinstance(v, np.ndarray) else v for k, v in graph.items()})


def _compiled(graph: dict) -> tuple[np.ndarray, np.ndarray, int]:
    from cost_model.simulator.engine_numba import event_loop_compiled

    return event_loop_compiled(**graph)


def _check_schedule(graph: dict, start: np.ndarray, end: np.ndarray, stuck: int) -> None:
    """A list schedule: tasks start after their predecessors end, one task at a time per
    resource, and a resource never idles while one of its tasks is ready (work conserving)."""
    count = graph["duration"].shape[0]
    succ_ptr, succ = graph["succ_ptr"], graph["succ"]
    preds: list[list[int]] = [[] for _ in range(count)]
    for task in range(count):
        for s in succ[succ_ptr[task] : succ_ptr[task + 1]].tolist():
            preds[s].append(task)
    # Which tasks can run at all: those whose predecessors all can (a fixpoint over the DAG part).
    runs = np.zeros(count, dtype=bool)
    changed = True
    while changed:
        changed = False
        for task in range(count):
            if not runs[task] and all(runs[p] for p in preds[task]):
                runs[task] = changed = True
    assert stuck == int((~runs).sum())
    assert np.array_equal(end[runs], start[runs] + graph["duration"][runs])
    ready_at = np.array([max((end[p] for p in preds[t]), default=0.0) for t in range(count)])
    assert np.all(start[runs] >= ready_at[runs])
    resource, rank = graph["resource"], graph["rank"]
    for r in range(graph["num_resources"]):
        mine = np.flatnonzero(runs & (resource == r))
        mine = mine[np.lexsort((end[mine], start[mine]))]
        assert np.all(start[mine][1:] >= end[mine][:-1])
        # Idle gaps of this resource, (from, to) with from < to.
        gaps = [(0.0, start[mine[0]])] if mine.size else []
        gaps += [(a, b) for a, b in zip(end[mine][:-1].tolist(), start[mine][1:].tolist())]
        for task in mine.tolist():
            for lo, hi in gaps:  # never idle while this task waits
                assert not max(lo, ready_at[task]) < min(hi, start[task]), (task, lo, hi)
            # A task that was waiting when `task` started, and started later, ranks after it.
            later = mine[(ready_at[mine] < start[task]) & (start[mine] > start[task])]
            assert np.all(rank[later] > rank[task])


@settings(max_examples=200, deadline=None)
@given(task_graphs())
def test_python_loop_is_a_valid_list_schedule(graph: dict) -> None:
    start, end, stuck = _python(graph)
    _check_schedule(graph, start, end, stuck)


@needs_numba
@settings(max_examples=200, deadline=None)
@given(task_graphs())
def test_compiled_loop_equals_python_loop_bitwise(graph: dict) -> None:
    pending = graph["pending"].copy()
    want = _python(graph)
    got = _compiled(graph)
    assert got[0].tobytes() == want[0].tobytes()  # start, to the last bit
    assert got[1].tobytes() == want[1].tobytes()  # end
    assert got[2] == want[2]
    assert np.array_equal(graph["pending"], pending)  # inputs untouched


@needs_numba
def test_ties_go_to_the_lowest_rank_then_the_lowest_task() -> None:
    # Resource 0: task 0 (d=1) releases tasks 1..4 at t=1 together with task 5 (resource 1,
    # d=1) finishing and releasing task 6 on resource 0. Ranks decide among simultaneous ready
    # tasks, not event order; the equal-end events retire in task order.
    graph = dict(
        num_resources=2,
        duration=np.array([1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.5]),
        resource=np.array([0, 0, 0, 0, 0, 1, 0]),
        rank=np.array([0, 5, 3, 4, 6, 1, 2]),
        succ_ptr=np.array([0, 4, 4, 4, 4, 4, 5, 5]),
        succ=np.array([1, 2, 3, 4, 6]),
        pending=np.array([0, 1, 1, 1, 1, 0, 1]),
    )
    graph["by_rank"] = np.argsort(graph["rank"])
    for run in (_python, _compiled):
        start, end, stuck = run(graph)
        # Order on resource 0 after t=1: task 6 (rank 2), 2 (3), 3 (4), 1 (5), 4 (6); zero-length
        # tasks 2 and 3 start at the same time as the next.
        assert start.tolist() == [0.0, 1.5, 1.5, 1.5, 2.5, 0.0, 1.0]
        assert end.tolist() == [1.0, 2.5, 1.5, 1.5, 3.5, 1.0, 1.5]
        assert stuck == 0


@needs_numba
def test_cycle_leaves_its_tasks_and_their_descendants_unrun() -> None:
    # 0 -> 1 -> 2 -> 1 (cycle 1, 2), 2 -> 3; task 4 independent.
    graph = dict(
        num_resources=1,
        duration=np.ones(5),
        resource=np.zeros(5, dtype=np.int64),
        rank=np.arange(5),
        by_rank=np.arange(5),
        succ_ptr=np.array([0, 1, 2, 4, 4, 4]),
        succ=np.array([1, 2, 1, 3]),
        pending=np.array([0, 2, 1, 1, 0]),
    )
    for run in (_python, _compiled):
        start, end, stuck = run(graph)
        assert stuck == 3
        assert end[[0, 4]].tolist() == [1.0, 2.0]


def test_run_event_loop_rejects_out_of_range_indices() -> None:
    graph = dict(
        num_resources=1,
        duration=np.ones(2),
        resource=np.array([0, 1]),
        rank=np.arange(2),
        by_rank=np.arange(2),
        succ_ptr=np.array([0, 0, 0]),
        succ=np.zeros(0, dtype=np.int64),
        pending=np.zeros(2, dtype=np.int64),
    )
    with pytest.raises(ValueError, match=r"resource must lie in \[0, 1\)"):
        engine.run_event_loop(**graph)
    graph["resource"] = np.zeros(2, dtype=np.int64)
    graph["succ_ptr"] = np.array([0, 1, 0])
    with pytest.raises(ValueError, match="succ_ptr"):
        engine.run_event_loop(**graph)


def _random_problem(num_nodes: int = 300, seed: int = 0) -> tuple[SimulationProblem, Decisions]:
    """A random DAG of Relu/Add/Mul nodes on 3 devices, random placement, priorities, fusion."""
    rng = np.random.default_rng(seed)
    graph = Graph("random")
    values = [graph.add_input(Value(f"x{i}", TensorType(DType.FLOAT32, (1024,)))) for i in range(3)]
    for i in range(num_nodes):
        op = ["Relu", "Add", "Mul"][int(rng.integers(3))]
        args = [values[int(j)] for j in rng.integers(max(0, len(values) - 20), len(values), size=1 if op == "Relu" else 2)]
        node = graph.add_node(op, args, name=f"n{i}")
        node.outputs[0].type = TensorType(DType.FLOAT32, (1024,))
        values.append(node.outputs[0])
    graph.add_output(values[-1])
    devices = [DeviceSpec(f"d{i}", "gpu", {"fp32": 1e10}, mem_bandwidth=1e10, memory_bytes=1e9, launch_overhead_s=1e-6) for i in range(3)]
    links = [Link(f"d{i}", f"d{j}", 1e9, 1e-6) for i in range(3) for j in range(3) if i != j]
    problem = SimulationProblem.from_graph(graph, Topology("t3", devices, links))
    device = rng.integers(0, 3, size=num_nodes)
    group = np.full(num_nodes, -1)
    # Fuse node i with node i + 1 where i + 1 reads i's output: no path can leave such a pair
    # and come back, so the fusion never forms a cycle.
    for i in range(0, num_nodes - 1, 5):
        if graph.nodes[i].outputs[0] in graph.nodes[i + 1].inputs:
            group[i] = group[i + 1] = i
            device[i + 1] = device[i]
    decisions = Decisions(
        device=device,
        fusion_group=group,
        priority=rng.integers(0, 5, size=num_nodes).astype(np.float64),  # many equal priorities
    )
    return problem, decisions


@needs_numba
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulate_gives_identical_results_with_either_engine(seed: int) -> None:
    problem, decisions = _random_problem(seed=seed)
    engine.select_engine(refresh=True)
    assert engine.engine_name() == "numba"
    fast = simulate(problem, decisions)
    again = simulate(problem, decisions)
    engine._engine = ("python", engine._python_arrays)
    slow = simulate(problem, decisions)
    assert fast.tasks.num_kernels < problem.num_nodes  # some groups fused
    assert fast.tasks.num_tasks > problem.num_nodes  # and many transfers
    for got in (fast, again):
        assert got.task_start.tobytes() == slow.task_start.tobytes()
        assert got.task_end.tobytes() == slow.task_end.tobytes()
        assert got.step_time_s == slow.step_time_s
        assert np.array_equal(got.peak_memory_bytes, slow.peak_memory_bytes)


def test_no_jit_environment_variable_selects_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.NO_JIT_ENV, "1")
    assert engine.select_engine(refresh=True)[0] == "python"
    problem, decisions = _random_problem(num_nodes=60)
    assert simulate(problem, decisions).step_time_s > 0
    monkeypatch.setenv(engine.NO_JIT_ENV, "0")
    assert engine.select_engine(refresh=True)[0] == ("numba" if HAVE_NUMBA else "python")


def test_missing_numba_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(engine.NO_JIT_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "cost_model.simulator.engine_numba", raising=False)
    assert engine.select_engine(refresh=True)[0] == "python"
    problem, decisions = _random_problem(num_nodes=60)
    assert simulate(problem, decisions).step_time_s > 0


def test_importing_the_simulator_does_not_import_numba() -> None:
    # A fresh interpreter: numba loads only at the first simulation, and with numba blocked the
    # simulator still imports and runs.
    code = (
        "import sys\n"
        "import cost_model, cost_model.simulator\n"
        "assert 'numba' not in sys.modules, 'numba imported eagerly'\n"
        "sys.modules['numba'] = None\n"
        "from cost_model.simulator import engine\n"
        "import numpy as np\n"
        "s, e, stuck = engine.run_event_loop(1, np.ones(2), np.zeros(2), np.arange(2), np.arange(2),"
        " np.array([0, 1, 1]), np.array([1]), np.array([0, 1]))\n"
        "assert engine.engine_name() == 'python' and e.tolist() == [1.0, 2.0] and stuck == 0\n"
    )
    env = {k: v for k, v in os.environ.items() if k != engine.NO_JIT_ENV}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
