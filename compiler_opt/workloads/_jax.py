"""Shared JAX pieces for the workload models: shape-only parameters, layers, optimizers, lowering.

Models are pure functions of (params, batch). Parameters and batches are pytrees of
`jax.ShapeDtypeStruct`, so lowering a paper-sized model allocates nothing: only the HLO text is
produced (`jax.jit(step).lower(*specs).as_text(dialect="hlo")`), and `graph_ir` imports it.

A training step is `jax.value_and_grad(loss)` plus an SGD or Adam update of every parameter;
inference is the model's forward function (and, for seq2seq, its greedy decoder).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

__all__ = [
    "Params",
    "spec",
    "lower_hlo",
    "make_train_step",
    "dense",
    "dense_params",
    "layer_norm",
    "layer_norm_params",
    "lstm_cell",
    "lstm_params",
    "softmax_cross_entropy",
    "multi_head_attention",
    "attention_params",
    "conv2d",
    "conv_params",
    "batch_norm",
    "batch_norm_params",
]

Params = dict[str, Any]
LossFn = Callable[[Params, Params], tuple[jax.Array, Any]]

F32 = jnp.float32


def spec(*shape: int, dtype: Any = F32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(int(d) for d in shape), dtype)


# -- lowering ----------------------------------------------------------------------------------
def make_train_step(loss_fn: LossFn, optimizer: str = "sgd", learning_rate: float = 1e-3) -> Callable[..., Any]:
    """(params, opt_state, batch) -> (loss, aux, new_params, new_opt_state).

    `loss_fn(params, batch)` returns (loss, aux); aux carries non-trained outputs (batch-norm
    running statistics, Transformer-XL memory) so they stay live in the lowered graph.
    """
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    b1, b2, eps = 0.9, 0.999, 1e-8

    def step(params: Params, opt_state: Any, batch: Params) -> Any:
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
        if optimizer == "sgd":
            new_params = jax.tree.map(lambda p, g: p - learning_rate * g, params, grads)
            return loss, aux, new_params, opt_state
        m, v, count = opt_state
        count = count + 1
        m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
        # Bias correction as in Kingma & Ba; the step count is a traced scalar.
        scale = learning_rate * jnp.sqrt(1 - b2**count) / (1 - b1**count)
        new_params = jax.tree.map(lambda p, m_, v_: p - scale * m_ / (jnp.sqrt(v_) + eps), params, m, v)
        return loss, aux, new_params, (m, v, count)

    return step


def lower_hlo(
    mode: str,
    params: Params,
    *,
    loss_fn: LossFn,
    predict_fn: Callable[[Params, Params], Any],
    train_batch: Params,
    inference_batch: Params,
    optimizer: str = "sgd",
) -> str:
    """HLO text of the training step (mode 'train') or of the forward pass (mode 'inference')."""
    if mode == "train":
        if optimizer == "adam":
            opt_state: Any = (params, params, spec(dtype=jnp.int32))
        else:
            opt_state = ()
        lowered = jax.jit(make_train_step(loss_fn, optimizer)).lower(params, opt_state, train_batch)
    elif mode == "inference":
        lowered = jax.jit(predict_fn).lower(params, inference_batch)
    else:
        raise ValueError(f"mode must be 'train' or 'inference', got {mode!r}")
    return lowered.as_text(dialect="hlo")


# -- layers ------------------------------------------------------------------------------------
def dense_params(n_in: int, n_out: int, bias: bool = True) -> Params:
    return {"w": spec(n_in, n_out), "b": spec(n_out)} if bias else {"w": spec(n_in, n_out)}


def dense(p: Params, x: jax.Array) -> jax.Array:
    y = x @ p["w"]
    return y + p["b"] if "b" in p else y


def layer_norm_params(dim: int) -> Params:
    return {"scale": spec(dim), "bias": spec(dim)}


def layer_norm(p: Params, x: jax.Array, eps: float = 1e-6) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def lstm_params(n_in: int, hidden: int) -> Params:
    return {"wx": spec(n_in, 4 * hidden), "wh": spec(hidden, 4 * hidden), "b": spec(4 * hidden)}


def lstm_cell(p: Params, x: jax.Array, h: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One LSTM step (input, forget, cell, output gates from one fused matmul pair)."""
    gates = x @ p["wx"] + h @ p["wh"] + p["b"]
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def softmax_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross-entropy of integer labels."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()


def attention_params(dim: int, kv_dim: int | None = None) -> Params:
    kv_dim = dim if kv_dim is None else kv_dim
    return {"q": dense_params(dim, dim), "k": dense_params(kv_dim, dim), "v": dense_params(kv_dim, dim), "o": dense_params(dim, dim)}


def multi_head_attention(
    p: Params, x: jax.Array, context: jax.Array, heads: int, mask: jax.Array | None = None
) -> jax.Array:
    """Scaled dot-product attention of x [B, T, D] over context [B, S, Dk] with `heads` heads."""
    b, t, d = x.shape
    s = context.shape[1]
    q = dense(p["q"], x).reshape(b, t, heads, d // heads)
    k = dense(p["k"], context).reshape(b, s, heads, d // heads)
    v = dense(p["v"], context).reshape(b, s, heads, d // heads)
    scores = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(d // heads).astype(x.dtype)
    if mask is not None:
        scores = jnp.where(mask, scores, -1e9)
    out = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, axis=-1), v)
    return dense(p["o"], out.reshape(b, t, d))


def conv_params(k: int, c_in: int, c_out: int, groups: int = 1) -> Params:
    return {"w": spec(k, k, c_in // groups, c_out)}


def conv2d(p: Params, x: jax.Array, stride: int = 1, groups: int = 1, dilation: int = 1) -> jax.Array:
    """NHWC convolution with SAME padding (HWIO kernel); `groups == C` is a depthwise conv."""
    return lax.conv_general_dilated(
        x, p["w"], (stride, stride), "SAME", rhs_dilation=(dilation, dilation),
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups,
    )


def batch_norm_params(c: int) -> tuple[Params, Params]:
    """(trainable scale/bias, running mean/var state)."""
    return {"scale": spec(c), "bias": spec(c)}, {"mean": spec(c), "var": spec(c)}


def batch_norm(
    p: Params, state: Params, x: jax.Array, train: bool, momentum: float = 0.9, eps: float = 1e-3
) -> tuple[jax.Array, Params]:
    """Batch statistics (and updated running statistics) when training, running statistics otherwise."""
    axes = tuple(range(x.ndim - 1))
    if train:
        mean, var = x.mean(axes), x.var(axes)
        new_state = {
            "mean": momentum * state["mean"] + (1 - momentum) * lax.stop_gradient(mean),
            "var": momentum * state["var"] + (1 - momentum) * lax.stop_gradient(var),
        }
    else:
        mean, var, new_state = state["mean"], state["var"], state
    return (x - mean) * lax.rsqrt(var + eps) * p["scale"] + p["bias"], new_state
