"""Mixed precision as frameworks run it: fp16 math, fp32 optimizer state and master weights, one
weight cast per parameter; inference graphs get no casts."""

from __future__ import annotations

from graph_ir import Graph
from graph_ir.dtypes import DType
from graph_ir.op_kinds import OpKind
from cost_model.flops import node_bytes
from cost_model.precision import apply_amp, state_tail


def _train_step(optimizer: str) -> Graph:
    from compiler_opt.workloads._jax import dense, dense_params, lower_hlo, softmax_cross_entropy, spec
    from graph_ir.io.hlo_import import import_hlo_text
    import jax.numpy as jnp

    params = {"l1": dense_params(16, 32), "l2": dense_params(32, 4)}

    def loss(p, b):
        return softmax_cross_entropy(dense(p["l2"], jnp.tanh(dense(p["l1"], b["x"]))), b["y"]), ()

    text = lower_hlo("train", params, loss_fn=loss, predict_fn=lambda p, b: dense(p["l2"], jnp.tanh(dense(p["l1"], b["x"]))),
                     train_batch={"x": spec(8, 16), "y": spec(8, dtype=jnp.int32)}, inference_batch={"x": spec(8, 16)}, optimizer=optimizer)
    return import_hlo_text(text)


def _dtype(value) -> DType:
    return value.type.dtype


def test_adam_step_keeps_state_fp32_and_casts_each_weight_once() -> None:
    graph = _train_step("adam")
    summary = apply_amp(graph)
    graph.verify()
    floats = [v for v in graph.inputs if getattr(v.type, "dtype", None) in (DType.FLOAT32, DType.FLOAT16)]
    # params (4), Adam m and v (8), the batch x (1)
    casts = [n for n in graph if n.kind == OpKind.CAST and n.inputs[0] in graph.inputs]
    assert summary.casts == len(casts) == 4
    assert all(_dtype(c.inputs[0]) == DType.FLOAT32 and _dtype(c.outputs[0]) == DType.FLOAT16 for c in casts)
    x = next(v for v in floats if v.type.shape == (8, 16))
    assert _dtype(x) == DType.FLOAT16  # data: fp16
    assert sum(_dtype(v) == DType.FLOAT32 for v in floats) == 12  # params + moments
    for dot in (n for n in graph if n.kind == OpKind.MATMUL):
        assert _dtype(dot.outputs[0]) == DType.FLOAT16
        assert all(_dtype(v) == DType.FLOAT16 for v in dot.inputs)  # forward reads the casts
    root = graph.outputs[0].producer
    assert root is not None and root.kind == OpKind.TUPLE  # (loss, new params, new moments, count)
    outputs = [v for v in root.inputs if getattr(v.type, "dtype", None) in (DType.FLOAT32, DType.FLOAT16) and v.type.shape]
    assert len(outputs) == 12 and all(_dtype(v) == DType.FLOAT32 for v in outputs)  # new params and moments
    # The update reads fp32 state and an fp16 gradient: more bytes than the all-fp16 rewrite.
    tail = state_tail(graph)
    assert any(_dtype(v) == DType.FLOAT16 for n in tail for v in n.inputs if v is not None and hasattr(v.type, "dtype"))


def test_sgd_parameters_used_only_by_math_and_update() -> None:
    graph = _train_step("sgd")
    summary = apply_amp(graph)
    graph.verify()
    assert summary.casts == 4 and summary.state_nodes > 0


def test_inference_graph_is_all_fp16_without_casts() -> None:
    import jax.numpy as jnp

    from compiler_opt.workloads._jax import dense, dense_params, lower_hlo, spec
    from graph_ir.io.hlo_import import import_hlo_text

    params = {"l1": dense_params(16, 32)}
    text = lower_hlo("inference", params, loss_fn=lambda p, b: (0.0, ()), predict_fn=lambda p, b: jnp.tanh(dense(p["l1"], b["x"])),
                     train_batch={}, inference_batch={"x": spec(8, 16)})
    graph = import_hlo_text(text)
    before = sum(node_bytes(n) for n in graph)
    summary = apply_amp(graph)
    graph.verify()
    assert summary.casts == 0
    assert all(_dtype(v) == DType.FLOAT16 for v in graph.inputs)
    assert sum(node_bytes(n) for n in graph) * 2 == before  # every byte halves
