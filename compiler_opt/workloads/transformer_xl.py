"""Transformer-XL-style decoder (Dai et al., 2019): segment-level recurrence with memory.

Each layer attends over [memory of the previous segment ; current segment] with relative
positional attention (content term with bias u, position term with bias v over sinusoidal
relative encodings, the "relative shift"), a causal mask, then a position-wise feed-forward
block; post-layer-norm residuals as in the paper. The memory enters as an input and the next
segment's memory (each layer's input, last `mem_len` positions, no gradient) is an output.
Training: next-token cross-entropy, Adam. Inference: log-probabilities and the new memory.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from compiler_opt.workloads._jax import (
    Params, dense, dense_params, layer_norm, layer_norm_params, lower_hlo, softmax_cross_entropy, spec,
)

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "param_specs", "forward", "rel_shift", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {
    "layers": 4, "d_model": 256, "heads": 4, "d_ff": 1024, "seg_len": 64, "mem_len": 64, "vocab": 2000, "batch": 8,
}
# The WikiText-103 base model: 16 layers, 410 hidden, 10 heads, 2100 inner, 150/150 segment/memory.
PAPER_SIZES: dict[str, Any] = {
    "layers": 16, "d_model": 410, "heads": 10, "d_ff": 2100, "seg_len": 150, "mem_len": 150, "vocab": 32000, "batch": 60,
}


def param_specs(layers: int, d_model: int, heads: int, d_ff: int, vocab: int, **_: Any) -> Params:
    dh = d_model // heads
    layer = {
        "qkv": dense_params(d_model, 3 * d_model, bias=False),
        "r": dense_params(d_model, d_model, bias=False),
        "u": spec(heads, dh),
        "v": spec(heads, dh),
        "o": dense_params(d_model, d_model, bias=False),
        "ln1": layer_norm_params(d_model),
        "ff1": dense_params(d_model, d_ff),
        "ff2": dense_params(d_ff, d_model),
        "ln2": layer_norm_params(d_model),
    }
    return {"embed": spec(vocab, d_model), "layers": [layer] * layers, "out": dense_params(d_model, vocab)}


def rel_shift(x: jax.Array) -> jax.Array:
    """Shift row i of [.., T, K] left by T-1-i, so column j holds relative distance i+M-j."""
    *lead, t, k = x.shape
    padded = jnp.pad(x, [(0, 0)] * len(lead) + [(0, 0), (1, 0)])
    return padded.reshape(*lead, k + 1, t)[..., 1:, :].reshape(*lead, t, k)


def _positions(length: int, d_model: int) -> jax.Array:
    """Sinusoidal encodings of the relative distances length-1 .. 0."""
    pos = jnp.arange(length - 1, -1, -1.0)
    inv_freq = 1.0 / (10000 ** (jnp.arange(0, d_model, 2.0) / d_model))
    angles = pos[:, None] * inv_freq[None, :]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], -1)


def _layer(p: Params, h: jax.Array, mem: jax.Array, pos: jax.Array, heads: int) -> jax.Array:
    b, t, d = h.shape
    m = mem.shape[1]
    dh = d // heads
    cat = jnp.concatenate([lax.stop_gradient(mem), h], 1)
    q, k, v = jnp.split(dense(p["qkv"], cat), 3, -1)
    q = q[:, m:].reshape(b, t, heads, dh)
    k = k.reshape(b, m + t, heads, dh)
    v = v.reshape(b, m + t, heads, dh)
    r = dense(p["r"], pos).reshape(m + t, heads, dh)
    content = jnp.einsum("bthd,bshd->bhts", q + p["u"], k)
    position = rel_shift(jnp.einsum("bthd,shd->bhts", q + p["v"], r))
    causal = jnp.arange(m + t)[None, :] <= jnp.arange(t)[:, None] + m
    scores = jnp.where(causal, (content + position) / jnp.sqrt(dh), -1e9)
    att = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, -1), v).reshape(b, t, d)
    h = layer_norm(p["ln1"], h + dense(p["o"], att))
    return layer_norm(p["ln2"], h + dense(p["ff2"], jax.nn.relu(dense(p["ff1"], h))))


def forward(params: Params, tokens: jax.Array, mems: jax.Array, heads: int) -> tuple[jax.Array, jax.Array]:
    """Logits [B, T, V] and the next memory [L, B, M, D] for tokens [B, T] and memory [L, B, M, D]."""
    mem_len, d_model = mems.shape[2], mems.shape[3]
    h = params["embed"][tokens] * jnp.sqrt(d_model)
    pos = _positions(mem_len + tokens.shape[1], d_model)
    new_mems = []
    for p, mem in zip(params["layers"], mems):
        new_mems.append(lax.stop_gradient(jnp.concatenate([mem, h], 1)[:, -mem_len:]))
        h = _layer(p, h, mem, pos, heads)
    return dense(params["out"], h), jnp.stack(new_mems)


def hlo_text(
    mode: str, *, layers: int, d_model: int, heads: int, d_ff: int, seg_len: int, mem_len: int, vocab: int, batch: int
) -> str:
    # Heads need not be of even width (the base model has 10 heads of 41); the sinusoidal
    # position encodings, sin and cos halves concatenated, need an even d_model.
    if d_model % heads:
        raise ValueError(f"d_model {d_model} must split into {heads} heads of equal width")
    if d_model % 2:
        raise ValueError(f"d_model {d_model} must be even (sinusoidal position encodings)")

    def loss(params: Params, batch_: Params) -> tuple[jax.Array, Any]:
        logits, new_mems = forward(params, batch_["tokens"], batch_["mems"], heads)
        return softmax_cross_entropy(logits, batch_["targets"]), new_mems

    def predict(params: Params, batch_: Params) -> Any:
        logits, new_mems = forward(params, batch_["tokens"], batch_["mems"], heads)
        return jax.nn.log_softmax(logits, -1), new_mems

    tokens = spec(batch, seg_len, dtype=jnp.int32)
    mems = spec(layers, batch, mem_len, d_model)
    return lower_hlo(
        mode,
        param_specs(layers, d_model, heads, d_ff, vocab),
        loss_fn=loss,
        predict_fn=predict,
        train_batch={"tokens": tokens, "targets": tokens, "mems": mems},
        inference_batch={"tokens": tokens, "mems": mems},
        optimizer="adam",
    )
