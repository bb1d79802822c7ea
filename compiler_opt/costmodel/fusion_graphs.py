"""Small JAX programs lowered to HLO and imported: the graphs the fusion dataset is drawn from,
each at a few sizes, so a held-out-program split holds out whole program families.

The first five (MLP, conv block, attention, LSTM cell, layer norm + GELU) are the original set;
`_more_programs` adds ten patterns that dominate the workload suite and the HLO testdata
(SwiGLU MLP, GRU cell, RMS norm + projection, softmax cross-entropy, multi-head attention with
reshapes/transposes, batched matmul, conv + batch norm + residual, MLP-Mixer token mixing,
log-softmax + mean, a strided conv stem): `FIRST_PROGRAMS`, the 30 graphs of `fusion_s8`.
`_extra_programs` (tenth session) adds fourteen more op mixes (depthwise + pointwise conv, max
and average pooling, batch norm in training form, group norm, embedding gather, attention in a
transposed layout with softmax over axis 1, a transformer MLP block, dilated and transposed
convs, pads / slices / concatenations, a two-step RNN, reductions over several axes, a
broadcasting chain); `_grouped_programs` (eleventh session) four with grouped, depthwise and
strided convs (a MobileNet-v2 inverted residual, a strided depthwise, a 4-group conv, a depthwise
5x5 with channel multiplier 2); `_second_kind_programs` (twelfth session) a second program of
op classes that one program alone had (a ResNet stem max pool 3x3 stride 2 with a ResNet-D avg
pool shortcut, a U-Net decoder step with crop / concat / pad, a layer norm over two axes with a
log-sum-exp pool, a label-smoothed masked sequence cross-entropy); `_third_kind_programs`
(thirteenth session) four more of the classes still priced from few programs, at sizes where
their data movement runs to MBs (an Inception block: four branches with explicit pads and an avg
pool, concatenated on channels; FiLM conditioning of a feature map: broadcasts over three axes; a
CLIP-style contrastive loss: cross-entropy over the rows and the columns of a logit matrix; a
per-pixel class-weighted segmentation loss); `_fourth_kind_programs` (seventeenth session) eleven
model pieces in neither `fusion_s12c` nor `fusion_s13`, for a pre-registered test of a fixed model
form (a MobileNet-v3 squeeze-excite block, a ConvNeXt block, Swin window attention, T5
relative-position attention scores, RMSNorm + rotary embedding, a softmax mixture-of-experts gate, a
ResNet bottleneck with BN folded, a WaveNet gated dilated conv, a PointNet classifier, a Conformer
conv module, a pre-norm GELU MLP at odd sizes), so that `fusion_graphs((1, 2))` yields 104 graphs;
the twenty-first session ten more (`FIFTH_KIND_PROGRAMS`, for the next pre-registered test: a ViT
patch embedding, decoder cross-attention with a padding mask, two GCN layers, an FPN top-down merge,
DLRM's feature interaction, QK-norm causal attention, a NeRF MLP with positional encoding, a VAE
loss, sub-pixel upsampling, an MLP's flattened gradient), 124 graphs;
`fusion_graph_names(scales, programs=FIRST_PROGRAMS)` keeps the old set reachable."""

from __future__ import annotations

from typing import Any, Callable, Collection

import numpy as np

__all__ = ["EXTRA_PROGRAMS", "FIFTH_KIND_PROGRAMS", "FIRST_PROGRAMS", "FOURTH_KIND_PROGRAMS", "GROUPED_PROGRAMS", "SECOND_KIND_PROGRAMS", "THIRD_KIND_PROGRAMS", "fusion_graph", "fusion_graph_names", "fusion_graphs", "fusion_workload"]

# The fifteen programs of the eighth session's `fusion_s8` (names fixed: datasets refer to them).
FIRST_PROGRAMS = ("swiglu", "gru", "rms_proj", "xent", "mha", "bmm", "conv_bn", "mixer", "log_softmax", "stem",
                  "mlp", "conv", "attention", "lstm", "norm_gelu")
# The tenth session's fourteen (`_extra_programs`).
EXTRA_PROGRAMS = ("dw_sep", "maxpool", "avgpool", "bn_train", "group_norm", "embed", "attn_cols", "tblock", "dilated", "conv_t",
                  "pad_concat", "rnn2", "multi_reduce", "bcast_chain")
# The eleventh session's four (`_grouped_programs`): grouped / depthwise / strided convs, so a
# held-out depthwise program is priced from others of its kind.
GROUPED_PROGRAMS = ("mbv2", "dw_stride", "grouped", "dw_mult")
# The twelfth session's four (`_second_kind_programs`): a second program of each op class that
# only one program had (pooling windows, pads / concatenations, reductions over several axes, a
# cross-entropy), so holding one of them out leaves another of its kind in training.
SECOND_KIND_PROGRAMS = ("stem_pool", "unet_up", "ln_lse", "smooth_xent")
# The thirteenth session's four (`_third_kind_programs`): pads / concatenations and broadcasts that
# move MBs (no program before had a concat over 0.12 MB, and one broadcast chain was 3x the next
# one's broadcast MB), and cross-entropies of other shapes.
THIRD_KIND_PROGRAMS = ("inception", "film", "clip_loss", "seg_xent")
# The seventeenth session's eleven (`_fourth_kind_programs`): model pieces in neither `fusion_s12c` nor
# `fusion_s13`, collected as `fusion_s17` for a pre-registered test of a fixed model form.
FOURTH_KIND_PROGRAMS = ("se_block", "convnext", "swin_attn", "t5_relpos", "rope_rms", "moe_gate", "bottleneck", "wavenet", "pointnet",
                        "conformer_conv", "odd_mlp")
# The twenty-first session's ten (`_fifth_kind_programs`): model pieces in none of the folders above,
# for a pre-registered test of the call growth term (RESULTS (i), twenty-first session).
FIFTH_KIND_PROGRAMS = ("vit_patch", "cross_attn", "gcn", "fpn_merge", "dlrm", "qk_norm_attn", "nerf_mlp", "vae_loss", "pixel_shuffle", "mlp_grad")


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
    } | _extra_programs(arr) | _grouped_programs(arr) | _second_kind_programs(arr) | _third_kind_programs(arr) | _fourth_kind_programs(arr) | _fifth_kind_programs(arr)


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


