"""WaveNet (van den Oord et al., 2016): stacks of dilated causal 1-D convolutions, NWC.

Input: mu-law sample ids [B, T] (256 classes), embedded by a causal kernel-2 conv. Each of the
`layers` residual layers (split evenly into `stacks`, dilations 1, 2, 4, ... 2^(layers/stacks-1)
within a stack) does a dilated causal conv to 2 x residual channels, the gated activation
tanh(f) * sigmoid(g), a 1x1 conv back to the residual stream and a 1x1 skip conv. The summed
skips go through ReLU-1x1-ReLU-1x1 to 256-way logits. Training: next-sample cross-entropy, Adam.
The placement papers use a 2-stack 18-layer and a 4-stack 36-layer network.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from compiler_opt.workloads._jax import Params, lower_hlo, softmax_cross_entropy, spec

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "param_specs", "forward", "causal_conv", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {
    "stacks": 2, "layers": 18, "residual_channels": 64, "skip_channels": 256, "classes": 256, "length": 4096, "batch": 4,
}
PAPER_SIZES: dict[str, Any] = {"residual_channels": 64, "skip_channels": 512, "length": 16000, "batch": 16}


def param_specs(layers: int, residual_channels: int, skip_channels: int, classes: int, **_: Any) -> Params:
    r, s = residual_channels, skip_channels
    layer = {"dilated": spec(2, r, 2 * r), "bias": spec(2 * r), "res": spec(1, r, r), "skip": spec(1, r, s)}
    return {
        "input": spec(2, classes, r),
        "layers": [layer] * layers,
        "post1": spec(1, s, s),
        "post2": spec(1, s, classes),
    }


def causal_conv(x: jax.Array, w: jax.Array, dilation: int = 1) -> jax.Array:
    """[B, T, C] * [K, C, C'] -> [B, T, C'], output t sees inputs t - (K-1) * dilation .. t only."""
    pad = (w.shape[0] - 1) * dilation
    return lax.conv_general_dilated(
        x, w, (1,), [(pad, 0)], rhs_dilation=(dilation,), dimension_numbers=("NWC", "WIO", "NWC")
    )


def forward(params: Params, samples: jax.Array, stacks: int) -> jax.Array:
    """Logits [B, T, classes] predicting sample t+1 from samples <= t."""
    classes = params["input"].shape[1]
    per_stack = len(params["layers"]) // stacks
    x = causal_conv(jax.nn.one_hot(samples, classes), params["input"])
    skips = 0.0
    for index, p in enumerate(params["layers"]):
        h = causal_conv(x, p["dilated"], 2 ** (index % per_stack)) + p["bias"]
        filt, gate = jnp.split(h, 2, -1)
        z = jnp.tanh(filt) * jax.nn.sigmoid(gate)
        x = x + causal_conv(z, p["res"])
        skips = skips + causal_conv(z, p["skip"])
    out = causal_conv(jax.nn.relu(skips), params["post1"])
    return causal_conv(jax.nn.relu(out), params["post2"])


def hlo_text(
    mode: str, *, stacks: int, layers: int, residual_channels: int, skip_channels: int, classes: int, length: int, batch: int
) -> str:
    if stacks < 1 or layers % stacks:
        raise ValueError(f"layers ({layers}) must split evenly into stacks ({stacks})")

    def loss(p: Params, b: Params) -> tuple[jax.Array, Any]:
        return softmax_cross_entropy(forward(p, b["samples"], stacks), b["targets"]), ()

    def predict(p: Params, b: Params) -> jax.Array:
        return jax.nn.log_softmax(forward(p, b["samples"], stacks), -1)

    samples = spec(batch, length, dtype=jnp.int32)
    return lower_hlo(
        mode, param_specs(layers, residual_channels, skip_channels, classes),
        loss_fn=loss, predict_fn=predict,
        train_batch={"samples": samples, "targets": samples}, inference_batch={"samples": samples},
        optimizer="adam",
    )
