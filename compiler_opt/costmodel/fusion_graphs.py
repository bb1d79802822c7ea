"""Small JAX programs lowered to HLO and imported: the graphs the fusion dataset is drawn from
(an MLP, a conv block, attention, an LSTM cell, layer norm + GELU), each at a few sizes, so a
held-out-program split holds out whole program families."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["fusion_graphs"]


def _programs() -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    import jax
    import jax.numpy as jnp

    def arr(rng: np.random.Generator, *shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * 0.1

    def mlp(x, w1, b1, w2):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        return jnp.sum(jax.nn.sigmoid(jnp.tanh(h) * 1.5 + h) @ w2, axis=1)

    def conv(x, k, w):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn)
        h = jnp.maximum(h * 0.5 + 0.1, 0.0)
        return jnp.mean(h, axis=(1, 2)) @ w

    def attention(x, wq, wk, wv):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = (q @ k.T) * np.float32(1.0 / np.sqrt(q.shape[1]))
        p = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
        return (p / jnp.sum(p, axis=1, keepdims=True)) @ v + x

    def lstm(x, h, c, wx, wh):
        z = x @ wx + h @ wh
        n = h.shape[1]
        i, f, g, o = (z[:, j * n : (j + 1) * n] for j in range(4))
        c2 = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jax.nn.sigmoid(o) * jnp.tanh(c2) + c2

    def norm_gelu(x, w):
        mu = jnp.mean(x, axis=1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=1, keepdims=True)
        h = (x - mu) / jnp.sqrt(var + 1e-5) @ w
        return 0.5 * h * (1 + jnp.tanh(0.79788456 * (h + 0.044715 * h ** 3)))

    return {
        "mlp": (mlp, lambda s: (lambda r: (arr(r, 8 * s, 64 * s), arr(r, 64 * s, 64 * s), arr(r, 64 * s), arr(r, 64 * s, 32)))(np.random.default_rng(s))),
        "conv": (conv, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 3, 3, 8, 8 * s), arr(r, 8 * s, 10)))(np.random.default_rng(s))),
        "attention": (attention, lambda s: (lambda r: (arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s)))(np.random.default_rng(s))),
        "lstm": (lstm, lambda s: (lambda r: (arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), arr(r, 32 * s, 128 * s), arr(r, 32 * s, 128 * s)))(np.random.default_rng(s))),
        "norm_gelu": (norm_gelu, lambda s: (lambda r: (arr(r, 16 * s, 64 * s), arr(r, 64 * s, 64 * s)))(np.random.default_rng(s))),
    }


def fusion_graphs(scales: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    """name ('mlp@2') -> Graph imported from the program's unoptimized HLO."""
    from cost_model.profiling.calibration import hlo_workload

    graphs = {}
    for name, (fn, make_args) in _programs().items():
        for scale in scales:
            graphs[f"{name}@{scale}"] = hlo_workload(f"{name}@{scale}", fn, *make_args(scale)).graph
    return graphs