def _extra_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The tenth session's fourteen: op mixes the first fifteen lack (depthwise and dilated and
    transposed convs, pooling windows, training-form batch / group norm, gathers, pads and
    concatenations, softmax over another axis, reductions over several axes, broadcasting), so a
    held-out program's op classes have been priced on more than a handful of programs."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")

    def dw_sep(x, kd, kp):  # depthwise 3x3 + pointwise 1x1, as in MobileNet blocks
        c = x.shape[-1]
        h = jax.lax.conv_general_dilated(x, kd, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=c)
        h = jnp.minimum(jnp.maximum(h * 0.5 + 0.1, 0.0), 6.0)  # relu6, inline (jnp.clip lowers to an opaque call)
        y = jax.lax.conv_general_dilated(h, kp, (1, 1), "SAME", dimension_numbers=dn)
        return jnp.tanh(jnp.maximum(y, 0.0)) * y + 0.1

    def maxpool(x, k, w):  # conv, max pool 2x2 stride 2 (reduce_window max), global mean, dense
        h = jnp.maximum(jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn), 0.0)
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.mean(h, axis=(1, 2)) @ w

    def avgpool(x, w):  # 3x3 stride 1 average pool (reduce_window add), residual, channel dense
        s = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") * np.float32(1 / 9)
        return jnp.tanh(s - x) @ w

    def bn_train(x, w, gamma, beta):  # dense + batch norm in training form (batch statistics) + relu
        h = x @ w
        mu = jnp.mean(h, axis=0)
        var = jnp.mean((h - mu) ** 2, axis=0)
        return jnp.maximum((h - mu) * jax.lax.rsqrt(var + 1e-5) * gamma + beta, 0.0)

    def group_norm(x, gamma):  # NHWC group norm (4 groups), SiLU
        n, hh, ww, c = x.shape
        g = x.reshape(n, hh, ww, 4, c // 4)
        mu = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
        var = jnp.mean((g - mu) ** 2, axis=(1, 2, 4), keepdims=True)
        y = ((g - mu) * jax.lax.rsqrt(var + 1e-5)).reshape(n, hh, ww, c) * gamma
        return y * jax.nn.sigmoid(y)  # SiLU inline (jax.nn.silu lowers to an opaque call)

    def embed(table, ids, pos, w):  # embedding gather (+ positions), sum over the sequence, dense
        e = jnp.tanh(table[ids] * 2.0 + pos)
        return jax.nn.sigmoid(jnp.sum(e, axis=1) @ w) * 0.5 + 0.1

    def attn_cols(x, wq, wk):  # batched attention laid out (B, D, T): transposes, softmax over axis 1
        q = jnp.einsum("bdt,de->bet", x, wq)
        k = jnp.einsum("bdt,de->bet", x, wk)
        s = jnp.einsum("bes,bet->bst", q, k)
        p = jax.nn.softmax(s, axis=1)
        return jnp.einsum("bds,bst->bdt", x, p) + x

    def tblock(x, g1, w1, w2, g2):  # pre-LN transformer MLP block: LN, dense, GELU(tanh), dense, residual, LN
        def ln(v, g):
            mu = jnp.mean(v, axis=-1, keepdims=True)
            return (v - mu) * jax.lax.rsqrt(jnp.mean((v - mu) ** 2, axis=-1, keepdims=True) + 1e-5) * g
        h = jax.nn.gelu(ln(x, g1) @ w1, approximate=True) @ w2 + x
        return ln(h, g2)

    def dilated(x, k, w):  # 3x3 conv with dilation 2, tanh, mean over space, dense
        h = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=dn)
        return jnp.mean(jnp.tanh(h), axis=(1, 2)) @ w

    def conv_t(x, k, b):  # 2x upsampling transposed conv, bias, relu, a gated output
        h = jnp.maximum(jax.lax.conv_transpose(x, k, (2, 2), "SAME", dimension_numbers=dn) + b, 0.0)
        return h * jax.nn.sigmoid(h - 0.1) + jnp.tanh(h)

    def pad_concat(x, y):  # slices, pads and concatenations around a little arithmetic
        n = x.shape[1]
        a, b = x[:, : n // 2], x[:, n // 2 :]
        zero = np.float32(0.0)  # lax.pad: jnp.pad lowers to an opaque call
        z = jnp.concatenate([jax.lax.pad(a * b, zero, ((0, 0, 0), (1, 1, 0))), jax.lax.pad(a + b, zero, ((0, 0, 0), (2, 0, 0)))], axis=1)
        return jnp.concatenate([z[:, 2:-2] * y, jnp.exp(z[:, :n // 2] - 1.0)], axis=1)

    def rnn2(x1, x2, h, w, u, v):  # an Elman RNN unrolled two steps (no scan), with a readout
        h1 = jnp.tanh(x1 @ w + h @ u)
        h2 = jnp.tanh(x2 @ w + h1 @ u)
        return (h1 + h2) @ v

    def multi_reduce(x):  # reductions over several axes of one 3-d tensor, broadcast back
        s = jnp.sum(x, axis=(0, 2), keepdims=True)
        m = jnp.max(x, axis=1, keepdims=True)
        v = jnp.mean(x * x, axis=(1, 2), keepdims=True)
        return jnp.sum(jnp.exp(x - m) * s / (v + 1.0), axis=2)

    def bcast_chain(x, y, z):  # elementwise chain with broadcasting (N,1,D) x (1,M,D) + (D,), reduced
        t = x[:, None, :] * y[None, :, :] + z
        return jnp.sum(jax.nn.sigmoid(t) * jnp.tanh(t * 0.5 - z), axis=-1)

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(200 + s)

    def ids(r: np.random.Generator, *shape: int, high: int) -> np.ndarray:
        return r.integers(0, high, shape).astype(np.int32)

    return {
        "dw_sep": (dw_sep, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 16), arr(r, 3, 3, 1, 16), arr(r, 1, 1, 16, 16 * s)))(rng(s))),
        "maxpool": (maxpool, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 3, 3, 8, 8 * s), arr(r, 8 * s, 10)))(rng(s))),
        "avgpool": (avgpool, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 16), arr(r, 16, 16 * s)))(rng(s))),
        "bn_train": (bn_train, lambda s: (lambda r: (arr(r, 32 * s, 64 * s), arr(r, 64 * s, 64 * s), arr(r, 64 * s), arr(r, 64 * s)))(rng(s))),
        "group_norm": (group_norm, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 16), arr(r, 16)))(rng(s))),
        "embed": (embed, lambda s: (lambda r: (arr(r, 256 * s, 32 * s), ids(r, 8 * s, 16, high=256 * s), arr(r, 16, 32 * s), arr(r, 32 * s, 32 * s)))(rng(s))),
        "attn_cols": (attn_cols, lambda s: (lambda r: (arr(r, 2, 32 * s, 16 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s)))(rng(s))),
        "tblock": (tblock, lambda s: (lambda r: (arr(r, 16 * s, 32 * s), arr(r, 32 * s), arr(r, 32 * s, 128 * s), arr(r, 128 * s, 32 * s), arr(r, 32 * s)))(rng(s))),
        "dilated": (dilated, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 3, 3, 8, 8 * s), arr(r, 8 * s, 10)))(rng(s))),
        "conv_t": (conv_t, lambda s: (lambda r: (arr(r, 2, 4 * s, 4 * s, 16), arr(r, 3, 3, 16, 8 * s), arr(r, 8 * s)))(rng(s))),
        "pad_concat": (pad_concat, lambda s: (lambda r: (arr(r, 32 * s, 64 * s), arr(r, 32 * s, 64 * s)))(rng(s))),
        "rnn2": (rnn2, lambda s: (lambda r: (arr(r, 8 * s, 32 * s), arr(r, 8 * s, 32 * s), arr(r, 8 * s, 64 * s), arr(r, 32 * s, 64 * s),
                                             arr(r, 64 * s, 64 * s), arr(r, 64 * s, 16)))(rng(s))),
        "multi_reduce": (multi_reduce, lambda s: (lambda r: (arr(r, 8 * s, 16 * s, 32 * s),))(rng(s))),
        "bcast_chain": (bcast_chain, lambda s: (lambda r: (arr(r, 16 * s, 32), arr(r, 24 * s, 32), arr(r, 32)))(rng(s))),
    }


