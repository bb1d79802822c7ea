"""BERT-base (Devlin et al., 2019): a post-layer-norm Transformer encoder with the pretraining heads.

Embeddings (word + position + segment, layer norm), `layers` encoder blocks (self-attention
with a padding mask, GELU feed-forward, residual + layer norm after each), then the
pretraining heads: masked-LM (dense-GELU-LN, output tied to the word embedding, over the
`masked` gathered positions) and next-sentence prediction (tanh pooler on [CLS]).
Training: MLM + NSP cross-entropy, Adam. Inference: the pooled NSP logits and sequence output.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from compiler_opt.workloads._jax import (
    Params, attention_params, dense, dense_params, layer_norm, layer_norm_params, lower_hlo, multi_head_attention,
    softmax_cross_entropy, spec,
)

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "param_specs", "encode", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {
    "layers": 12, "hidden": 768, "heads": 12, "d_ff": 3072, "vocab": 30522, "seq_len": 128, "masked": 20, "batch": 8,
}
PAPER_SIZES: dict[str, Any] = {"seq_len": 512, "masked": 76, "batch": 32}


def param_specs(layers: int, hidden: int, d_ff: int, vocab: int, seq_len: int, **_: Any) -> Params:
    block = {
        "att": attention_params(hidden),
        "ln1": layer_norm_params(hidden),
        "ff1": dense_params(hidden, d_ff),
        "ff2": dense_params(d_ff, hidden),
        "ln2": layer_norm_params(hidden),
    }
    return {
        "word": spec(vocab, hidden),
        "position": spec(seq_len, hidden),
        "segment": spec(2, hidden),
        "ln": layer_norm_params(hidden),
        "blocks": [block] * layers,
        "mlm": {"dense": dense_params(hidden, hidden), "ln": layer_norm_params(hidden), "bias": spec(vocab)},
        "pooler": dense_params(hidden, hidden),
        "nsp": dense_params(hidden, 2),
    }


def encode(params: Params, tokens: jax.Array, segments: jax.Array, mask: jax.Array, heads: int) -> jax.Array:
    """Sequence output [B, T, H]; `mask` [B, T] is 1 for real tokens."""
    x = params["word"][tokens] + params["position"][None, : tokens.shape[1]] + params["segment"][segments]
    x = layer_norm(params["ln"], x, eps=1e-12)
    attend = (mask[:, None, None, :] > 0)  # [B, 1, 1, T]: broadcast over heads and queries
    for p in params["blocks"]:
        x = layer_norm(p["ln1"], x + multi_head_attention(p["att"], x, x, heads, attend), eps=1e-12)
        x = layer_norm(p["ln2"], x + dense(p["ff2"], jax.nn.gelu(dense(p["ff1"], x))), eps=1e-12)
    return x


def _nsp_logits(params: Params, seq: jax.Array) -> jax.Array:
    return dense(params["nsp"], jnp.tanh(dense(params["pooler"], seq[:, 0])))


def hlo_text(
    mode: str, *, layers: int, hidden: int, heads: int, d_ff: int, vocab: int, seq_len: int, masked: int, batch: int
) -> str:
    if hidden % heads:
        raise ValueError(f"hidden {hidden} must be divisible by heads {heads}")

    def loss(p: Params, b: Params) -> tuple[jax.Array, Any]:
        seq = encode(p, b["tokens"], b["segments"], b["mask"], heads)
        picked = jnp.take_along_axis(seq, b["mlm_positions"][..., None], axis=1)  # [B, P, H]
        h = layer_norm(p["mlm"]["ln"], jax.nn.gelu(dense(p["mlm"]["dense"], picked)), eps=1e-12)
        mlm_logits = h @ p["word"].T + p["mlm"]["bias"]
        return softmax_cross_entropy(mlm_logits, b["mlm_labels"]) + softmax_cross_entropy(_nsp_logits(p, seq), b["nsp_labels"]), ()

    def predict(p: Params, b: Params) -> Any:
        seq = encode(p, b["tokens"], b["segments"], b["mask"], heads)
        return jax.nn.softmax(_nsp_logits(p, seq), -1), seq

    ids = spec(batch, seq_len, dtype=jnp.int32)
    inputs = {"tokens": ids, "segments": ids, "mask": ids}
    positions = spec(batch, masked, dtype=jnp.int32)
    return lower_hlo(
        mode, param_specs(layers, hidden, d_ff, vocab, seq_len),
        loss_fn=loss, predict_fn=predict,
        train_batch={**inputs, "mlm_positions": positions, "mlm_labels": positions, "nsp_labels": spec(batch, dtype=jnp.int32)},
        inference_batch=inputs, optimizer="adam",
    )
