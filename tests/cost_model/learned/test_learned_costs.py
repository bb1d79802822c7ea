"""`LearnedCosts` as the simulator's kernel cost source: conv / Gemm / reduce nodes on cpu
device types get the model's prediction, everything else keeps the roofline."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import graph_ir  # noqa: E402
from cost_model.decisions import Decisions  # noqa: E402
from cost_model.devices import DeviceSpec, Topology  # noqa: E402
from cost_model.learned.costs import LearnedCosts  # noqa: E402
from cost_model.learned.features import NODE_FEATURES  # noqa: E402
from cost_model.learned.model import CostModel, ModelConfig  # noqa: E402
from cost_model.learned.predictor import TilePredictor  # noqa: E402
from cost_model.measure.tile.shapes import kernels_from_node  # noqa: E402
from cost_model.measure.tile.space import CONFIG_FEATURES  # noqa: E402
from cost_model.simulator import SimulationProblem, build_task_graph, simulate  # noqa: E402


def _device(name: str, kind: str) -> DeviceSpec:
    return DeviceSpec(name, kind, {"fp32": 1e11}, mem_bandwidth=1e10, memory_bytes=1e10, launch_overhead_s=1e-5)


@pytest.mark.slow
def test_learned_costs_answer_tile_kernels_on_cpu_only(repo_root) -> None:  # type: ignore[no-untyped-def]
    graph = graph_ir.load(str(repo_root / "examples" / "small_cnn.onnx"))
    model = CostModel(ModelConfig(NODE_FEATURES, CONFIG_FEATURES, hidden=16, layers=1))
    model.target_mean.fill_(-9.0)  # about 100 us: an untrained model; the plumbing is under test
    costs = LearnedCosts(TilePredictor(model), candidates=8)
    topology = Topology("mixed", [_device("cpu0", "cpu"), _device("gpu0", "gpu")])
    plain = SimulationProblem.from_graph(graph, topology)
    learned = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)
    kinds = [t.kind for t in learned.device_types]
    cpu, gpu = kinds.index("cpu"), kinds.index("gpu")
    tiled = np.array([kernels_from_node(n) is not None for n in learned.nodes])
    assert tiled.sum() >= 7  # 6 convs, the Gemm, the ReduceMean
    predicted = np.array([costs.node_seconds(n) for n in learned.nodes])
    np.testing.assert_allclose(learned.node_time[tiled, cpu], predicted[tiled])
    np.testing.assert_array_equal(learned.node_time[~tiled, cpu], plain.node_time[~tiled, cpu])
    np.testing.assert_array_equal(learned.node_time[:, gpu], plain.node_time[:, gpu])
    n = learned.num_nodes
    decisions = Decisions(np.full(n, cpu), np.arange(n), np.zeros(n))  # unfused: one kernel per node
    assert simulate(learned, decisions).step_time_s > 0
    fused = Decisions(np.full(n, cpu), np.zeros(n), np.zeros(n))  # one fused group: the model does not describe it
    assert build_task_graph(learned, fused).kernel_duration[0] == build_task_graph(plain, fused).kernel_duration[0]


def test_a_tile_model_with_old_config_features_is_refused_clearly() -> None:
    model = CostModel(ModelConfig(NODE_FEATURES, 28, hidden=8, layers=1))  # the knob-only width of the first session
    with pytest.raises(ValueError, match="retrain it"):
        TilePredictor(model)
    assert TilePredictor(CostModel(ModelConfig(NODE_FEATURES, CONFIG_FEATURES, hidden=8, layers=1))).model is not None