def _grouped_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The eleventh session's four: XLA's CPU runs a grouped convolution (feature_group_count > 1)
    on a far slower path than a dense one of many times its FLOPs, so `dw_sep` alone, held out,
    could not be priced; these give the grouped-conv terms several programs to be fitted on."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")

    def relu6(v):  # inline (jnp.clip lowers to an opaque call)
        return jnp.minimum(jnp.maximum(v, 0.0), 6.0)

    def mbv2(x, ke, kd, kp):  # MobileNet-v2 inverted residual: expand 1x1, depthwise 3x3, project 1x1, residual
        h = relu6(jax.lax.conv_general_dilated(x, ke, (1, 1), "SAME", dimension_numbers=dn))
        h = relu6(jax.lax.conv_general_dilated(h, kd, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=h.shape[-1]))
        return jax.lax.conv_general_dilated(h, kp, (1, 1), "SAME", dimension_numbers=dn) + x

    def dw_stride(x, kd, kp, w):  # depthwise 3x3 stride 2, relu, pointwise 1x1, global mean, dense
        h = jnp.maximum(jax.lax.conv_general_dilated(x, kd, (2, 2), "SAME", dimension_numbers=dn, feature_group_count=x.shape[-1]), 0.0)
        h = jnp.tanh(jax.lax.conv_general_dilated(h, kp, (1, 1), "SAME", dimension_numbers=dn))
        return jnp.mean(h, axis=(1, 2)) @ w

    def grouped(x, k, b, kp):  # 3x3 conv in 4 groups (ResNeXt-style), bias, relu, pointwise 1x1 mixing the groups
        h = jnp.maximum(jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=4) + b, 0.0)
        return jax.nn.sigmoid(jax.lax.conv_general_dilated(h, kp, (1, 1), "SAME", dimension_numbers=dn)) * h

    def dw_mult(x, kd, b):  # depthwise 5x5 with channel multiplier 2 (out = 2 x in channels), bias, gated output
        h = jax.lax.conv_general_dilated(x, kd, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=x.shape[-1]) + b
        return jnp.tanh(h) * jax.nn.sigmoid(h * 0.5)

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(300 + s)

    return {
        "mbv2": (mbv2, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8), arr(r, 1, 1, 8, 32), arr(r, 3, 3, 1, 32), arr(r, 1, 1, 32, 8)))(rng(s))),
        "dw_stride": (dw_stride, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 16), arr(r, 3, 3, 1, 16), arr(r, 1, 1, 16, 16 * s),
                                                       arr(r, 16 * s, 10)))(rng(s))),
        "grouped": (grouped, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 16), arr(r, 3, 3, 4, 16 * s), arr(r, 16 * s),
                                                   arr(r, 1, 1, 16 * s, 16 * s)))(rng(s))),
        "dw_mult": (dw_mult, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 8 * s), arr(r, 5, 5, 1, 16 * s), arr(r, 16 * s)))(rng(s))),
    }


def _second_kind_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The twelfth session's four: held out, `avgpool`, `pad_concat`, `multi_reduce` and `xent`
    left no other program of their op class in training (the per-class weights were fitted on one
    program, or on none); these are other real patterns of the same classes."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")

    def stem_pool(x, scale, shift, w):  # ResNet stem after its conv: BN (inference) + relu, max pool 3x3 stride 2
        # SAME, then a ResNet-D shortcut: avg pool 2x2 stride 2, channel projection, plus a squashed channel mean
        h = jnp.maximum(x * scale + shift, 0.0)
        p = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        a = jax.lax.reduce_window(p, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * np.float32(0.25)
        s = jnp.einsum("nhwc,cd->nhwd", a, w)
        return jnp.maximum(s, 0.0) + jnp.tanh(jnp.mean(a, axis=-1, keepdims=True)) * 0.5

    def unet_up(x, skip, k, b):  # U-Net decoder step: 2x nearest upsampling, the encoder's skip centre-cropped
        # and concatenated, explicit zero pad then a 3x3 VALID conv, bias, gated relu
        n, hh, ww, c = x.shape
        up = jnp.broadcast_to(x[:, :, None, :, None, :], (n, hh, 2, ww, 2, c)).reshape(n, 2 * hh, 2 * ww, c)
        z = jnp.concatenate([up, skip[:, 2:-2, 2:-2, :] * 0.5], axis=-1)
        z = jax.lax.pad(z, np.float32(0.0), ((0, 0, 0), (1, 1, 0), (1, 1, 0), (0, 0, 0)))  # lax.pad: jnp.pad lowers to an opaque call
        h = jax.lax.conv_general_dilated(z, k, (1, 1), "VALID", dimension_numbers=dn) + b
        return jnp.maximum(h, 0.0) * jax.nn.sigmoid(h)

    def ln_lse(x, g, beta):  # layer norm over the last two axes (T, D) of (B, T, D), then a log-sum-exp
        # pool over T (a smooth max over the sequence), centred over D
        mu = jnp.mean(x, axis=(1, 2), keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=(1, 2), keepdims=True)
        y = (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + beta
        m = jnp.max(y, axis=1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(y - m), axis=1)) + m[:, 0]
        return lse - jnp.mean(lse, axis=-1, keepdims=True)

    def smooth_xent(h, w, labels, mask):  # sequence LM loss: (B, T, D) x (D, V) logits, log-softmax over V,
        # label smoothing 0.1, masked mean over batch and time
        logits = jnp.einsum("btd,dv->btv", h, w)
        m = jnp.max(logits, axis=-1, keepdims=True)
        logp = logits - m - jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True))
        nll = -jnp.sum(logp * labels, axis=-1) * 0.9 - jnp.mean(logp, axis=-1) * 0.1
        return jnp.sum(nll * mask) / (jnp.sum(mask) + 1.0)

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(400 + s)

    def onehot(r: np.random.Generator, *shape: int, k: int) -> np.ndarray:
        return np.eye(k, dtype=np.float32)[r.integers(0, k, shape)]

    return {
        "stem_pool": (stem_pool, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 16), arr(r, 16), arr(r, 16), arr(r, 16, 16 * s)))(rng(s))),
        "unet_up": (unet_up, lambda s: (lambda r: (arr(r, 2, 4 * s, 4 * s, 16), arr(r, 2, 8 * s + 4, 8 * s + 4, 8), arr(r, 3, 3, 24, 8 * s),
                                                   arr(r, 8 * s)))(rng(s))),
        "ln_lse": (ln_lse, lambda s: (lambda r: (arr(r, 4, 16 * s, 32 * s), arr(r, 16 * s, 32 * s), arr(r, 32 * s)))(rng(s))),
        "smooth_xent": (smooth_xent, lambda s: (lambda r: (arr(r, 2, 8 * s, 32 * s), arr(r, 32 * s, 48 * s), onehot(r, 2, 8 * s, k=48 * s),
                                                           (r.random((2, 8 * s)) < 0.8).astype(np.float32)))(rng(s))),
    }


