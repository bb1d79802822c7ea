"""RNNLM: a word-level LSTM language model (Zaremba et al., 2014; the RNNLM of the placement papers).

Embedding -> `layers` stacked LSTMs unrolled over `steps` time steps (a Python loop, so every
step is its own ops in the graph, as in the TF graphs the placement papers used) -> a softmax
over the vocabulary at every step. Training: mean cross-entropy of the next word, SGD.
Inference: the forward pass returning per-step log-probabilities.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from compiler_opt.workloads._jax import Params, dense, dense_params, lower_hlo, lstm_cell, lstm_params, softmax_cross_entropy, spec

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "param_specs", "forward", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {"layers": 2, "hidden": 256, "vocab": 2000, "steps": 8, "batch": 16}
# Zaremba's "large" model and the HDP/GO setting: 2048 units, 40 unrolled steps.
PAPER_SIZES: dict[str, Any] = {"hidden": 2048, "vocab": 10000, "steps": 40, "batch": 64}


def param_specs(layers: int, hidden: int, vocab: int, **_: Any) -> Params:
    return {
        "embed": spec(vocab, hidden),
        "lstm": [lstm_params(hidden, hidden) for _ in range(layers)],
        "out": dense_params(hidden, vocab),
    }


def forward(params: Params, tokens: jax.Array) -> jax.Array:
    """Logits [B, T, V] for tokens [B, T]."""
    batch, steps = tokens.shape
    hidden = params["embed"].shape[1]
    x = params["embed"][tokens]
    states = [(jnp.zeros((batch, hidden)), jnp.zeros((batch, hidden))) for _ in params["lstm"]]
    outputs = []
    for t in range(steps):
        h = x[:, t]
        for layer, p in enumerate(params["lstm"]):
            states[layer] = lstm_cell(p, h, *states[layer])
            h = states[layer][0]
        outputs.append(dense(params["out"], h))
    return jnp.stack(outputs, axis=1)


def _loss(params: Params, batch: Params) -> tuple[jax.Array, Any]:
    return softmax_cross_entropy(forward(params, batch["tokens"]), batch["targets"]), ()


def _predict(params: Params, batch: Params) -> jax.Array:
    return jax.nn.log_softmax(forward(params, batch["tokens"]), axis=-1)


def hlo_text(mode: str, *, layers: int, hidden: int, vocab: int, steps: int, batch: int) -> str:
    tokens = spec(batch, steps, dtype=jnp.int32)
    return lower_hlo(
        mode,
        param_specs(layers, hidden, vocab),
        loss_fn=_loss,
        predict_fn=_predict,
        train_batch={"tokens": tokens, "targets": tokens},
        inference_batch={"tokens": tokens},
    )
