"""The ideal DP (Tarnawski et al.) against brute force on tiny workloads, and against the README's
reference optima on the real files."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from cost_model.profiled import check_assignment, device_loads, load_profiled_workload, max_load
from passes.placement import ProfiledPlacementContext, place_profiled
from passes.placement.dp import profiled_dp
from passes.placement.ideals import MaxLoadInstance, enumerate_ideals, ideal_dp, unit_graph

PLACEMENT = Path(__file__).resolve().parents[3].parent / "shared" / "testdata" / "placement"
needs_data = pytest.mark.skipif(not PLACEMENT.is_dir(), reason="shared/testdata/placement is not beside this checkout")
LAYERS = PLACEMENT / "throughput-inputs" / "LayerGraphs"


def _random_workload(tmp_path: Path, seed: int, n: int = 7, k: int = 2) -> Path:
    """A random DAG (edges only forward in index order), random times, sizes, costs, one
    colour class of two nodes, sometimes an unsupported node."""
    rng = np.random.default_rng(seed)
    edges = [(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.35]
    edges += [(a, a + 1) for a in range(n - 1) if rng.random() < 0.5 and (a, a + 1) not in edges]
    nodes = []
    colour = {2: 900, 3: 900} if (2, 3) in edges or rng.random() < 0.5 else {}
    for i in range(n):
        accel = float(rng.integers(1, 20))
        nodes.append({
            "id": i, "fpgaLatency": accel, "cpuLatency": float(accel * rng.integers(2, 12)), "size": float(rng.integers(1, 5)),
            "supportedOnFpga": 0 if (seed % 3 == 0 and i == n - 1) else 1, "isBackwardNode": 0, "colorClass": colour.get(i, i),
        })
    data = {"maxSizePerFPGA": float(rng.integers(6, 14)), "maxFPGAs": k, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": a, "destId": b, "cost": float(rng.integers(0, 4))} for a, b in edges]}
    path = tmp_path / f"random{seed}.json"
    path.write_text(json.dumps(data))
    return path


def _is_chain_of_ideals(assign: np.ndarray, preds: list[list[int]]) -> bool:
    """Some order of the used devices makes every prefix union downward closed."""
    used = sorted(set(assign.tolist()))
    for order in itertools.permutations(used):
        seen: set[int] = set()
        ok = True
        for d in order:
            seen |= {v for v in range(assign.size) if assign[v] == d}
            if any(p not in seen for v in seen for p in preds[v]):
                ok = False
                break
        if ok:
            return True
    return False


def _brute_force(workload) -> float:  # type: ignore[no-untyped-def]
    preds: list[list[int]] = [[] for _ in range(workload.num_nodes)]
    for a, b in zip(workload.edge_src.tolist(), workload.edge_dst.tolist()):
        preds[b].append(a)
    best = np.inf
    for assign in itertools.product(range(workload.devices), repeat=workload.num_nodes):
        assign = np.asarray(assign)
        if check_assignment(workload, assign) or not _is_chain_of_ideals(assign, preds):
            continue
        best = min(best, max_load(workload, assign))
    return best


@pytest.mark.parametrize("seed", range(8))
def test_the_dp_is_the_best_contiguous_split(tmp_path: Path, seed: int) -> None:
    workload = load_profiled_workload(_random_workload(tmp_path, seed))
    ctx = ProfiledPlacementContext(workload)
    result = profiled_dp(ctx)
    assert result.complete
    rows = ctx.to_rows(result.device)
    assert check_assignment(workload, rows) == []
    # The DP's own value is the cost model's max-load of its placement, and nothing contiguous beats it.
    assert result.value == pytest.approx(max_load(workload, rows), rel=1e-12)
    assert result.value == pytest.approx(_brute_force(workload), rel=1e-12)


def test_order_prefixes_are_a_subfamily_and_never_beat_all_ideals(tmp_path: Path) -> None:
    workload = load_profiled_workload(_random_workload(tmp_path, 5, n=9, k=3))
    ctx = ProfiledPlacementContext(workload)
    full = profiled_dp(ctx)
    fallback = profiled_dp(ctx, max_ideals=2)  # forces the topological-order fallback
    assert full.complete and not fallback.complete
    assert fallback.value >= full.value - 1e-12
    assert fallback.value == pytest.approx(max_load(workload, ctx.to_rows(fallback.device)), rel=1e-12)


def test_ideals_of_a_diamond() -> None:
    # a -> b, a -> c, (b, c) -> d: {}, {a}, {a,b}, {a,c}, {a,b,c}, all.
    family = enumerate_ideals([[], [0], [0], [1, 2]], max_ideals=100)
    assert family is not None and family.shape == (6, 4)
    assert enumerate_ideals([[], [0], [0], [1, 2]], max_ideals=5) is None


def test_training_units_follow_the_forward_graph() -> None:
    # f0 -> f1 -> b1 -> b0 with colour classes {f0, b0}, {f1, b1}: the quotient has a cycle.
    inst = MaxLoadInstance(
        accel=np.ones(4), cpu=np.full(4, 10.0), cost=np.zeros(4), size=np.zeros(4), color=np.array([0, 1, 1, 0]),
        backward=np.array([False, False, True, True]), edge_src=np.array([0, 1, 2, 0]), edge_dst=np.array([1, 2, 3, 3]),
        accelerators=2, capacity=np.inf,
    )
    unit, preds = unit_graph(inst)
    assert unit.tolist() == [0, 1, 1, 0] and preds == [[], [0]]
    result = ideal_dp(inst)
    assert result.value == pytest.approx(2.0) and result.device[0] == result.device[3] != result.device[1]


# (file, README contiguous DP optimum): the fast ones run by default, the others with --runslow.
REFERENCE = [("gnmt_inference", 32.91), ("resnet50_inference", 33.77)]
SLOW_REFERENCE = [("resnet50_training", 78.63), ("gnmt_training", 107.00), ("bert24_inference", 17.79)]


def _check_reference(name: str, optimum: float) -> None:
    workload = load_profiled_workload(LAYERS / f"{name}.json")
    ctx = ProfiledPlacementContext(workload)
    result = profiled_dp(ctx)
    rows = ctx.to_rows(result.device)
    assert check_assignment(workload, rows) == []
    value = max_load(workload, rows)
    assert value == pytest.approx(result.value, rel=1e-12)
    # Within 2 % of the reference and, being contiguous itself, not below it (rounding aside).
    assert optimum * (1 - 5e-4) <= value <= optimum * 1.02
    loads = device_loads(workload, rows)
    assert loads.max() == pytest.approx(value)


@needs_data
@pytest.mark.parametrize("name,optimum", REFERENCE)
def test_the_dp_reaches_the_readme_optimum(name: str, optimum: float) -> None:
    _check_reference(name, optimum)


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("name,optimum", SLOW_REFERENCE)
def test_the_dp_reaches_the_readme_optimum_slow(name: str, optimum: float) -> None:
    _check_reference(name, optimum)


@needs_data
@pytest.mark.slow
def test_local_search_beats_the_contiguous_optimum_on_gnmt_training() -> None:
    outcome = place_profiled(LAYERS / "gnmt_training.json", "dp-ls", "throughput", budget=2000)
    assert outcome.violations == []
    assert outcome.value <= 107.00 * 0.9  # the README's local search found 90.95
