"""DeratedRoofline: at full rate it is the simulator's roofline; derating scales the right terms."""

from __future__ import annotations

import numpy as np
import pytest

from compiler_opt.workloads.registry import build_workload
from cost_model.costs.derated import DeratedRoofline
from cost_model.decisions import Decisions
from cost_model.devices import load_topology
from cost_model.simulator import SimulationProblem, simulate
from passes.fusion.defaults import apply_default_fusion


@pytest.fixture(scope="module")
def fused_graph():
    graph = build_workload("resnet-50", "inference", batch=2, image_size=64)
    apply_default_fusion(graph)
    return graph


def _step(graph, costs):
    topology = load_topology("1xV100")
    gpu = next(i for i, d in enumerate(topology.devices) if d.kind == "gpu")
    problem = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)
    decisions = Decisions.from_graph(graph, topology, default_device=gpu, nodes=problem.nodes)
    return problem, simulate(problem, decisions).step_time_s


def test_full_rate_equals_roofline(fused_graph) -> None:
    roofline_problem, roofline = _step(fused_graph, None)
    problem, derated = _step(fused_graph, DeratedRoofline({"fp32": 1.0, "fp16": 1.0}, memory=1.0))
    assert derated == pytest.approx(roofline, rel=1e-9)
    np.testing.assert_allclose(problem.node_time, roofline_problem.node_time, rtol=1e-12)


def test_derating_slows_compute_and_memory(fused_graph) -> None:
    _, full = _step(fused_graph, DeratedRoofline({"fp32": 1.0}))
    _, half_compute = _step(fused_graph, DeratedRoofline({"fp32": 0.5}))
    _, half_both = _step(fused_graph, DeratedRoofline({"fp32": 0.5}, memory=0.5))
    assert full < half_compute < half_both
    # Every kernel is max(compute, memory) + launch: halving both rates doubles all but the launches.
    problem, _ = _step(fused_graph, None)
    group = np.array([-1 if n.fusion_group is None else n.fusion_group for n in problem.nodes])
    kernels = np.unique(np.where(group >= 0, group, -1 - np.arange(len(group)))).size
    gpu_launch = max(problem.type_launch)
    assert half_both == pytest.approx(2 * full - kernels * gpu_launch, rel=1e-9)


@pytest.mark.parametrize("compute, memory", [({"fp32": 0.0}, 1.0), ({"fp32": 1.5}, 1.0), ({"fp16": 0.5}, 0.0), ({"bf17": 0.5}, 1.0)])
def test_bad_fractions_raise(compute, memory) -> None:
    with pytest.raises(ValueError):
        DeratedRoofline(compute, memory=memory)


def test_conv_fraction_applies_to_convolutions_only(fused_graph) -> None:
    _, full = _step(fused_graph, DeratedRoofline({"fp32": 1.0}))
    _, convs_half = _step(fused_graph, DeratedRoofline({"fp32": 1.0}, conv={"fp32": 0.5}))
    _, all_half = _step(fused_graph, DeratedRoofline({"fp32": 0.5}))
    _, others_half = _step(fused_graph, DeratedRoofline({"fp32": 0.5}, conv={"fp32": 1.0}))
    # ResNet-50's FLOPs are nearly all in convolutions; its one matmul (the classifier) is small.
    assert full < others_half < convs_half <= all_half
