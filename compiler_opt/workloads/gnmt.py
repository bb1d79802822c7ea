"""GNMT-style seq2seq with attention (Wu et al., 2016), unrolled over time.

Encoder: a bidirectional LSTM bottom layer, then `layers - 1` unidirectional LSTMs (residual
connections from the third layer on). Decoder: `layers` LSTMs; the bottom layer's output
queries the encoder outputs with additive (Bahdanau) attention and the context is fed to every
upper layer, as in GNMT. Training: teacher forcing, cross-entropy, Adam (GNMT's optimizer).
Inference: greedy decoding for `tgt_len` steps (each step's argmax is embedded as the next input).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from compiler_opt.workloads._jax import (
    Params, dense, dense_params, lower_hlo, lstm_cell, lstm_params, softmax_cross_entropy, spec,
)

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "param_specs", "encode", "decode_step", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {"layers": 2, "hidden": 256, "vocab": 2000, "src_len": 8, "tgt_len": 8, "batch": 16}
# GNMT: 1024 units, 32k word pieces; sentence lengths ~50 in the placement papers' setting.
PAPER_SIZES: dict[str, Any] = {"hidden": 1024, "vocab": 32000, "src_len": 50, "tgt_len": 50, "batch": 128}


def param_specs(layers: int, hidden: int, vocab: int, **_: Any) -> Params:
    h = hidden
    return {
        "src_embed": spec(vocab, h),
        "tgt_embed": spec(vocab, h),
        "enc_fw": lstm_params(h, h),
        "enc_bw": lstm_params(h, h),
        "enc": [lstm_params(2 * h if i == 0 else h, h) for i in range(layers - 1)],
        "dec": [lstm_params(h if i == 0 else 2 * h, h) for i in range(layers)],
        "att": {"wq": spec(h, h), "wk": spec(h, h), "v": spec(h)},
        "out": dense_params(2 * h, vocab),
    }


def _run_lstm(p: Params, xs: list[jax.Array], hidden: int) -> list[jax.Array]:
    h = c = jnp.zeros((xs[0].shape[0], hidden))
    outs = []
    for x in xs:
        h, c = lstm_cell(p, x, h, c)
        outs.append(h)
    return outs


def encode(params: Params, src: jax.Array) -> jax.Array:
    """Encoder outputs [B, S, H] for source tokens [B, S]."""
    hidden = params["src_embed"].shape[1]
    x = params["src_embed"][src]
    xs = [x[:, t] for t in range(src.shape[1])]
    fw = _run_lstm(params["enc_fw"], xs, hidden)
    bw = _run_lstm(params["enc_bw"], xs[::-1], hidden)[::-1]
    layer_in = [jnp.concatenate([f, b], -1) for f, b in zip(fw, bw)]
    for i, p in enumerate(params["enc"]):
        outs = _run_lstm(p, layer_in, hidden)
        # GNMT adds residual connections from the third encoder layer on.
        layer_in = [o + x for o, x in zip(outs, layer_in)] if i >= 1 else outs
    return jnp.stack(layer_in, axis=1)


def decode_step(
    params: Params, x: jax.Array, states: list[tuple[jax.Array, jax.Array]], enc: jax.Array, enc_keys: jax.Array
) -> tuple[jax.Array, list[tuple[jax.Array, jax.Array]]]:
    """One decoder step: logits [B, V] and the new LSTM states."""
    att = params["att"]
    new_states = [lstm_cell(params["dec"][0], x, *states[0])]
    query = new_states[0][0]
    scores = jnp.tanh(enc_keys + (query @ att["wq"])[:, None, :]) @ att["v"]  # [B, S]
    context = jnp.einsum("bs,bsh->bh", jax.nn.softmax(scores, axis=-1), enc)
    h = query
    for i, p in enumerate(params["dec"][1:], start=1):
        out = lstm_cell(p, jnp.concatenate([h, context], -1), *states[i])
        new_states.append(out)
        h = out[0] + h if i >= 2 else out[0]
    return dense(params["out"], jnp.concatenate([h, context], -1)), new_states


def _initial(params: Params, src: jax.Array) -> tuple[jax.Array, jax.Array, list[tuple[jax.Array, jax.Array]]]:
    enc = encode(params, src)
    zeros = jnp.zeros((src.shape[0], enc.shape[-1]))
    return enc, enc @ params["att"]["wk"], [(zeros, zeros) for _ in params["dec"]]


def _loss(params: Params, batch: Params) -> tuple[jax.Array, Any]:
    enc, keys, states = _initial(params, batch["src"])
    tgt_in = params["tgt_embed"][batch["tgt_in"]]
    logits = []
    for t in range(tgt_in.shape[1]):
        step_logits, states = decode_step(params, tgt_in[:, t], states, enc, keys)
        logits.append(step_logits)
    return softmax_cross_entropy(jnp.stack(logits, 1), batch["tgt_out"]), ()


def _greedy(params: Params, batch: Params, steps: int) -> jax.Array:
    enc, keys, states = _initial(params, batch["src"])
    tokens = batch["start"]
    out = []
    for _ in range(steps):
        logits, states = decode_step(params, params["tgt_embed"][tokens], states, enc, keys)
        tokens = jnp.argmax(logits, -1).astype(jnp.int32)
        out.append(tokens)
    return jnp.stack(out, 1)


def hlo_text(mode: str, *, layers: int, hidden: int, vocab: int, src_len: int, tgt_len: int, batch: int) -> str:
    if layers < 2:
        raise ValueError("GNMT needs at least 2 layers (a bidirectional bottom layer and one more)")
    src = spec(batch, src_len, dtype=jnp.int32)
    tgt = spec(batch, tgt_len, dtype=jnp.int32)
    return lower_hlo(
        mode,
        param_specs(layers, hidden, vocab),
        loss_fn=_loss,
        predict_fn=lambda p, b: _greedy(p, b, tgt_len),
        train_batch={"src": src, "tgt_in": tgt, "tgt_out": tgt},
        inference_batch={"src": src, "start": spec(batch, dtype=jnp.int32)},
        optimizer="adam",
    )
