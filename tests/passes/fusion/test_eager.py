"""PyTorch eager's default kernels on traced JAX graphs: call inlining, batched GEMMs (cuDNN's LSTM
input projection, accumulated weight gradients), and the recurrences that must stay per step."""

from __future__ import annotations

import numpy as np
import pytest

from graph_ir import Graph
from graph_ir.op_kinds import OpKind
from passes.fusion.eager import PYTORCH_EAGER, apply_eager_fusion


def _hlo(fn, *shapes) -> Graph:
    import jax
    import jax.numpy as jnp

    from graph_ir.io.hlo_import import import_hlo_text

    text = jax.jit(fn).lower(*[jnp.zeros(s, jnp.float32) for s in shapes]).as_text(dialect="hlo")
    return import_hlo_text(text)


def _run(graph: Graph, args: list[np.ndarray]) -> list[np.ndarray]:
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    return run_hlo_module(export_hlo_proto(graph), *args)


def _matmul_groups(graph: Graph) -> list[int | None]:
    return [n.fusion_group for n in graph if n.kind == OpKind.MATMUL]


def test_every_call_is_inlined_with_tuple_results_and_numerics_hold() -> None:
    """`var` and `log_softmax` come as calls returning tuples (JAX's jvp residuals); all are inlined."""
    import jax
    import jax.numpy as jnp

    from graph_ir.clone import clone_graph
    from passes.fusion.defaults import inline_calls, inline_cheap_calls

    def loss(x, w):
        y = x @ w
        y = (y - y.mean(0)) / jnp.sqrt(y.var(0) + 1e-3)
        return -jax.nn.log_softmax(jax.nn.relu(y), -1).mean()

    graph = _hlo(jax.value_and_grad(loss, argnums=1), (8, 16), (16, 4))
    before = clone_graph(graph)
    assert inline_cheap_calls(clone_graph(graph)) == 1  # the cheap rule takes only relu
    assert inline_calls(graph) >= 5
    graph.verify()
    assert not any(n.kind == OpKind.CALL for n in graph)
    assert not any(n.kind == OpKind.GET_TUPLE_ELEMENT and n.inputs[0].producer is not None
                   and n.inputs[0].producer.kind == OpKind.CALL for n in graph)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 4))]
    for got, want in zip(_run(graph, args), _run(before, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_shared_weight_over_independent_steps_is_one_gemm() -> None:
    """x_t @ W for every step of a sequence: one batched GEMM (cuDNN's input projection)."""
    fn = lambda x, w: [x[t] @ w for t in range(4)]  # noqa: E731
    graph = _hlo(fn, (4, 8, 16), (16, 32))
    info = apply_eager_fusion(graph)
    assert info.name == PYTORCH_EAGER
    groups = _matmul_groups(graph)
    assert len(groups) == 4 and groups[0] is not None and len(set(groups)) == 1
    plain = _hlo(fn, (4, 8, 16), (16, 32))
    apply_eager_fusion(plain, batch=False)
    assert all(g is None for g in _matmul_groups(plain))  # without the rule, one GEMM per step


def test_recurrence_stays_one_gemm_per_step() -> None:
    """h_{t+1} = tanh(h_t @ W): each product needs the previous one; batching them would be a cycle."""
    import jax.numpy as jnp

    def rnn(h, w):
        for _ in range(4):
            h = jnp.tanh(h @ w)
        return h

    graph = _hlo(rnn, (8, 16), (16, 16))
    apply_eager_fusion(graph)
    groups = _matmul_groups(graph)
    assert len(groups) == 4
    named = [g for g in groups if g is not None]
    assert len(set(named)) == len(named)  # no group holds two of them


def test_weight_gradient_summed_over_steps_is_one_gemm() -> None:
    """d/dW sum_t f(x_t @ W): the per-step products and their sum are one GEMM (and the forward
    products another); the recurrent cell of an LSTM-like loop keeps its per-step GEMMs."""
    import jax
    import jax.numpy as jnp

    def loss(w, x):
        return sum(jnp.tanh(x[t] @ w).sum() for t in range(4))

    graph = _hlo(jax.grad(loss), (16, 32), (4, 8, 16))
    apply_eager_fusion(graph)
    graph.verify()
    matmuls = [n for n in graph if n.kind == OpKind.MATMUL]
    assert len(matmuls) == 8
    groups = {n.fusion_group for n in matmuls}
    assert None not in groups and len(groups) == 2  # forward batch, weight-gradient batch
    adds = [n for n in graph if n.kind == OpKind.BINARY and n.op_type == "add" and n.fusion_group in groups]
    assert len(adds) == 3  # the sum over four steps rides in the gradient GEMM


@pytest.mark.parametrize("operand", [True, False])
def test_free_transpose_joins_its_matmul_and_no_epilogue_does(operand: bool) -> None:
    """w.T feeding a matmul is cuBLAS's op(B) flag (a view in PyTorch), and a transposed result
    is the swapped-operand GEMM: neither is a copy kernel. The tanh after the matmul is its own
    kernel (no library epilogue in eager mode)."""
    import jax.numpy as jnp

    if operand:
        graph = _hlo(lambda x, w: jnp.tanh(x @ w.T), (8, 16), (32, 16))
    else:
        graph = _hlo(lambda x, w: jnp.tanh(jnp.transpose(x @ w)), (8, 16), (16, 32))
    apply_eager_fusion(graph)
    transpose = next(n for n in graph if n.kind == OpKind.TRANSPOSE)
    dot = next(n for n in graph if n.kind == OpKind.MATMUL)
    assert transpose.fusion_group is not None and transpose.fusion_group == dot.fusion_group
    assert next(n for n in graph if n.op_type == "tanh").fusion_group != dot.fusion_group


@pytest.mark.parametrize("batch", [True, False])
def test_gnmt_training_batches_input_projections(batch: bool) -> None:
    """A 2-layer GNMT training step: with the rules, the input projections of every layer are one
    GEMM per layer and direction, the recurrent h @ W_h products one per step."""
    from compiler_opt.workloads.registry import build_workload

    graph = build_workload("gnmt-2", "train", hidden=32, vocab=64, src_len=4, tgt_len=4, batch=2)
    apply_eager_fusion(graph, batch=batch)
    graph.verify()
    groups = _matmul_groups(graph)
    kernels = len({g for g in groups if g is not None}) + sum(g is None for g in groups)
    if batch:
        assert kernels < 0.5 * len(groups)
    else:
        assert kernels == len(groups)


def test_optimizer_update_runs_op_by_op_unless_fused() -> None:
    """torch.optim's Adam loops over parameters, one kernel per elementwise op; the update nodes
    are marked for the host model. With `fused_optimizer` they fuse like any elementwise chain."""
    import jax.numpy as jnp

    from compiler_opt.workloads._jax import dense, dense_params, lower_hlo, softmax_cross_entropy, spec
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.fusion.eager import OPTIMIZER_META

    params = {"l1": dense_params(16, 32), "l2": dense_params(32, 4)}

    def loss(p, b):
        return softmax_cross_entropy(dense(p["l2"], jnp.tanh(dense(p["l1"], b["x"]))), b["y"]), ()

    def step() -> Graph:
        text = lower_hlo("train", params, loss_fn=loss, predict_fn=lambda p, b: b["x"], optimizer="adam",
                         train_batch={"x": spec(8, 16), "y": spec(8, dtype=jnp.int32)}, inference_batch={"x": spec(8, 16)})
        return import_hlo_text(text)

    graph = step()
    apply_eager_fusion(graph)
    graph.verify()
    marked = [n for n in graph if n.meta.get(OPTIMIZER_META)]
    math = [n for n in marked if n.kind in (OpKind.BINARY, OpKind.UNARY)]
    assert len(math) >= 4 * 10  # four parameters, m/v/update arithmetic each
    per_kernel: dict[object, list[str]] = {}
    for n in math:
        if n.outputs[0].type.shape:  # per-parameter tensors; the step count's scalar math is shared
            per_kernel.setdefault(n.fusion_group if n.fusion_group is not None else id(n), []).append(n.op_type)
    # One torch op per kernel: a lone op, or an add/subtract with up to two products of one
    # operand (add_(g, alpha=), addcmul_, addcdiv_).
    for ops in per_kernel.values():
        if len(ops) > 1:
            assert len(ops) <= 3 and sum(o in ("add", "subtract") for o in ops) == 1
            assert all(o in ("add", "subtract", "multiply", "divide") for o in ops)
    assert 4 * 6 <= len(per_kernel) <= 4 * 9  # Adam: ~7 kernels per parameter, as torch.optim.Adam's 8
    # Scalar broadcasts ride in the op that reads them (torch passes scalars as arguments).
    broadcasts = [n for n in marked if n.kind == OpKind.BROADCAST and n.outputs[0].type.shape]
    assert broadcasts and all(n.fusion_group is not None for n in broadcasts)
    assert not any(n.meta.get(OPTIMIZER_META) for n in graph if n.kind == OpKind.MATMUL)
    fused = step()
    apply_eager_fusion(fused, fused_optimizer=True)
    groups = {n.fusion_group for n in fused if n.meta.get(OPTIMIZER_META) and n.kind in (OpKind.BINARY, OpKind.UNARY)}
    assert len(groups) < len(per_kernel) // 4