def _third_kind_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The thirteenth session's four: the fit still gave pads / concatenations weight 0 (the two
    programs with them move < 0.12 MB through them), priced the one broadcast chain at 2-3x the
    broadcast / elementwise MB of any other program by extrapolation, and had two cross-entropies
    (both a softmax over the last axis of a matmul); these are real patterns of those classes at
    sizes where the data movement runs to MBs."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")
    zero = np.float32(0.0)

    def relu(v):
        return jnp.maximum(v, 0.0)

    def conv(x, k, pad=0):  # an explicit zero pad (lax.pad: jnp.pad lowers to an opaque call), then a VALID conv
        if pad:
            x = jax.lax.pad(x, zero, ((0, 0, 0), (pad, pad, 0), (pad, pad, 0), (0, 0, 0)))
        return jax.lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=dn)

    def inception(x, k1, k3r, k3, k5r, k5a, k5b, kp, scale, shift):  # an Inception block: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3
        # (the 5x5 branch factorised as in Inception-v3); 3x3 average pool (zeros counted) -> 1x1; concatenated on
        # channels, BN (inference scale / shift) + relu
        b1 = relu(conv(x, k1))
        b3 = relu(conv(relu(conv(x, k3r)), k3, pad=1))
        b5 = relu(conv(relu(conv(relu(conv(x, k5r)), k5a, pad=1)), k5b, pad=1))
        xp = jax.lax.pad(x, zero, ((0, 0, 0), (1, 1, 0), (1, 1, 0), (0, 0, 0)))
        bp = relu(conv(jax.lax.reduce_window(xp, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "VALID") * np.float32(1 / 9), kp))
        return relu(jnp.concatenate([b1, b3, b5, bp], axis=-1) * scale + shift)

    def film(h, cond, wg, wb, pos):  # FiLM conditioning of an NHWC map: per-sample, per-channel scale and shift from a
        # conditioning vector, a per-position bias, SiLU, a squeeze-excite-like gate of the spatial mean, residual
        g = (cond @ wg)[:, None, None, :]
        b = (cond @ wb)[:, None, None, :]
        y = h * (1.0 + g) + b + pos[None, :, :, None]
        y = y * jax.nn.sigmoid(y)  # SiLU inline (jax.nn.silu lowers to an opaque call)
        return y * jax.nn.sigmoid(jnp.mean(y, axis=(1, 2), keepdims=True)) + h

    def clip_loss(a, b, wa, wb):  # CLIP-style symmetric contrastive loss: projected, L2-normalised embeddings, an (N, N)
        # logit matrix at temperature 1/10, cross-entropy over its rows and over its columns, the diagonal the target
        za, zb = a @ wa, b @ wb
        za = za * jax.lax.rsqrt(jnp.sum(za * za, axis=1, keepdims=True) + 1e-6)
        zb = zb * jax.lax.rsqrt(jnp.sum(zb * zb, axis=1, keepdims=True) + 1e-6)
        logits = (za @ zb.T) * np.float32(10.0)
        diag = jnp.sum(za * zb, axis=1) * np.float32(10.0)
        mr = jnp.max(logits, axis=1, keepdims=True)
        lse_rows = jnp.log(jnp.sum(jnp.exp(logits - mr), axis=1)) + mr[:, 0]
        mc = jnp.max(logits, axis=0, keepdims=True)
        lse_cols = jnp.log(jnp.sum(jnp.exp(logits - mc), axis=0)) + mc[0]
        return jnp.mean(lse_rows - diag) * 0.5 + jnp.mean(lse_cols - diag) * 0.5

    def seg_xent(feat, w, b, labels, class_weight):  # per-pixel segmentation loss: a 1x1 classifier (einsum) over an NHWC
        # map, log-softmax over K classes, class-weighted NLL, weighted mean over pixels
        logits = jnp.einsum("nhwc,ck->nhwk", feat, w) + b
        m = jnp.max(logits, axis=-1, keepdims=True)
        logp = logits - m - jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True))
        pixel_weight = jnp.sum(labels * class_weight, axis=-1)
        return -jnp.sum(jnp.sum(logp * labels, axis=-1) * pixel_weight) / jnp.sum(pixel_weight)

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(500 + s)

    def onehot(r: np.random.Generator, *shape: int, k: int) -> np.ndarray:
        return np.eye(k, dtype=np.float32)[r.integers(0, k, shape)]

    return {
        "inception": (inception, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 16), arr(r, 1, 1, 16, 16), arr(r, 1, 1, 16, 8), arr(r, 3, 3, 8, 16),
                                                       arr(r, 1, 1, 16, 4), arr(r, 3, 3, 4, 8), arr(r, 3, 3, 8, 8), arr(r, 1, 1, 16, 8),
                                                       arr(r, 48), arr(r, 48)))(rng(s))),
        "film": (film, lambda s: (lambda r: (arr(r, 4, 16 * s, 16 * s, 16), arr(r, 4, 32), arr(r, 32, 16), arr(r, 32, 16), arr(r, 16 * s, 16 * s)))(rng(s))),
        "clip_loss": (clip_loss, lambda s: (lambda r: (arr(r, 32 * s, 48 * s), arr(r, 32 * s, 32 * s), arr(r, 48 * s, 32 * s), arr(r, 32 * s, 32 * s)))(rng(s))),
        "seg_xent": (seg_xent, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 16), arr(r, 16, 12), arr(r, 12), onehot(r, 2, 16 * s, 16 * s, k=12),
                                                     np.abs(arr(r, 12)) + 0.5))(rng(s))),
    }


