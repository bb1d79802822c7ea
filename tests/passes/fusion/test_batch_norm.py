"""Training batch norm as PyTorch's native_batch_norm runs it (passes/fusion/batch_norm.py): the
backward recomputes x-hat from x instead of reading JAX's residuals, the forward transform is one
closed kernel; numerics unchanged (XLA), and graphs without a batch norm are left alone."""

from __future__ import annotations

import numpy as np

from cost_model.roofline import group_boundary_bytes
from graph_ir import Graph
from graph_ir.op_kinds import OpKind
from passes.fusion.batch_norm import BATCH_NORM_META, find_batch_norms, rematerialize_batch_norm_residuals
from passes.fusion.eager import apply_eager_fusion

_IMAGES = (4, 8, 8, 4)
_CHANNELS = 8


def _conv_bn_relu_step() -> str:
    """HLO of an SGD step of conv-BN-ReLU-conv-BN-(+residual)-ReLU-dense, the suite's layers."""
    import jax
    import jax.numpy as jnp

    from compiler_opt.workloads._jax import (
        batch_norm, batch_norm_params, conv2d, conv_params, dense, dense_params, lower_hlo, softmax_cross_entropy, spec,
    )

    bn1, s1 = batch_norm_params(_CHANNELS)
    bn2, s2 = batch_norm_params(_CHANNELS)
    params = {"c1": conv_params(3, _IMAGES[-1], _CHANNELS), "bn1": bn1, "c2": conv_params(3, _CHANNELS, _CHANNELS), "bn2": bn2,
              "fc": dense_params(_CHANNELS, 10)}

    def forward(p, s, x, train):
        y, n1 = batch_norm(p["bn1"], s["bn1"], conv2d(p["c1"], x), train)
        y = jax.nn.relu(y)
        z, n2 = batch_norm(p["bn2"], s["bn2"], conv2d(p["c2"], y), train)
        return dense(p["fc"], jax.nn.relu(z + y).mean((1, 2))), {"bn1": n1, "bn2": n2}

    def loss(p, b):
        logits, state = forward(p, b["state"], b["images"], True)
        return softmax_cross_entropy(logits, b["labels"]), state

    images = spec(*_IMAGES)
    state = {"bn1": s1, "bn2": s2}
    return lower_hlo("train", params, loss_fn=loss, predict_fn=lambda p, b: forward(p, b["state"], b["images"], False)[0],
                     train_batch={"images": images, "labels": spec(_IMAGES[0], dtype=jnp.int32), "state": state},
                     inference_batch={"images": images, "state": state})


def _graph(text: str) -> Graph:
    from graph_ir.io.hlo_import import import_hlo_text

    return import_hlo_text(text)


def _run(graph: Graph, args: list[np.ndarray]) -> list[np.ndarray]:
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    return run_hlo_module(export_hlo_proto(graph), *args)


def _args(graph: Graph) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    args = []
    for value in graph.inputs:
        shape = tuple(int(d) for d in value.type.shape)
        if value.dtype is not None and value.dtype.is_integer:
            args.append(rng.integers(0, 10, size=shape).astype(np.int32))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    return args


def _kernels(graph: Graph) -> list[list]:
    groups: dict = {}
    for node in graph:
        groups.setdefault(node.fusion_group if node.fusion_group is not None else ("alone", id(node)), []).append(node)
    return list(groups.values())


def _full(value) -> bool:
    return tuple(getattr(value.type, "shape", ()) or ()) == (*_IMAGES[:-1], _CHANNELS)


def test_batch_norm_backward_reads_x_not_residuals_and_numerics_hold() -> None:
    from graph_ir.clone import clone_graph
    from passes.fusion.defaults import inline_calls

    text = _conv_bn_relu_step()
    graph = _graph(text)
    inline_calls(graph)
    before = clone_graph(graph)
    sites, copies = rematerialize_batch_norm_residuals(graph)
    graph.verify()
    assert len(sites) == 2 and copies > 0
    assert all(s.axis == 3 and s.output.op_type == "add" for s in sites)
    for site in sites:  # only the layer's output leaves its normalisation chain
        for node in site.chain:
            if node is not site.output:
                assert all(u in site.chain for u in node.outputs[0].users()), node.name
    args = _args(graph)
    for got, want in zip(_run(graph, args), _run(before, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_eager_batch_norm_kernels_move_native_batch_norm_passes() -> None:
    """Forward: statistics read x once, the transform reads x and writes y (closed: ReLU is its own
    kernel). Fewer full-tensor passes in all than with JAX's residuals."""
    text = _conv_bn_relu_step()
    full_bytes = int(np.prod(_IMAGES[:-1])) * _CHANNELS * 4

    def passes(native: bool) -> tuple[Graph, float]:
        graph = _graph(text)
        apply_eager_fusion(graph, native_batch_norm=native)
        graph.verify()
        kernels = [k for k in _kernels(graph) if not any(n.kind == OpKind.CONV for n in k)]
        return graph, sum(group_boundary_bytes(k) for k in kernels) / full_bytes

    graph, native = passes(True)
    _, traced = passes(False)
    assert native < traced - 6  # ~9 passes fewer over two layers
    transforms = [k for k in _kernels(graph) if any(n.meta.get(BATCH_NORM_META) for n in k)]
    assert len(transforms) == 2
    for kernel in transforms:
        assert 2.0 <= group_boundary_bytes(kernel) / full_bytes < 2.05  # read x, write y (+ per-channel values)
        assert not any(n.op_type == "maximum" for n in kernel)  # ReLU not fused into the library call
    # The statistics: the kernels reading a conv output whose full-size values all stay inside.
    conv_outputs = {n.outputs[0] for n in graph if n.kind == OpKind.CONV}
    stats = [k for k in _kernels(graph) if any(v in conv_outputs for n in k for v in n.inputs)
             and any(n.kind == OpKind.REDUCE for n in k)
             and not any(_full(n.outputs[0]) and any(u not in k for u in n.outputs[0].users()) for n in k)]
    assert len(stats) >= 2 and all(1.0 <= group_boundary_bytes(k) / full_bytes < 1.05 for k in stats)


def test_no_batch_norm_no_change() -> None:
    """Layer norm (the feature axis reduced) and a bias gradient (summed over the batch, centring
    nothing) are not batch norms: the rule finds nothing and the groups are the same."""
    import jax
    import jax.numpy as jnp

    from compiler_opt.workloads._jax import layer_norm

    def loss(w, b, s, x):
        h = layer_norm({"scale": s, "bias": b}, x @ w + b)
        return jax.nn.relu(h).sum()

    shapes = ((16, 16), (16,), (16,), (4, 6, 16))
    text = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(*[jnp.zeros(s, jnp.float32) for s in shapes]).as_text(dialect="hlo")
    graph = _graph(text)
    from passes.fusion.defaults import inline_calls

    inline_calls(graph)
    assert find_batch_norms(graph) == []
    groups = []
    for native in (True, False):
        g = _graph(text)
        apply_eager_fusion(g, native_batch_norm=native)
        groups.append([(n.name, n.fusion_group) for n in g])
    assert groups[0] == groups[1]
