"""The framework's default GPU fusion: the xla-gpu rules on HLO from JAX, the cudnn-runtime rules on
ONNX and TF graphs; each fused graph checked numerically against the original."""

from __future__ import annotations

import numpy as np
import pytest

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value
from passes.fusion.defaults import CUDNN_RUNTIME, XLA_GPU, apply_default_fusion, default_fusion_name

F32 = DType.FLOAT32


def _groups(graph: Graph) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for node in graph:
        if node.fusion_group is not None:
            out.setdefault(node.fusion_group, set()).add(node.op_type)
    return out


def _group_of(graph: Graph, op_type: str) -> int | None:
    return next(n.fusion_group for n in graph if n.op_type == op_type)


# -- xla-gpu ----------------------------------------------------------------------------------------
def _hlo(fn, *shapes):
    import jax
    import jax.numpy as jnp

    from graph_ir.io.hlo_import import import_hlo_text

    text = jax.jit(fn).lower(*[jnp.zeros(s, jnp.float32) for s in shapes]).as_text(dialect="hlo")
    return import_hlo_text(text)


def _assert_hlo_fused_numerics(graph: Graph, *shapes) -> None:
    """The graph exported with its groups as XLA fusions computes what the unfused one does."""
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fused = run_hlo_module(export_hlo_proto(graph, materialize_fusions=True), *args)
    for node in graph:
        node.fusion_group = None
    plain = run_hlo_module(export_hlo_proto(graph), *args)
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_xla_gpu_gemm_epilogue_takes_bias_and_activation() -> None:
    import jax.numpy as jnp

    graph = _hlo(lambda x, w, b: jnp.maximum(x @ w + b, 0.0), (8, 16), (16, 32), (32,))
    info = apply_default_fusion(graph)
    assert info.name == XLA_GPU == default_fusion_name(graph)
    dot = _group_of(graph, "dot")
    assert dot is not None
    assert _group_of(graph, "add") == dot and _group_of(graph, "maximum") == dot
    # The bias broadcast is recomputed in the epilogue (a cheap producer fuses into its consumer).
    assert _group_of(graph, "broadcast") == dot
    _assert_hlo_fused_numerics(graph, (8, 16), (16, 32), (32,))


def test_xla_gpu_no_producer_fuses_into_a_library_call() -> None:
    import jax.numpy as jnp

    graph = _hlo(lambda x, w: jnp.tanh(-x) @ w, (8, 16), (16, 4))
    apply_default_fusion(graph)
    dot = _group_of(graph, "dot")
    assert _group_of(graph, "negate") != dot or dot is None
    # ... but the elementwise producer chain fuses together (loop fusion).
    assert _group_of(graph, "negate") is not None and _group_of(graph, "negate") == _group_of(graph, "tanh")


def test_xla_gpu_input_fusion_into_a_reduction_and_one_hero_per_group() -> None:
    import jax.numpy as jnp

    # Two reductions of different inputs (of one input they would be siblings, see below).
    graph = _hlo(lambda x, y: jnp.sum(jnp.exp(x) * 2.0, axis=1) + jnp.max(y, axis=1), (16, 64), (16, 64))
    apply_default_fusion(graph)
    reduces = [n for n in graph if n.op_type == "reduce"]
    assert len(reduces) == 2
    assert reduces[0].fusion_group != reduces[1].fusion_group  # one hero per fused kernel
    exp_group = _group_of(graph, "exponential")
    assert exp_group is not None and exp_group in {r.fusion_group for r in reduces}
    _assert_hlo_fused_numerics(graph, (16, 64), (16, 64))


def test_existing_decisions_are_kept() -> None:
    import jax.numpy as jnp

    graph = _hlo(lambda x: jnp.exp(x) * 2.0, (4, 4))
    first = next(iter(graph))
    first.fusion_group = 7
    info = apply_default_fusion(graph)
    assert info.name == "none" and "already" in info.reason
    assert [n.fusion_group for n in graph].count(7) == 1


# -- cudnn-runtime: ONNX --------------------------------------------------------------------------
def _onnx_conv_net(training_bn: bool = False) -> Graph:
    g = Graph("main")
    rng = np.random.default_rng(1)

    def const(name: str, shape: tuple[int, ...]) -> Value:
        return g.add_initializer(Value(name, const=NumpyTensor(rng.standard_normal(shape).astype(np.float32))))

    def op(op_type: str, inputs: list[Value], name: str, shape: tuple[int, ...], **attrs) -> Value:
        from graph_ir.attrs import Attr

        node = g.add_node(op_type, inputs, name=name, attrs=[Attr.infer(k, v) for k, v in attrs.items()])
        node.outputs[0].name = name
        node.outputs[0].type = TensorType(F32, shape)
        return node.outputs[0]

    x = g.add_input(Value("x", TensorType(F32, (2, 3, 8, 8))))
    h = op("Conv", [x, const("w1", (4, 3, 3, 3))], "conv1", (2, 4, 8, 8), pads=[1, 1, 1, 1])
    scale, bias, mean = const("s", (4,)), const("b", (4,)), const("m", (4,))
    var = g.add_initializer(Value("v", const=NumpyTensor(np.abs(rng.standard_normal(4)).astype(np.float32) + 0.5)))
    h = op("BatchNormalization", [h, scale, bias, mean, var], "bn", (2, 4, 8, 8))
    h = op("Relu", [h], "relu1", (2, 4, 8, 8))
    h = op("Conv", [h, const("w2", (4, 4, 1, 1))], "conv2", (2, 4, 8, 8))
    h = op("Add", [h, const("b2", (4, 1, 1))], "bias2", (2, 4, 8, 8))
    h = op("Relu", [h], "relu2", (2, 4, 8, 8))
    h = op("Sigmoid", [h], "sig", (2, 4, 8, 8))  # a second activation stays its own kernel
    g.set_outputs([h])
    return g