def _fourth_kind_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The seventeenth session's eleven (`FOURTH_KIND_PROGRAMS`): real model pieces in neither
    `fusion_s12c` nor `fusion_s13`, written for a pre-registered test of an already fixed model form
    (RESULTS (i), "Seventeenth session, fusion (a pre-registered test on new programs)"): chosen from
    a list of common blocks, not by which existing graphs any term helps."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")
    dn1 = ("NWC", "WIO", "NWC")
    zero = np.float32(0.0)

    def gelu(v):  # tanh approximation, inline (jax.nn.gelu may lower to an opaque call)
        return 0.5 * v * (1.0 + jnp.tanh(np.float32(0.79788456) * (v + np.float32(0.044715) * v * v * v)))

    def layer_norm(v, g, b, axis=-1):
        mu = jnp.mean(v, axis=axis, keepdims=True)
        var = jnp.mean((v - mu) ** 2, axis=axis, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    def sigmoid(v):
        return jax.nn.sigmoid(v)

    def se_block(x, we, wr, br, wx, bx, wp):  # MobileNet-v3 bottleneck with squeeze-excite: 1x1 expand, hard-swish,
        # squeeze (spatial mean) -> FC -> relu -> FC -> hard-sigmoid, channel rescale, 1x1 project, residual
        h = jnp.einsum("nhwc,cd->nhwd", x, we)
        h = h * jnp.minimum(jnp.maximum(h + 3.0, 0.0), 6.0) * np.float32(1 / 6)
        s = jnp.maximum(jnp.mean(h, axis=(1, 2)) @ wr + br, 0.0)
        gate = jnp.minimum(jnp.maximum((s @ wx + bx) * np.float32(1 / 6) + 0.5, 0.0), 1.0)
        return jnp.einsum("nhwd,dc->nhwc", h * gate[:, None, None, :], wp) + x

    def convnext(x, kd, bd, g, b, w1, b1, w2, gamma):  # ConvNeXt block: depthwise 7x7, layer norm over channels,
        # 4x MLP with GELU, layer scale, residual
        c = x.shape[-1]
        h = jax.lax.conv_general_dilated(x, kd, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=c) + bd
        h = layer_norm(h, g, b)
        h = gelu(jnp.einsum("nhwc,cd->nhwd", h, w1) + b1)
        return x + gamma * jnp.einsum("nhwd,dc->nhwc", h, w2)

    def swin_attn(x, wqkv, bias, wo):  # Swin window attention: 4x4 windows partitioned (reshape / transpose), two
        # heads, scores + a relative position bias per head, softmax, windows merged back, output projection
        n, hh, ww, c = x.shape
        win, heads = 4, 2
        t = x.reshape(n, hh // win, win, ww // win, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(-1, win * win, c)
        qkv = (t @ wqkv).reshape(t.shape[0], win * win, 3, heads, c // heads).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = jnp.einsum("whqd,whkd->whqk", q, k) * np.float32(1.0 / np.sqrt(c // heads)) + bias[None]
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        p = p / jnp.sum(p, axis=-1, keepdims=True)
        o = jnp.einsum("whqk,whkd->whqd", p, v).transpose(0, 2, 1, 3).reshape(-1, win * win, c) @ wo
        return o.reshape(n, hh // win, ww // win, win, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, hh, ww, c) + x

    def t5_relpos(x, wq, wk, table, buckets):  # T5 attention scores: per-head q k^T plus a relative-position bias
        # gathered from a (buckets, heads) table by precomputed log-spaced buckets, softmax (no scaling, as T5)
        b, t, d = x.shape
        heads = table.shape[1]
        q = (x @ wq).reshape(b, t, heads, d // heads)
        k = (x @ wk).reshape(b, t, heads, d // heads)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) + jnp.transpose(table[buckets], (2, 0, 1))[None]
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        return p / jnp.sum(p, axis=-1, keepdims=True)

    def rope_rms(x, g, wq, wk, cos, sin):  # RMSNorm, q / k projections, rotary embedding (halves rotated by
        # position: slices, products, concatenation), causal-free scores
        h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
        half = wq.shape[1] // 2

        def rotate(v):
            a, c = v[..., :half], v[..., half:]
            return jnp.concatenate([a * cos - c * sin, c * cos + a * sin], axis=-1)

        q, k = rotate(h @ wq), rotate(h @ wk)
        return jnp.einsum("btd,bsd->bts", q, k) * np.float32(1.0 / np.sqrt(2 * half))

    def moe_gate(x, wg, we, wo):  # a dense (top-k-free) mixture of experts: softmax gate over E experts, every
        # expert's relu MLP layer (one einsum), outputs mixed by the gate, output projection
        logits = x @ wg
        p = jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True))
        p = p / jnp.sum(p, axis=-1, keepdims=True)
        h = jnp.maximum(jnp.einsum("nd,edf->nef", x, we), 0.0)
        return jnp.sum(h * p[:, :, None], axis=1) @ wo

    def bottleneck(x, k1, b1, k2, b2, k3, b3):  # ResNet bottleneck, batch norm folded into the convs' biases:
        # 1x1 reduce, 3x3, 1x1 expand, residual, relu
        h = jnp.maximum(jax.lax.conv_general_dilated(x, k1, (1, 1), "VALID", dimension_numbers=dn) + b1, 0.0)
        h = jnp.maximum(jax.lax.conv_general_dilated(h, k2, (1, 1), "SAME", dimension_numbers=dn) + b2, 0.0)
        return jnp.maximum(jax.lax.conv_general_dilated(h, k3, (1, 1), "VALID", dimension_numbers=dn) + b3 + x, 0.0)

    def wavenet(x, kd, bd, kr, ks):  # WaveNet residual layer: causal (left-padded) dilated conv, kernel 2, dilation 4,
        # tanh x sigmoid gate, 1x1 residual and skip convs
        c = x.shape[-1]
        xp = jax.lax.pad(x, zero, ((0, 0, 0), (4, 0, 0), (0, 0, 0)))
        h = jax.lax.conv_general_dilated(xp, kd, (1,), "VALID", rhs_dilation=(4,), dimension_numbers=dn1) + bd
        z = jnp.tanh(h[..., :c]) * sigmoid(h[..., c:])
        res = jax.lax.conv_general_dilated(z, kr, (1,), "VALID", dimension_numbers=dn1) + x
        skip = jax.lax.conv_general_dilated(z, ks, (1,), "VALID", dimension_numbers=dn1)
        return res + jnp.maximum(skip, 0.0)

    def pointnet(pts, w1, b1, w2, b2, w3, b3, wc):  # PointNet classifier: shared per-point MLP (3 -> 16 -> 32 -> 64),
        # symmetric max pool over the points, classifier, log-softmax
        h = jnp.maximum(pts @ w1 + b1, 0.0)
        h = jnp.maximum(h @ w2 + b2, 0.0)
        h = jnp.maximum(h @ w3 + b3, 0.0)
        logits = jnp.max(h, axis=1) @ wc
        m = jnp.max(logits, axis=-1, keepdims=True)
        return logits - m - jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True))

    def conformer_conv(x, g, b, w1, kd, scale, shift, w2):  # Conformer convolution module: layer norm, pointwise
        # conv to 2D, GLU, depthwise 1-D conv (kernel 7), batch norm (inference), swish, pointwise conv, residual
        d = x.shape[-1]
        h = layer_norm(x, g, b) @ w1
        h = h[..., :d] * sigmoid(h[..., d:])
        h = jax.lax.conv_general_dilated(h, kd, (1,), "SAME", dimension_numbers=dn1, feature_group_count=d)
        h = h * scale + shift
        h = h * sigmoid(h)
        return x + h @ w2

    def odd_mlp(x, g, b, w1, b1, w2, b2):  # pre-norm transformer MLP at odd sizes: layer norm, GELU MLP, residual
        return x + gelu(layer_norm(x, g, b) @ w1 + b1) @ w2 + b2

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(600 + s)

    def t5_buckets(t: int, num_buckets: int = 16, max_distance: int = 64) -> np.ndarray:  # T5's bidirectional buckets
        rel = np.arange(t)[None, :] - np.arange(t)[:, None]
        half = num_buckets // 2
        out = (rel > 0).astype(np.int32) * half
        n = np.abs(rel)
        exact = half // 2
        large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (half - exact)).astype(np.int32)
        return (out + np.where(n < exact, n, np.minimum(large, half - 1))).astype(np.int32)

    def rope(t: int, half: int) -> tuple[np.ndarray, np.ndarray]:
        angle = np.arange(t, dtype=np.float32)[:, None] * (10000.0 ** (-np.arange(half, dtype=np.float32) / half))[None, :]
        return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)

    def ones(r: np.random.Generator, *shape: int) -> np.ndarray:
        return (1.0 + arr(r, *shape)).astype(np.float32)

    return {
        "se_block": (se_block, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 16), arr(r, 16, 32 * s), arr(r, 32 * s, 8), arr(r, 8),
                                                     arr(r, 8, 32 * s), arr(r, 32 * s), arr(r, 32 * s, 16)))(rng(s))),
        "convnext": (convnext, lambda s: (lambda r: (arr(r, 2, 4 * s + 4, 4 * s + 4, 8 * s), arr(r, 7, 7, 1, 8 * s), arr(r, 8 * s), ones(r, 8 * s),
                                                     arr(r, 8 * s), arr(r, 8 * s, 32 * s), arr(r, 32 * s), arr(r, 32 * s, 8 * s),
                                                     arr(r, 8 * s)))(rng(s))),
        "swin_attn": (swin_attn, lambda s: (lambda r: (arr(r, 2, 8 * s, 8, 16 * s), arr(r, 16 * s, 48 * s), arr(r, 2, 16, 16),
                                                       arr(r, 16 * s, 16 * s)))(rng(s))),
        "t5_relpos": (t5_relpos, lambda s: (lambda r: (arr(r, 2, 16 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 16, 4),
                                                       t5_buckets(16 * s)))(rng(s))),
        "rope_rms": (rope_rms, lambda s: (lambda r: (arr(r, 2, 16 * s, 32 * s), ones(r, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s),
                                                     *rope(16 * s, 16 * s)))(rng(s))),
        "moe_gate": (moe_gate, lambda s: (lambda r: (arr(r, 16 * s, 32 * s), arr(r, 32 * s, 4), arr(r, 4, 32 * s, 48 * s),
                                                     arr(r, 48 * s, 32 * s)))(rng(s))),
        "bottleneck": (bottleneck, lambda s: (lambda r: (arr(r, 2, 8 * s, 8 * s, 32), arr(r, 1, 1, 32, 8 * s), arr(r, 8 * s), arr(r, 3, 3, 8 * s, 8 * s),
                                                         arr(r, 8 * s), arr(r, 1, 1, 8 * s, 32), arr(r, 32)))(rng(s))),
        "wavenet": (wavenet, lambda s: (lambda r: (arr(r, 2, 32 * s, 16 * s), arr(r, 2, 16 * s, 32 * s), arr(r, 32 * s), arr(r, 1, 16 * s, 16 * s),
                                                   arr(r, 1, 16 * s, 16 * s)))(rng(s))),
        "pointnet": (pointnet, lambda s: (lambda r: (arr(r, 4, 64 * s, 3) * 10.0, arr(r, 3, 16), arr(r, 16), arr(r, 16, 32), arr(r, 32),
                                                     arr(r, 32, 64 * s), arr(r, 64 * s), arr(r, 64 * s, 10)))(rng(s))),
        "conformer_conv": (conformer_conv, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s), ones(r, 16 * s), arr(r, 16 * s), arr(r, 16 * s, 32 * s),
                                                                 arr(r, 7, 1, 16 * s), ones(r, 16 * s), arr(r, 16 * s),
                                                                 arr(r, 16 * s, 16 * s)))(rng(s))),
        "odd_mlp": (odd_mlp, lambda s: (lambda r: (arr(r, 3, 11 * s, 45), ones(r, 45), arr(r, 45), arr(r, 45, 97 * s), arr(r, 97 * s),
                                                   arr(r, 97 * s, 45), arr(r, 45)))(rng(s))),
    }


