"""The profiled placement workloads and the paper's max-load cost model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cost_model.profiled import (
    ProfiledWorkloadError,
    check_assignment,
    device_loads,
    load_expert_split,
    load_profiled_workload,
    max_load,
)
from graph_ir.errors import CorruptModelError, EmptyModelError

PLACEMENT = Path(__file__).resolve().parents[2].parent / "shared" / "testdata" / "placement"
needs_data = pytest.mark.skipif(not PLACEMENT.is_dir(), reason="shared/testdata/placement is not beside this checkout")

# (workload file, expert split, README's expert max-load, one device, work/6 bound)
README_ROWS = [
    ("resnet50_inference", "resnet50_inference", 43.92, 201.45, 33.58),
    ("resnet50_training", "resnet50_inference", 112.11, 462.38, 77.06),
    ("gnmt_inference", "gnmt_inference", 46.21, 182.56, 30.43),
    ("gnmt_training", "gnmt_training", 137.15, 520.45, 86.74),
    ("bert24_inference", "bert24_inference", 20.08, 92.41, 15.40),
]


@needs_data
@pytest.mark.parametrize("row", README_ROWS, ids=[r[0] for r in README_ROWS])
def test_expert_splits_reproduce_the_readme_numbers(row):
    workload_name, expert_name, expert, one_device, bound = row
    workload = load_profiled_workload(PLACEMENT / "throughput-inputs" / "LayerGraphs" / f"{workload_name}.json")
    split = load_expert_split(PLACEMENT / "human-experts" / f"{expert_name}_expert.json")
    assignment = split.assignment(workload)
    assert check_assignment(workload, assignment) == []
    assert max_load(workload, assignment) == pytest.approx(expert, rel=0.01)
    assert workload.single_device_load() == pytest.approx(one_device, rel=0.001)
    assert workload.work_bound() == pytest.approx(bound, rel=0.001)


def _write(tmp_path: Path, nodes, edges, k=2, memory=100.0) -> Path:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"maxSizePerFPGA": memory, "maxFPGAs": k, "maxCPUs": 1, "nodes": nodes, "edges": edges}))
    return path


def _node(i, cpu=10.0, accel=1.0, color=None, size=1.0, supported=1):
    return {"id": i, "cpuLatency": cpu, "fpgaLatency": accel, "supportedOnFpga": supported, "isBackwardNode": 0,
            "colorClass": i if color is None else color, "size": size}


def test_hand_computed_loads(tmp_path):
    # a -> b, a -> c; a on accelerator 1, b on 2, c on CPU.
    path = _write(tmp_path, [_node(0, accel=2), _node(1, accel=3), _node(2, cpu=5)],
                  [{"sourceId": 0, "destId": 1, "cost": 0.5}, {"sourceId": 0, "destId": 2, "cost": 0.5}])
    workload = load_profiled_workload(path)
    loads = device_loads(workload, np.array([1, 2, 0]))
    # CPU: 5 (no communication); acc1: 2 + send 0.5; acc2: 3 + receive 0.5
    np.testing.assert_allclose(loads, [5.0, 2.5, 3.5])
    assert max_load(workload, np.array([1, 1, 1])) == 6.0  # everything on one accelerator: no transfers


def test_constraints_are_checked(tmp_path):
    path = _write(tmp_path, [_node(0, color=7, size=60), _node(1, color=7, size=60), _node(2, supported=0)], [], k=2)
    workload = load_profiled_workload(path)
    assert any("colour class 7" in p for p in check_assignment(workload, np.array([1, 2, 0])))
    assert any("exceed" in p for p in check_assignment(workload, np.array([1, 1, 0])))
    assert any("not supported" in p for p in check_assignment(workload, np.array([1, 1, 2])))


@pytest.mark.parametrize(
    "content, error, pattern",
    [
        ("", EmptyModelError, "empty"),
        ("{not json", CorruptModelError, r"w\.json:1:2"),
        (json.dumps({"nodes": [{"id": 1}], "edges": []}), ProfiledWorkloadError, "node 1.*cpuLatency"),
        (json.dumps({"maxFPGAs": 2, "nodes": [_node(1)], "edges": [{"sourceId": 1, "destId": 9, "cost": 1}]}),
         ProfiledWorkloadError, "does not exist"),
        (json.dumps({"maxFPGAs": 2, "nodes": [_node(1), _node(2)],
                     "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 1, "cost": 1}]}),
         ProfiledWorkloadError, "cycle"),
    ],
)
def test_bad_files(tmp_path, content, error, pattern):
    path = tmp_path / "w.json"
    path.write_text(content)
    with pytest.raises(error, match=pattern):
        load_profiled_workload(path)


@needs_data
def test_as_graph_for_ir_tools():
    workload = load_profiled_workload(PLACEMENT / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json")
    graph = workload.to_graph()
    graph.verify()
    assert len(graph) == workload.num_nodes
    assert sum(n.attr("accel_latency") for n in graph) == pytest.approx(workload.accel_latency.sum())