def test_runtime_conv_bn_relu_and_conv_bias_relu(assert_same_numerics) -> None:  # type: ignore[no-untyped-def]
    from graph_ir.clone import clone_graph

    graph = _onnx_conv_net()
    before = clone_graph(graph)
    info = apply_default_fusion(graph)
    assert info.name == CUDNN_RUNTIME and info.groups == 2
    assert sorted(map(sorted, _groups(graph).values())) == [["Add", "Conv", "Relu"], ["BatchNormalization", "Conv", "Relu"]]
    assert _group_of(graph, "Sigmoid") is None
    graph.verify()
    assert_same_numerics(before, graph)
    # And through the exporter that writes each group as one ONNX function, in onnxruntime.
    import onnxruntime as ort

    from graph_ir.io.onnx_export import export_onnx

    feeds = {"x": np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    runs = []
    for g, functions in ((before, False), (graph, True)):
        model = export_onnx(g, fused_groups_as_functions=functions)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        runs.append(session.run(None, feeds)[0])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-5, atol=1e-6)


# -- cudnn-runtime: TF --------------------------------------------------------------------------------
def test_runtime_tf_conv_biasadd_relu_and_training_graphs_keep_batch_norm_apart() -> None:
    import tensorflow as tf

    from graph_ir.io.tf_import import import_graphdef

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (2, 8, 8, 3), name="x")
        w = tf.constant(np.ones((3, 3, 3, 4), np.float32))
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), tf.constant(np.ones(4, np.float32))), name="y")
        z = tf.nn.relu(tf.matmul(tf.reshape(y, (2, -1)), tf.constant(np.ones((256, 5), np.float32))), name="z")
    ir = import_graphdef(graph.as_graph_def())
    info = apply_default_fusion(ir)
    assert info.name == CUDNN_RUNTIME
    groups = sorted(map(sorted, _groups(ir).values()))
    assert ["BiasAdd", "Conv2D", "Relu"] in groups and ["MatMul", "Relu"] in groups
    ir.verify()


def test_groups_split_by_placement_are_unfused() -> None:
    from passes.fusion.defaults import colocated_groups

    groups = np.array([0, 0, 1, 1, -1, 2])
    device = np.array([1, 1, 1, 2, 0, 0])
    assert colocated_groups(groups, device).tolist() == [0, 0, -1, -1, -1, 2]


def test_cheap_calls_are_inlined_and_fused_like_xla() -> None:
    """JAX wraps relu in a `call`; XLA inlines it and fuses the max into the conv/dot epilogue."""
    import jax

    from graph_ir.clone import clone_graph
    from passes.fusion.defaults import inline_cheap_calls

    fn = lambda x, w: jax.nn.relu(jax.nn.relu(x @ w) * 2.0 - 1.0)  # noqa: E731  (a shared body)
    graph = _hlo(fn, (8, 16), (16, 4))
    assert any(n.op_type == "call" for n in graph)
    before = clone_graph(graph)
    assert inline_cheap_calls(graph) == 2
    graph.verify()
    assert not any(n.op_type == "call" for n in graph)
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 4))]
    np.testing.assert_allclose(run_hlo_module(export_hlo_proto(graph), *args)[0], run_hlo_module(export_hlo_proto(before), *args)[0], rtol=1e-6)
    apply_default_fusion(graph)
    assert _group_of(graph, "maximum") == _group_of(graph, "dot") is not None


def test_sibling_reductions_of_one_input_share_a_kernel() -> None:
    import jax.numpy as jnp

    # Batch-norm statistics: mean and mean of squares of one activation, one XLA kernel.
    graph = _hlo(lambda x: (jnp.mean(x, axis=0), jnp.mean(x * x, axis=0)), (32, 16))
    apply_default_fusion(graph)
    reduces = [n for n in graph if n.op_type == "reduce"]
    assert len(reduces) == 2 and reduces[0].fusion_group is not None
    assert reduces[0].fusion_group == reduces[1].fusion_group
    _assert_hlo_fused_numerics(graph, (32, 16))  # one multi-output XLA fusion computes the same


def test_cycle_check_is_exact_on_graphs_above_the_search_cap() -> None:
    """An unrolled RNN's training graph (6.4k nodes): every elementwise op fuses; with the
    4096-node search cap of `FusionGroups`, 1,187 of them were refused as 'unsure'."""
    from compiler_opt.workloads.registry import build_workload
    from graph_ir.op_kinds import ELEMENTWISE_KINDS
    from passes.fusion.defaults import inline_cheap_calls, sibling_fusion
    from passes.fusion.fuse import greedy_fuse
    from passes.fusion.groups import FusionGroups

    def lone_elementwise(graph: Graph) -> int:
        return sum(1 for n in graph if n.fusion_group is None and n.kind in ELEMENTWISE_KINDS)

    exact = build_workload("gnmt-4", "train")
    assert len(exact) > 4096
    apply_default_fusion(exact)
    capped = build_workload("gnmt-4", "train")
    inline_cheap_calls(capped)
    groups = FusionGroups(capped, search_limit=4096)  # the cap every fusion used to run with
    greedy_fuse(groups)
    sibling_fusion(groups)
    groups.write()
    assert lone_elementwise(exact) == 0 < lone_elementwise(capped)