def _fifth_kind_programs(arr: Callable[..., np.ndarray]) -> dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]]:
    """The twenty-first session's ten (`FIFTH_KIND_PROGRAMS`): real model pieces in none of the
    earlier folders, written for a pre-registered test of an already fixed model form (RESULTS (i),
    "Twenty-first session, fusion"): chosen from a list of common blocks before any label of them
    existed, not by which graphs a term helps."""
    import jax
    import jax.numpy as jnp

    dn = ("NHWC", "HWIO", "NHWC")

    def softmax(s, axis=-1):
        p = jnp.exp(s - jnp.max(s, axis=axis, keepdims=True))
        return p / jnp.sum(p, axis=axis, keepdims=True)

    def layer_norm(v, g, b):
        mu = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mu) ** 2, axis=-1, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    def vit_patch(img, kp, bp, cls, pos, g, b):  # ViT input: 4x4 patches by a strided conv, tokens flattened, a class
        # token prepended, position embedding added, layer norm
        h = jax.lax.conv_general_dilated(img, kp, (4, 4), "VALID", dimension_numbers=dn) + bp
        n, _, _, d = h.shape
        tokens = h.reshape(n, -1, d)
        tokens = jnp.concatenate([jnp.broadcast_to(cls, (n, 1, d)), tokens], axis=1) + pos
        return layer_norm(tokens, g, b)

    def cross_attn(x, mem, mask, wq, wk, wv, wo):  # decoder cross-attention: queries from x, keys / values from an
        # encoder memory with padded positions masked (additive), two heads, output projection, residual
        b, t, d = x.shape
        heads = 2
        q = (x @ wq).reshape(b, t, heads, d // heads)
        k = (mem @ wk).reshape(b, -1, heads, d // heads)
        v = (mem @ wv).reshape(b, -1, heads, d // heads)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(1.0 / np.sqrt(d // heads)) + mask[:, None, None, :]
        o = jnp.einsum("bhqk,bkhd->bqhd", softmax(s), v).reshape(b, t, d)
        return x + o @ wo

    def gcn(adj, x, w1, w2):  # two graph-convolution layers (Kipf & Welling): the symmetric normalisation of
        # A + I computed in the graph, relu, log-softmax over classes
        a = adj + jnp.eye(adj.shape[0], dtype=adj.dtype)
        dinv = jax.lax.rsqrt(jnp.sum(a, axis=1))
        ahat = dinv[:, None] * a * dinv[None, :]
        h = jnp.maximum(ahat @ (x @ w1), 0.0)
        logits = ahat @ (h @ w2)
        m = jnp.max(logits, axis=-1, keepdims=True)
        return logits - m - jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True))

    def fpn_merge(small, big, kl, bl, kc, bc):  # FPN top-down step: the coarse map upsampled 2x (nearest, by
        # broadcast and reshape), a 1x1 lateral conv of the fine map added, a 3x3 smoothing conv, relu
        n, h, w, c = small.shape
        up = jnp.broadcast_to(small[:, :, None, :, None, :], (n, h, 2, w, 2, c)).reshape(n, 2 * h, 2 * w, c)
        merged = up + jax.lax.conv_general_dilated(big, kl, (1, 1), "VALID", dimension_numbers=dn) + bl
        return jnp.maximum(jax.lax.conv_general_dilated(merged, kc, (1, 1), "SAME", dimension_numbers=dn) + bc, 0.0)

    def dlrm(dense, table, idx, wb, bb, tri, wt1, bt1, wt2):  # DLRM: bottom MLP of the dense features, embeddings
        # gathered from a table, pairwise dot products of all feature vectors, the upper triangle kept (a
        # gather of precomputed flat indices), concatenated with the bottom output, top MLP, sigmoid
        bottom = jnp.maximum(dense @ wb + bb, 0.0)
        feats = jnp.concatenate([bottom[:, None, :], table[idx]], axis=1)
        z = jnp.einsum("bfd,bgd->bfg", feats, feats).reshape(dense.shape[0], -1)[:, tri]
        h = jnp.maximum(jnp.concatenate([bottom, z], axis=1) @ wt1 + bt1, 0.0)
        return jax.nn.sigmoid(h @ wt2)

    def qk_norm_attn(x, wq, wk, wv, gq, gk, causal):  # attention with QK-norm (RMS norm of each head's queries and
        # keys, learned gains), causal mask (additive), four heads
        b, t, d = x.shape
        heads = 4

        def heads_of(v):
            return v.reshape(b, t, heads, d // heads)

        def rms(v, g):
            return v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + 1e-6) * g

        q, k, v = rms(heads_of(x @ wq), gq), rms(heads_of(x @ wk), gk), heads_of(x @ wv)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(1.0 / np.sqrt(d // heads)) + causal
        return jnp.einsum("bhqk,bkhd->bqhd", softmax(s), v).reshape(b, t, d)

    def nerf_mlp(pts, w1, b1, w2, b2, w3, b3):  # NeRF: positional encoding (sin / cos at 6 octaves, concatenated
        # with the input), MLP with the encoding concatenated again at the second layer, sigmoid colour + relu density
        freqs = np.float32(2.0) ** np.arange(6, dtype=np.float32)
        ang = (pts[:, :, None] * freqs).reshape(pts.shape[0], -1)
        enc = jnp.concatenate([pts, jnp.sin(ang), jnp.cos(ang)], axis=1)
        h = jnp.maximum(enc @ w1 + b1, 0.0)
        h = jnp.maximum(jnp.concatenate([h, enc], axis=1) @ w2 + b2, 0.0)
        out = h @ w3 + b3
        return jnp.concatenate([jax.nn.sigmoid(out[:, :3]), jnp.maximum(out[:, 3:], 0.0)], axis=1)

    def vae_loss(x, eps, we, be, wmu, wlv, wd, bd):  # VAE step: encoder, mean / log-variance heads, the
        # reparameterised sample, decoder, squared reconstruction error + the Gaussian KL term (a scalar loss)
        h = jnp.maximum(x @ we + be, 0.0)
        mu, lv = h @ wmu, h @ wlv
        z = mu + jnp.exp(0.5 * lv) * eps
        recon = jax.nn.sigmoid(z @ wd + bd)
        kl = -0.5 * jnp.sum(1.0 + lv - mu * mu - jnp.exp(lv), axis=1)
        return jnp.mean(jnp.sum((recon - x) ** 2, axis=1) + kl)

    def pixel_shuffle(x, k, b):  # sub-pixel upsampling (ESPCN): 3x3 conv to 4x the channels, depth-to-space by
        # reshape / transpose / reshape, relu
        h = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn) + b
        n, hh, ww, c4 = h.shape
        c = c4 // 4
        h = h.reshape(n, hh, ww, 2, 2, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, 2 * hh, 2 * ww, c)
        return jnp.maximum(h, 0.0)

    def mlp_grad(x, y, w1, b1, w2):  # a training step's backward pass: the gradient of a tanh MLP's squared error
        # with respect to its three parameters, flattened into one bucket (as a data-parallel all-reduce sends it)
        def loss(w1, b1, w2):
            return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 - y) ** 2)

        grads = jax.grad(loss, argnums=(0, 1, 2))(w1, b1, w2)
        return jnp.concatenate([g.reshape(-1) for g in grads])

    def rng(s: int) -> np.random.Generator:
        return np.random.default_rng(700 + s)

    def ones(r: np.random.Generator, *shape: int) -> np.ndarray:
        return (1.0 + arr(r, *shape)).astype(np.float32)

    def padding_mask(r: np.random.Generator, b: int, t: int) -> np.ndarray:  # -1e9 past each row's random length
        lengths = r.integers(t // 2, t + 1, size=b)
        return np.where(np.arange(t)[None, :] < lengths[:, None], 0.0, -1e9).astype(np.float32)

    def adjacency(r: np.random.Generator, n: int) -> np.ndarray:  # a random symmetric 0/1 graph, ~4 edges a node
        a = (r.random((n, n)) < 4.0 / n).astype(np.float32)
        return np.triu(a, 1) + np.triu(a, 1).T

    def causal(t: int) -> np.ndarray:
        return np.triu(np.full((t, t), -1e9, dtype=np.float32), 1)

    def upper(f: int) -> np.ndarray:  # flat indices of the strict upper triangle of an f x f matrix
        i, j = np.triu_indices(f, 1)
        return (i * f + j).astype(np.int32)

    return {
        "vit_patch": (vit_patch, lambda s: (lambda r: (arr(r, 2, 16 * s, 16 * s, 3), arr(r, 4, 4, 3, 16 * s), arr(r, 16 * s), arr(r, 1, 1, 16 * s),
                                                       arr(r, 1, 1 + 16 * s * s, 16 * s), ones(r, 16 * s), arr(r, 16 * s)))(rng(s))),
        "cross_attn": (cross_attn, lambda s: (lambda r: (arr(r, 2, 8 * s, 32), arr(r, 2, 16 * s, 32), padding_mask(r, 2, 16 * s), arr(r, 32, 32),
                                                         arr(r, 32, 32), arr(r, 32, 32), arr(r, 32, 32)))(rng(s))),
        "gcn": (gcn, lambda s: (lambda r: (adjacency(r, 32 * s), arr(r, 32 * s, 16), arr(r, 16, 32), arr(r, 32, 8)))(rng(s))),
        "fpn_merge": (fpn_merge, lambda s: (lambda r: (arr(r, 2, 4 * s, 4 * s, 16), arr(r, 2, 8 * s, 8 * s, 8), arr(r, 1, 1, 8, 16), arr(r, 16),
                                                       arr(r, 3, 3, 16, 16), arr(r, 16)))(rng(s))),
        "dlrm": (dlrm, lambda s: (lambda r: (arr(r, 16 * s, 13), arr(r, 64, 16), r.integers(0, 64, size=(16 * s, 4)).astype(np.int32), arr(r, 13, 16),
                                             arr(r, 16), upper(5), arr(r, 26, 32 * s), arr(r, 32 * s), arr(r, 32 * s, 1)))(rng(s))),
        "qk_norm_attn": (qk_norm_attn, lambda s: (lambda r: (arr(r, 2, 16 * s, 32 * s), arr(r, 32 * s, 32 * s), arr(r, 32 * s, 32 * s),
                                                             arr(r, 32 * s, 32 * s), ones(r, 8 * s), ones(r, 8 * s), causal(16 * s)))(rng(s))),
        "nerf_mlp": (nerf_mlp, lambda s: (lambda r: (arr(r, 64 * s, 3) * 10.0, arr(r, 39, 32 * s), arr(r, 32 * s), arr(r, 32 * s + 39, 32 * s),
                                                     arr(r, 32 * s), arr(r, 32 * s, 4), arr(r, 4)))(rng(s))),
        "vae_loss": (vae_loss, lambda s: (lambda r: (np.abs(arr(r, 16 * s, 64)) * 5.0, arr(r, 16 * s, 8) * 10.0, arr(r, 64, 32 * s), arr(r, 32 * s),
                                                     arr(r, 32 * s, 8), arr(r, 32 * s, 8), arr(r, 8, 64), arr(r, 64)))(rng(s))),
        "pixel_shuffle": (pixel_shuffle, lambda s: (lambda r: (arr(r, 2, 4 * s + 4, 4 * s + 4, 8), arr(r, 3, 3, 8, 32), arr(r, 32)))(rng(s))),
        "mlp_grad": (mlp_grad, lambda s: (lambda r: (arr(r, 16 * s, 32), arr(r, 16 * s, 8), arr(r, 32, 32 * s), arr(r, 32 * s),
                                                     arr(r, 32 * s, 8)))(rng(s))),
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


def fusion_graph_names(scales: tuple[int, ...] = (1, 2, 4), programs: Collection[str] | None = None) -> list[str]:
    """The names `fusion_graphs(scales)` yields, in its order, without building any graph (only
    those of `programs`, e.g. `FIRST_PROGRAMS`, when given)."""
    return [f"{name}@{scale}" for name in _programs() if programs is None or name in programs for scale in scales]


def fusion_workload(name: str) -> Any:
    """One program at one scale ('embed@2') as a `Workload`: the imported graph with the JAX
    function and the arguments it was lowered with (to check a fusion's outputs against JAX)."""
    from cost_model.profiling.calibration import hlo_workload

    program, scale = name.rsplit("@", 1)
    programs = _programs()
    if program not in programs:
        raise KeyError(f"no fusion program named {name!r}; known: {fusion_graph_names((int(scale),))}")
    fn, make_args = programs[program]
    return hlo_workload(name, fn, *make_args(int(scale)))


def fusion_graph(name: str) -> Any:
    """One graph by name ('mlp@2'): a picklable builder for a collection that measures every
    graph in a fresh process."""
    scale = int(name.rsplit("@", 1)[1])
    graphs = fusion_graphs((scale,), names={name})
    if name not in graphs:
        raise KeyError(f"no fusion program named {name!r}; known: {fusion_graph_names((scale,))}")
    return graphs[name]
