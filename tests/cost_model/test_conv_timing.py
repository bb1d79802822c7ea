"""One conv alone through XLA (`cost_model.measure.conv_timing`): the spec read from a node is the
node's own conv (same output as the instruction compiled alone from the graph, as onnxruntime's
for an ONNX Conv), distinct convs are timed once and cached, and convs without a spec say so."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("jax")

from cost_model.measure.conv_timing import CONV_BACKEND, ConvSpec, ConvTimer, conv_spec  # noqa: E402
from cost_model.profiling.cache import ProfileCache  # noqa: E402


def _run_spec(spec: ConvSpec, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    import jax

    return np.asarray(jax.jit(spec.function())(lhs, rhs))


@pytest.mark.parametrize("name", ["dw_stride@1", "grouped@1", "dw_mult@1", "dilated@1", "conv_t@1", "stem@1"])
def test_hlo_spec_is_the_graphs_own_conv(name: str) -> None:
    """Each conv of a fusion program: the spec's output equals the node compiled alone from the
    graph's HLO (`compile_hlo_group`) on the same inputs (depthwise, grouped, channel multiplier,
    dilated, transposed = input-dilated, strided)."""
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.profiling.xla_backend import compile_hlo_group, random_inputs

    graph = fusion_graph(name)
    convs = [n for n in node_order(graph) if n.kind.value == "conv"]
    assert convs
    for node in convs:
        spec = conv_spec(node)
        assert spec is not None
        assert spec.output_shape() == tuple(node.outputs[0].type.shape)
        kernel = compile_hlo_group(graph, [node])
        args = random_inputs(kernel.cut.inputs, seed=3)
        feed = dict(zip(kernel.cut.inputs, args))
        operands = [np.asarray(feed[v]) if v in feed else v.const.numpy() for v in node.inputs[:2]]
        want = np.asarray(kernel.run_blocking(args)[0])
        np.testing.assert_allclose(_run_spec(spec, *operands), want, rtol=1e-4, atol=1e-4)
    depthwise = [conv_spec(n) for n in convs if n.attr("feature_group_count", 1) > 1]
    if name == "dw_stride@1":
        (spec,) = depthwise
        assert spec.feature_group_count == 16 and spec.window_strides == (2, 2) and "fgroups=16" in spec.text()


def _onnx_conv(tmp_path, **attrs):  # type: ignore[no-untyped-def]
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from graph_ir.io.onnx_import import load_onnx

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((8, 2, 3, 3)).astype(np.float32)  # 8 out channels, 4 groups of 2 in channels
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 11, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, list(weight.shape), weight.ravel().tolist())
    conv = helper.make_node("Conv", ["x", "w"], ["y"], group=4, kernel_shape=[3, 3], **attrs)
    model = helper.make_model(helper.make_graph([conv], "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    graph = load_onnx(path)
    (node,) = [n for n in graph.nodes if n.op_type == "Conv"]
    return path, node, weight


@pytest.mark.parametrize("attrs", [{"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}, {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
                                   {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, {"auto_pad": "VALID"}])
def test_onnx_conv_spec_matches_onnxruntime(tmp_path, attrs) -> None:  # type: ignore[no-untyped-def]
    ort = pytest.importorskip("onnxruntime")
    path, node, weight = _onnx_conv(tmp_path, **attrs)
    spec = conv_spec(node)
    assert spec is not None and spec.feature_group_count == 4 and spec.dimension_numbers == ((0, 1, 2, 3),) * 3
    x = np.random.default_rng(1).standard_normal((1, 8, 11, 10)).astype(np.float32)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(_run_spec(spec, x, weight), want, rtol=1e-4, atol=1e-4)


class _FakeRunner:
    def __init__(self, spec: ConvSpec) -> None:
        self.seconds = 1e-9 * float(np.prod(spec.lhs_shape)) * spec.feature_group_count


def _fake_timer(runner: _FakeRunner) -> float:
    return runner.seconds


def _fake_node(kind: str, op_type: str = "Conv") -> SimpleNamespace:
    return SimpleNamespace(kind=SimpleNamespace(value=kind), op_type=op_type, domain="", name=f"n_{op_type}", inputs=[])


def test_timer_dedupes_caches_and_marks_convs_without_a_spec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order

    nodes = node_order(fusion_graph("dw_sep@1")) + node_order(fusion_graph("dw_sep@1"))  # every conv twice
    convs = [i for i, n in enumerate(nodes) if n.kind.value == "conv"]
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        timer = ConvTimer(cache, timer=_fake_timer, runner=_FakeRunner)
        seconds = timer.node_times(nodes)
        assert timer.measured == len(convs) // 2  # the repeated convs are one spec each
        want = [_FakeRunner(conv_spec(nodes[i])).seconds for i in convs]  # type: ignore[arg-type]
        np.testing.assert_allclose(seconds[convs], want)
        assert seconds[[i for i in range(len(nodes)) if i not in convs]].sum() == 0
        assert len(cache) == timer.measured and timer.harness.backend == CONV_BACKEND  # one cache row per distinct conv
        again = ConvTimer(cache, timer=lambda r: 1.0, runner=_FakeRunner)  # another process: the cache answers, nothing is timed
        np.testing.assert_array_equal(again.node_times(nodes), seconds)
        assert again.measured == 0
    def refusing(spec: ConvSpec) -> _FakeRunner:  # a spec XLA will not compile: NaN for it, the others still timed
        if spec.feature_group_count > 1:
            raise RuntimeError("refused")
        return _FakeRunner(spec)

    partial = ConvTimer(None, timer=_fake_timer, runner=refusing).node_times(nodes)
    grouped = [i for i in convs if conv_spec(nodes[i]).feature_group_count > 1]  # type: ignore[union-attr]
    assert np.isnan(partial[grouped]).all() and np.allclose(partial[[i for i in convs if i not in grouped]], seconds[[i for i in convs if i not in grouped]])
    odd = ConvTimer(None, timer=_fake_timer, runner=_FakeRunner).node_times([_fake_node("conv_transpose", "ConvTranspose"), _fake_node("binary", "Add")])
    assert np.isnan(odd[0]) and odd[1] == 0


def test_real_conv_timed_alone() -> None:
    """A real 3x3 conv compiled and timed through XLA: positive, far below a second, and a conv with
    4x the work takes longer."""
    small = ConvSpec((1, 8, 8, 8), (3, 3, 8, 8), ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1))
    big = ConvSpec((1, 32, 32, 8), (3, 3, 8, 8), ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1))
    assert small.output_shape() == (1, 8, 8, 8) and big.output_shape() == (1, 32, 32, 8)
    seconds = ConvTimer(None, repeats=5, min_sample_s=1e-3).time([small, big, small])
    assert set(seconds) == {small.text(), big.text()}
    assert 0 < seconds[small.text()] < 0.01 and seconds[big.text()] > seconds[small.text()]


@pytest.mark.parametrize(("change", "message"), [
    ({"padding": ((1, 1),)}, "padding needs 2 entries"),
    ({"dimension_numbers": ((0, 1, 2, 2), (0, 1, 2, 3), (0, 1, 2, 3))}, "permutations"),
    ({"window_strides": (0, 1)}, ">= 1"),
    ({"feature_group_count": 0}, "group counts"),
    ({"rhs_shape": (3, 3, 8)}, "same rank"),
])
def test_bad_specs_are_refused(change, message) -> None:  # type: ignore[no-untyped-def]
    base = {"lhs_shape": (1, 8, 8, 8), "rhs_shape": (3, 3, 8, 8), "dimension_numbers": ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)),
            "window_strides": (1, 1), "padding": ((1, 1), (1, 1)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    with pytest.raises(ValueError, match=message):
        ConvSpec(**(base | change))
