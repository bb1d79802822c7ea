from __future__ import annotations

import numpy as np

from graph_ir import Graph, assert_structurally_equal
from passes.onnx import FoldConvBatchNorm, FoldConvBias, FoldPadIntoConv

from _build import const, f32, ops, typed  # noqa: I001 - the folder's helper

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def _conv(graph: Graph, x, *, bias: bool = True, pads=(1, 1, 1, 1), name: str = "conv"):
    inputs = [x, const(graph, W, "w")] + ([const(graph, B, "b")] if bias else [])
    return graph.add_node("Conv", inputs, attrs={"kernel_shape": (3, 3), "pads": pads}, name=name).outputs[0]


def test_conv_batchnorm_folds_into_weights_and_bias(assert_same_numerics):
    before = Graph("main")
    x = before.add_input(f32("x", 1, 3, 8, 8))
    y = _conv(before, x, bias=False)
    params = [p.astype(np.float32) for p in (RNG.uniform(0.5, 2, 4), RNG.standard_normal(4), RNG.standard_normal(4), RNG.uniform(0.1, 1, 4))]
    bn = before.add_node("BatchNormalization", [y, *(const(before, p.astype(np.float32), f"p{i}") for i, p in enumerate(params))], attrs={"epsilon": 0.5})
    before.add_output(before.add_node("Relu", [bn.outputs[0]], name="relu").outputs[0])
    before = typed(before)
    original = before.clone()
    assert FoldConvBatchNorm()(before).modified
    before.verify()

    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    scale = gamma / np.sqrt(var + 0.5)
    expected = Graph("main")
    ex = expected.add_input(f32("x", 1, 3, 8, 8))
    w = const(expected, (W.astype(np.float64) * scale[:, None, None, None]).astype(np.float32), "w")
    b = const(expected, ((0 - mean) * scale + beta).astype(np.float32), "b")
    conv = expected.add_node("Conv", [ex, w, b], attrs={"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}, name="conv")
    expected.add_output(expected.add_node("Relu", [conv.outputs[0]], name="relu").outputs[0])
    assert_structurally_equal(before, typed(expected))
    assert len(before.initializers) == 2  # the batch-norm parameters and old weights are gone
    assert_same_numerics(original, before)


def test_batchnorm_of_a_conv_read_twice_stays():
    graph = Graph("main")
    x = graph.add_input(f32("x", 1, 3, 8, 8))
    y = _conv(graph, x)
    bn = graph.add_node("BatchNormalization", [y, *(const(graph, np.ones(4, np.float32), f"p{i}") for i in range(4))])
    graph.add_output(bn.outputs[0])
    graph.add_output(y)
    assert not FoldConvBatchNorm()(typed(graph)).modified


def test_per_channel_add_joins_the_bias_other_adds_stay(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 1, 3, 8, 8))
    y = _conv(graph, x)
    z = graph.add_node("Add", [y, const(graph, np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1), "bias2")]).outputs[0]
    w = _conv(graph, x, name="conv2")
    v = graph.add_node("Add", [w, const(graph, np.ones((1, 4, 8, 1), np.float32), "not_per_channel")]).outputs[0]
    graph.add_output(z)
    graph.add_output(v)
    graph = typed(graph)
    original = graph.clone()
    assert FoldConvBias()(graph).modified
    assert ops(graph) == ["Conv", "Conv", "Add"]
    new_bias = graph.nodes[0].inputs[2].const.numpy()
    np.testing.assert_array_equal(new_bias, B + np.arange(4, dtype=np.float32))
    assert_same_numerics(original, graph)


def test_zero_pad_of_spatial_axes_merges_into_conv_pads(assert_same_numerics):
    graph = Graph("main")
    x = graph.add_input(f32("x", 1, 3, 8, 8))
    p = graph.add_node("Pad", [x, const(graph, np.array([0, 0, 2, 1, 0, 0, 0, 3]), "pads")]).outputs[0]
    graph.add_output(_conv(graph, p))
    graph = typed(graph)
    original = graph.clone()
    assert FoldPadIntoConv()(graph).modified
    assert ops(graph) == ["Conv"] and graph.nodes[0].attr("pads") == (3, 2, 1, 4)
    assert_same_numerics(original, graph)
    # reflect padding or padding the channels cannot merge
    other = Graph("main")
    x = other.add_input(f32("x", 1, 3, 8, 8))
    p = other.add_node("Pad", [x, const(other, np.array([0, 0, 1, 1, 0, 0, 1, 1]), "pads")], attrs={"mode": "reflect"}).outputs[0]
    other.add_output(_conv(other, p))
    assert not FoldPadIntoConv()(typed(other)).modified
