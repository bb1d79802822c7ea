"""Any legal fusion followed by any placement (and the reverse) is a graph the simulator runs
and the exporters write as kernels that compute what the original did (graph_ir.kernel_pieces,
graph_ir.io.apply_decisions, cost_model.simulator.tasks).

Real graphs: the bundled small CNN, onnx-package models, a JAX MLP and conv net as HLO.
Fusion groupings are random merges under `FusionGroups.legal` (same device, acyclic, size);
placements are random devices or a placement method.
"""

from __future__ import annotations

import logging
import os
import random

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graph_ir
from cost_model.decisions import Decisions
from cost_model.devices import load_topology
from cost_model.simulator import SimulationProblem, simulate
from graph_ir.io.apply_decisions import materialize_fusion_groups
from graph_ir.io.onnx_export import export_onnx
from passes import run_pipeline
from tests.fusion_helpers import random_legal_fusion

ort = pytest.importorskip("onnxruntime")
logger = logging.getLogger(__name__)

TOPOLOGY = "4xV100"
DEVICES = ["gpu0", "gpu1", "gpu2", "gpu3"]
# The same onnxruntime kernels run on both sides (local functions are inlined), graph
# optimisation off: only summation order inside a kernel may differ.
RTOL, ATOL = 1e-5, 1e-5
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _random_placement(graph: graph_ir.Graph, rng: random.Random, devices: int) -> None:
    for node in graph:
        node.device = DEVICES[rng.randrange(devices)]


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _check_onnx(graph: graph_ir.Graph, original: onnx.ModelProto, feeds: dict[str, np.ndarray], expected: list[np.ndarray]) -> None:
    graph.verify()
    topology = load_topology(TOPOLOGY)
    result = simulate(SimulationProblem.from_graph(graph, topology), Decisions.from_graph(graph, topology))
    assert result.step_time_s > 0
    model = export_onnx(graph, fused_groups_as_functions=True)
    onnx.checker.check_model(model, full_check=True)
    for got, want in zip(_ort(model, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.fixture(scope="module")
def small_cnn(example_model):
    original = onnx.load(example_model)
    feeds = _feeds(original, 0)
    return example_model, original, feeds, _ort(original, feeds)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), devices=st.integers(2, 4), max_nodes=st.sampled_from([2, 4, 32]), fuse_first=st.booleans())
def test_random_fusion_and_placement_compose_on_small_cnn(small_cnn, seed, devices, max_nodes, fuse_first):
    path, original, feeds, expected = small_cnn
    rng = random.Random(seed)
    graph = graph_ir.load(path)
    if fuse_first:
        random_legal_fusion(graph, rng, max_nodes)
        _random_placement(graph, rng, devices)
    else:
        _random_placement(graph, rng, devices)
        random_legal_fusion(graph, rng, max_nodes)
    _check_onnx(graph, original, feeds, expected)


def test_a_group_split_so_that_its_shares_cross_is_cut_into_ordered_kernels():
    """a(gpu0) -> d(gpu1) and c(gpu1) -> e(gpu0), all one group: per-device shares {a, e} and
    {c, d} would wait on each other; the cut puts e and d in later pieces."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Exp", ["x"], ["c"], name="c"),
        helper.make_node("Add", ["a", "x"], ["d"], name="d"),
        helper.make_node("Mul", ["c", "x"], ["e"], name="e"),
        helper.make_node("Add", ["d", "e"], ["f"], name="f"),
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("x", "f")]
    model = helper.make_model(helper.make_graph(nodes, "crossed", info[:1], info[1:]), opset_imports=[helper.make_opsetid("", 21)])
    graph = graph_ir.io.onnx_import.import_onnx(model)
    for name, device in {"a": "gpu0", "e": "gpu0", "c": "gpu1", "d": "gpu1"}.items():
        node = graph.find_node(name)
        node.fusion_group, node.device = 0, device
    groups = materialize_fusion_groups(graph)  # no cycle error: d and e moved to a later piece
    assert all(len(g.nodes) >= 2 for g in groups)
    pieces = {n.name: p for n, p in _pieces(graph).items()}
    assert pieces == {"d": 1, "e": 1}
    feeds = {"x": np.random.default_rng(1).standard_normal(3).astype(np.float32)}
    _check_onnx(graph, export_onnx(graph), feeds, _ort(export_onnx(graph), feeds))


@pytest.mark.parametrize("pipeline", ["dce,cse,shape-infer,fuse,m-etf{devices=4xV100}", "fuse,m-etf{devices=4xV100}", "m-etf{devices=4xV100},fuse"])
@pytest.mark.parametrize("model", ["small_cnn", pytest.param("light_inception_v2", marks=pytest.mark.slow), "light_squeezenet"])
def test_readme_fusion_and_placement_pipeline_on_real_models(example_model, model, pipeline):
    path = example_model if model == "small_cnn" else os.path.join(LIGHT, f"{model}.onnx")
    if not os.path.isfile(path):
        pytest.skip(f"{path} is not in this onnx wheel")
    original = onnx.load(path)
    feeds = _feeds(original, 0)
    graph = run_pipeline(graph_ir.load(path), pipeline).graph
    _check_onnx(graph, original, feeds, _ort(original, feeds))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["m-etf", "m-sct", "critical-path", "metis", "sa", "random"])
def test_fuse_then_every_placement_on_every_light_onnx_model(method):
    for name in sorted(os.listdir(LIGHT)):
        if not name.endswith(".onnx"):
            continue
        path = os.path.join(LIGHT, name)
        original = onnx.load(path)
        feeds = _feeds(original, 0)
        graph = run_pipeline(graph_ir.load(path), f"fuse,{method}{{devices=4xV100}}").graph
        _check_onnx(graph, original, feeds, _ort(original, feeds))


def _pieces(graph: graph_ir.Graph) -> dict:
    from graph_ir.io.apply_decisions import _spanning_pieces
    from graph_ir.verify import topological_order

    order = topological_order(graph)
    return _spanning_pieces(graph, order, {n: i for i, n in enumerate(order)})
