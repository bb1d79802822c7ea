"""Every placement method on the profiled workloads (Tarnawski et al.): valid placements under
both objectives, the constraints (colour classes, memory, unsupported nodes) respected, the
latency model checked by hand, and budgets spent exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cost_model.profiled import check_assignment, load_profiled_workload, max_load
from passes.placement import METHODS, ProfiledPlacementContext, place_profiled

PLACEMENT = Path(__file__).resolve().parents[3].parent / "shared" / "testdata" / "placement"
needs_data = pytest.mark.skipif(not PLACEMENT.is_dir(), reason="shared/testdata/placement is not beside this checkout")
BERT24 = PLACEMENT / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
FAST = {"sa": {"budget": 150}, "random": {"budget": 50}, "dp-ls": {"budget": 150}, "cp-sat": {"time_limit_s": 2.0}}


def _node(i: int, accel: float, *, cpu: float | None = None, color: int | None = None, size: float = 1.0, supported: int = 1,
          backward: int = 0) -> dict:
    return {"id": i, "cpuLatency": 10 * accel if cpu is None else cpu, "fpgaLatency": accel, "supportedOnFpga": supported,
            "isBackwardNode": backward, "colorClass": i if color is None else color, "size": size}


def constrained_workload(tmp_path: Path) -> Path:
    """Ten nodes, two branches; a colour class across the branches, one unsupported node, and a
    memory limit that no two-thirds of the nodes fit in."""
    nodes = [
        _node(0, 1.0), _node(1, 4.0, color=100), _node(2, 3.0), _node(3, 2.0, supported=0, cpu=2.5),
        _node(4, 5.0, color=100), _node(5, 2.0), _node(6, 3.0), _node(7, 1.0, color=101), _node(8, 2.0, color=101),
        _node(9, 1.0),
    ]
    edges = [(0, 1), (1, 2), (2, 3), (0, 4), (4, 5), (5, 6), (3, 7), (6, 7), (7, 8), (8, 9)]
    data = {"maxSizePerFPGA": 4.0, "maxFPGAs": 3, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": a, "destId": b, "cost": 0.5} for a, b in edges]}
    path = tmp_path / "constrained.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("objective", ["throughput", "latency"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_respects_classes_memory_and_support(tmp_path: Path, method: str, objective: str) -> None:
    workload = load_profiled_workload(constrained_workload(tmp_path))
    outcome = place_profiled(workload, method, objective, **FAST.get(method, {}))
    assert outcome.violations == []
    assert check_assignment(workload, outcome.assignment) == []
    assert outcome.assignment[workload.row_of[3]] == 0  # unsupported: the CPU
    assert len(set(outcome.assignment[[workload.row_of[1], workload.row_of[4]]].tolist())) == 1
    assert np.isfinite(outcome.value) and outcome.value >= outcome.lower_bound * (1 - 1e-9)


@needs_data
@pytest.mark.parametrize("objective", ["throughput", "latency"])
@pytest.mark.parametrize("method", sorted(METHODS) + ["expert"])
def test_every_method_gives_a_valid_placement_on_a_real_file(method: str, objective: str) -> None:
    workload = load_profiled_workload(BERT24)
    expert = PLACEMENT / "human-experts" / "bert24_inference_expert.json"
    outcome = place_profiled(workload, method, objective, expert=str(expert), **FAST.get(method, {}))
    assert outcome.violations == [] and not outcome.oom
    assert outcome.value >= outcome.lower_bound * (1 - 1e-9)
    if objective == "throughput":
        assert outcome.value == pytest.approx(max_load(workload, outcome.assignment), rel=1e-12)
    if method in FAST and method != "cp-sat":
        assert outcome.evaluations == FAST[method]["budget"]  # searching methods spend exactly their budget


def test_latency_is_the_list_schedule_by_hand(tmp_path: Path) -> None:
    # a -> b, a -> c, (b, c) -> d; b on accelerator 2, the rest on accelerator 1.
    nodes = [_node(0, 1.0), _node(1, 4.0), _node(2, 3.0), _node(3, 1.0)]
    edges = [(0, 1, 0.5), (0, 2, 0.5), (1, 3, 0.25), (2, 3, 0.75)]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"maxFPGAs": 2, "nodes": nodes, "edges": [{"sourceId": a, "destId": b, "cost": c} for a, b, c in edges]}))
    ctx = ProfiledPlacementContext(load_profiled_workload(path), objective="latency")
    device = ctx.from_rows(np.array([1, 2, 1, 1]))
    start, finish = ctx.schedule(device)
    # a: 0..1; b on 2 waits for a's output (cost 0.5): 1.5..5.5; c on 1: 1..4; d waits for b (0.25).
    assert finish.tolist() == pytest.approx([1.0, 5.5, 4.0, 6.75])
    assert ctx.evaluate(device) == pytest.approx(6.75)
    # All on one accelerator: 1 + 4 + 3 + 1, no transfers.
    assert ctx.evaluate(ctx.from_rows(np.array([1, 1, 1, 1]))) == pytest.approx(9.0)
    assert ctx.evaluations == 2


def test_over_capacity_and_unsupported_placements_are_penalised(tmp_path: Path) -> None:
    ctx = ProfiledPlacementContext(load_profiled_workload(constrained_workload(tmp_path)), objective="throughput")
    everything_on_one = np.ones(ctx.num_nodes, dtype=np.int64)
    assert ctx.evaluate(everything_on_one) == np.inf  # node 3 is unsupported on accelerators
    repaired = ctx.repair(everything_on_one)
    assert ctx.violations(repaired) == []
    assert ctx.evaluate(repaired) < 1e3  # no OOM penalty left
