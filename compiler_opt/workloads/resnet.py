"""ResNet-50 (He et al., 2016; the v1.5 variant with the stride on the 3x3 conv), NHWC.

Stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool), bottleneck stages of (3, 4, 6, 3) blocks (depth 101:
(3, 4, 23, 3); 152: (3, 8, 36, 3)) with widths 64..512 and 4x expansion, global average pool,
a dense classifier. Batch norm uses batch statistics and updates its running statistics when
training (they are an input and an output of the step); inference uses the running statistics.
Training: softmax cross-entropy, SGD.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from compiler_opt.workloads._jax import (
    Params, batch_norm, batch_norm_params, conv2d, conv_params, dense, dense_params, lower_hlo, softmax_cross_entropy, spec,
)

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "STAGES", "specs", "forward", "hlo_text"]

DEFAULT_SIZES: dict[str, Any] = {"depth": 50, "batch": 32, "image_size": 224, "classes": 1000}
PAPER_SIZES: dict[str, Any] = {"depth": 50, "batch": 64, "image_size": 224, "classes": 1000}
STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _conv_bn(k: int, c_in: int, c_out: int) -> tuple[Params, Params]:
    bn, bn_state = batch_norm_params(c_out)
    return {"conv": conv_params(k, c_in, c_out), "bn": bn}, {"bn": bn_state}


def specs(depth: int, classes: int, **_: Any) -> tuple[Params, Params]:
    """(trainable parameters, batch-norm running statistics)."""
    if depth not in STAGES:
        raise ValueError(f"depth must be one of {sorted(STAGES)}, got {depth}")
    params: Params = {"blocks": []}
    state: Params = {"blocks": []}
    params["stem"], state["stem"] = _conv_bn(7, 3, 64)
    c_in = 64
    for stage, count in enumerate(STAGES[depth]):
        width = 64 * 2**stage
        for index in range(count):
            p: Params = {}
            s: Params = {}
            for name, (k, a, b) in {"a": (1, c_in, width), "b": (3, width, width), "c": (1, width, 4 * width)}.items():
                p[name], s[name] = _conv_bn(k, a, b)
            if index == 0:
                p["proj"], s["proj"] = _conv_bn(1, c_in, 4 * width)
            params["blocks"].append(p)
            state["blocks"].append(s)
            c_in = 4 * width
    params["fc"] = dense_params(c_in, classes)
    return params, state


def _apply(p: Params, s: Params, x: jax.Array, train: bool, stride: int = 1) -> tuple[jax.Array, Params]:
    y, bn_state = batch_norm(p["bn"], s["bn"], conv2d(p["conv"], x, stride), train)
    return y, {"bn": bn_state}


def forward(params: Params, state: Params, images: jax.Array, train: bool, depth: int) -> tuple[jax.Array, Params]:
    new_state: Params = {"blocks": []}
    x, new_state["stem"] = _apply(params["stem"], state["stem"], images, train, stride=2)
    x = lax.reduce_window(jax.nn.relu(x), -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    strides = [2 if stage > 0 and index == 0 else 1 for stage, n in enumerate(STAGES[depth]) for index in range(n)]
    for p, s, stride in zip(params["blocks"], state["blocks"], strides):
        ns: Params = {}
        y, ns["a"] = _apply(p["a"], s["a"], x, train)
        y, ns["b"] = _apply(p["b"], s["b"], jax.nn.relu(y), train, stride)
        y, ns["c"] = _apply(p["c"], s["c"], jax.nn.relu(y), train)
        if "proj" in p:
            x, ns["proj"] = _apply(p["proj"], s["proj"], x, train, stride)
        x = jax.nn.relu(x + y)
        new_state["blocks"].append(ns)
    return dense(params["fc"], x.mean((1, 2))), new_state


def hlo_text(mode: str, *, depth: int, batch: int, image_size: int, classes: int) -> str:
    params, state = specs(depth, classes)

    def loss(p: Params, b: Params) -> tuple[jax.Array, Any]:
        logits, new_state = forward(p, b["state"], b["images"], True, depth)
        return softmax_cross_entropy(logits, b["labels"]), new_state

    def predict(p: Params, b: Params) -> jax.Array:
        return jax.nn.softmax(forward(p, b["state"], b["images"], False, depth)[0], -1)

    images = spec(batch, image_size, image_size, 3)
    return lower_hlo(
        mode, params, loss_fn=loss, predict_fn=predict,
        train_batch={"images": images, "labels": spec(batch, dtype=jnp.int32), "state": state},
        inference_batch={"images": images, "state": state},
    )
