"""Small JAX programs lowered to HLO and imported: the graphs the fusion dataset is drawn from,
each at a few sizes, so a held-out-program split holds out whole program families.

The first five (MLP, conv block, attention, LSTM cell, layer norm + GELU) are the original set;
`_more_programs` adds ten patterns that dominate the workload suite and the HLO testdata
(SwiGLU MLP, GRU cell, RMS norm + projection, softmax cross-entropy, multi-head attention with
reshapes/transposes, batched matmul, conv + batch norm + residual, MLP-Mixer token mixing,
log-softmax + mean, a strided conv stem), so that `fusion_graphs((1, 2))` yields 30 graphs."""

from __future__ import annotations

from typing import Any, Callable, Collection

import numpy as np

__all__ = ["fusion_graph", "fusion_graph_names", "fusion_graphs"]


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

    return _more_programs(arr) | {
        "mlp": (mlp, lambda s: (lambda r: (arr(r, 8 * s, 64 * s), arr(r, 64 * s, 64 * s), arr(r, 64 * s), arr(r, 64 * s, 32)))(np.random.default_rng(s))),
        "conv": (conv, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 3, 3, 8, 8 * s), arr(r, 8 * s, 10)))(np.random.default_rng(s))),
        "attention": (attention, lambda s: (lambda r: (arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s)))(np.random.default_rng(s))),
        "lstm": (lstm, lambda s: (lambda r: (arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), arr(r, 32 * s, 128 * s), arr(r, 32 * s, 128 * s)))(np.random.default_rng(s))),
        "norm_gelu": (norm_gelu, lambda s: (lambda r: (arr(r, 16 * s, 64 * s), arr(r, 64 * s, 64 * s)))(np.random.default_rng(s))),
    }


def _more_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    import jax
    import jax.numpy as jnp

    def swiglu(x, w1, w2, w3):
        return (jax.nn.silu(x @ w1) * (x @ w2)) @ w3 + x

    def gru(x, h, wz, uz, wr, ur, wn, un):
        z = jax.nn.sigmoid(x @ wz + h @ uz)
        r = jax.nn.sigmoid(x @ wr + h @ ur)
        n = jnp.tanh(x @ wn + (r * h) @ un)
        return (1.0 - z) * n + z * h

    def rms_proj(x, g, w):
        y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
        return y @ w

    def xent(x, w, labels):
        logits = x @ w
        m = jnp.max(logits, axis=1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=1)) + m[:, 0]
        return jnp.mean(lse - jnp.sum(logits * labels, axis=1))

    def mha(x, wqkv, wo):
        t, d = x.shape
        heads = 4
        qkv = (x @ wqkv).reshape(t, 3, heads, d // heads).transpose(1, 2, 0, 3)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = jnp.einsum("htd,hsd->hts", q, k) * np.float32(1.0 / np.sqrt(d // heads))
        p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("hts,hsd->htd", p, v).transpose(1, 0, 2).reshape(t, d)
        return o @ wo + x

    def bmm(a, b, c):
        s = jnp.einsum("bij,bjk->bik", a, b) * 0.5 + 0.1
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        return jnp.tanh(p / jnp.sum(p, axis=-1, keepdims=True)) @ c

    def conv_bn(x, k, scale, shift):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn)
        return jnp.maximum(h * scale + shift, 0.0) + x

    def mixer(x, w_tok, w_ch):
        y = (x.T @ w_tok).T + x
        return jax.nn.gelu(y @ w_ch, approximate=True)

    def log_softmax_mean(x, w):
        y = x @ w
        return jnp.mean(jax.nn.log_softmax(y, axis=1), axis=0)

    def stem(x, k, w):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.lax.conv_general_dilated(x, k, (2, 2), "SAME", dimension_numbers=dn)
        h = jnp.maximum(h, 0.0)
        return jnp.sum(h, axis=(1, 2)) @ w

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(100 + s)

    def onehot(r: np.random.Generator, n: int, k: int) -> np.ndarray:
        return np.eye(k, dtype=np.float32)[r.integers(0, k, n)]

    return {
        "swiglu": (swiglu, lambda s: (lambda r: (arr(r, 8 * s, 32 * s), arr(r, 32 * s, 64 * s), arr(r, 32 * s, 64 * s), arr(r, 64 * s, 32 * s)))(rng(s))),
        "gru": (gru, lambda s: (lambda r: (arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), *(arr(r, 32 * s, 32 * s) for _ in range(6))))(rng(s))),
        "rms_proj": (rms_proj, lambda s: (lambda r: (arr(r, 16 * s, 64 * s), arr(r, 64 * s), arr(r, 64 * s, 64 * s)))(rng(s))),
        "xent": (xent, lambda s: (lambda r: (arr(r, 16 * s, 32 * s), arr(r, 32 * s, 20 * s), onehot(r, 16 * s, 20 * s)))(rng(s))),
        "mha": (mha, lambda s: (lambda r: (arr(r, 16 * s, 32 * s), arr(r, 32 * s, 96 * s), arr(r, 32 * s, 32 * s)))(rng(s))),
        "bmm": (bmm, lambda s: (lambda r: (arr(r, 4, 8 * s, 16 * s), arr(r, 4, 16 * s, 16 * s), arr(r, 16 * s, 8)))(rng(s))),
        "conv_bn": (conv_bn, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 3, 3, 8, 8), arr(r, 8), arr(r, 8)))(rng(s))),
        "mixer": (mixer, lambda s: (lambda r: (arr(r, 16 * s, 24 * s), arr(r, 16 * s, 16 * s), arr(r, 24 * s, 24 * s)))(rng(s))),
        "log_softmax": (log_softmax_mean, lambda s: (lambda r: (arr(r, 16 * s, 48 * s), arr(r, 48 * s, 40 * s)))(rng(s))),
        "stem": (stem, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 3), arr(r, 3, 3, 3, 8 * s), arr(r, 8 * s, 10)))(rng(s))),
    }


def fusion_graphs(scales: tuple[int, ...] = (1, 2, 4), names: Collection[str] | None = None) -> dict[str, Any]:
    """name ('mlp@2') -> Graph imported from the program's unoptimized HLO (only `names`, when given)."""
    from cost_model.profiling.calibration import hlo_workload

    graphs = {}
    for name, (fn, make_args) in _programs().items():
        for scale in scales:
            key = f"{name}@{scale}"
            if names is None or key in names:
                graphs[key] = hlo_workload(key, fn, *make_args(scale)).graph
    return graphs


def fusion_graph_names(scales: tuple[int, ...] = (1, 2, 4)) -> list[str]:
    """The names `fusion_graphs(scales)` yields, in its order, without building any graph."""
    return [f"{name}@{scale}" for name in _programs() for scale in scales]


def fusion_graph(name: str) -> Any:
    """One graph by name ('mlp@2'): a picklable builder for a collection that measures every
    graph in a fresh process."""
    scale = int(name.rsplit("@", 1)[1])
    graphs = fusion_graphs((scale,), names={name})
    if name not in graphs:
        raise KeyError(f"no fusion program named {name!r}; known: {fusion_graph_names((scale,))}")
    return graphs[name]
