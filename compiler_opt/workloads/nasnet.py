"""NASNet-A / AmoebaNet-A style cell network (Zoph et al., 2018; Real et al., 2019), CIFAR layout, NHWC.

A 3x3 stem, then `cells_per_stage` normal cells, a reduction cell, N normal, a reduction, N
normal (filters double at each reduction), global pooling and a classifier. Cells follow the
published genotypes (as written down in DARTS' genotypes.py): each cell preprocesses its two
inputs (the outputs of the previous two cells) with ReLU-1x1 conv-BN (a factorized reduce when
the earlier one is larger), builds 5 blocks that each sum two ops (separable convs applied
twice, 3x3 pools, identity, 1x7-7x1 convs) on earlier states, and concatenates the unused ones.
Training: cross-entropy, SGD, batch statistics (running statistics updated as step outputs);
inference uses the running statistics.

Parameters are created on first use while tracing (`_Scope`), so the cell wiring is written once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from compiler_opt.workloads._jax import Params, lower_hlo, softmax_cross_entropy, spec

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "GENOTYPES", "RANDOM_OPS", "hlo_text", "random_genotype", "resolve_genotype"]

DEFAULT_SIZES: dict[str, Any] = {
    "genotype": "nasnet", "cells_per_stage": 1, "filters": 32, "image_size": 32, "classes": 10, "batch": 32,
}
# NASNet-A 6@768 on CIFAR-10 (768 = 24 x 32 filters at the last stage).
PAPER_SIZES: dict[str, Any] = {"cells_per_stage": 6, "filters": 32, "batch": 32}

# (op, input state) pairs, two per block; then the states concatenated at the end.
GENOTYPES: dict[str, dict[str, Any]] = {
    "nasnet": {
        "normal": [("sep5", 1), ("sep3", 0), ("sep5", 0), ("sep3", 0), ("avg3", 1), ("skip", 0),
                   ("avg3", 0), ("avg3", 0), ("sep3", 1), ("skip", 1)],
        "normal_concat": [2, 3, 4, 5, 6],
        "reduce": [("sep5", 1), ("sep7", 0), ("max3", 1), ("sep7", 0), ("avg3", 1), ("sep5", 0),
                   ("skip", 3), ("avg3", 2), ("sep3", 2), ("max3", 1)],
        "reduce_concat": [4, 5, 6],
    },
    "amoebanet": {
        "normal": [("avg3", 0), ("max3", 1), ("sep3", 0), ("sep5", 2), ("sep3", 0), ("avg3", 3),
                   ("sep3", 1), ("skip", 1), ("skip", 0), ("avg3", 1)],
        "normal_concat": [4, 5, 6],
        "reduce": [("avg3", 0), ("sep3", 1), ("max3", 0), ("sep7", 2), ("sep7", 0), ("avg3", 1),
                   ("max3", 0), ("max3", 1), ("conv7x1", 0), ("sep3", 5)],
        "reduce_concat": [3, 4, 6],
    },
}


class _Scope:
    """Parameters and batch-norm statistics by path; in `record` mode they are created as specs."""

    def __init__(self, params: Params | None, state: Params | None, train: bool) -> None:
        self.record = params is None
        self.params: Params = {} if params is None else params
        self.state: Params = {} if state is None else state
        self.new_state: Params = {}
        self.train = train

    def param(self, key: str, shape: tuple[int, ...]) -> jax.Array:
        if self.record:
            self.params[key] = spec(*shape)
            return jnp.zeros(shape)
        return self.params[key]

    def stat(self, key: str, shape: tuple[int, ...]) -> jax.Array:
        if self.record:
            self.state[key] = spec(*shape)
            return jnp.zeros(shape)
        return self.state[key]

    def conv(self, key: str, x: jax.Array, kh: int, kw: int, c_out: int, stride: tuple[int, int] = (1, 1), depthwise: bool = False) -> jax.Array:
        c_in = x.shape[-1]
        w = self.param(key, (kh, kw, 1 if depthwise else c_in, c_in if depthwise else c_out))
        return lax.conv_general_dilated(
            x, w, stride, "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=c_in if depthwise else 1
        )

    def bn(self, key: str, x: jax.Array) -> jax.Array:
        c = x.shape[-1]
        scale, bias = self.param(f"{key}/scale", (c,)), self.param(f"{key}/bias", (c,))
        mean, var = self.stat(f"{key}/mean", (c,)), self.stat(f"{key}/var", (c,))
        if self.train:
            batch_mean, batch_var = x.mean((0, 1, 2)), x.var((0, 1, 2))
            self.new_state[f"{key}/mean"] = 0.9 * mean + 0.1 * lax.stop_gradient(batch_mean)
            self.new_state[f"{key}/var"] = 0.9 * var + 0.1 * lax.stop_gradient(batch_var)
            mean, var = batch_mean, batch_var
        return (x - mean) * lax.rsqrt(var + 1e-3) * scale + bias


def _pool(x: jax.Array, kind: str, stride: int) -> jax.Array:
    window, strides = (1, 3, 3, 1), (1, stride, stride, 1)
    if kind == "max3":
        return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, "SAME")
    return lax.reduce_window(x, 0.0, lax.add, window, strides, "SAME") / 9.0


def _factorized_reduce(s: _Scope, key: str, x: jax.Array, c_out: int) -> jax.Array:
    """Two stride-2 1x1 convs on offset grids, concatenated (halves H and W)."""
    x = jax.nn.relu(x)
    a = s.conv(f"{key}/a", x, 1, 1, c_out // 2, (2, 2))
    b = s.conv(f"{key}/b", x[:, 1:, 1:], 1, 1, c_out - c_out // 2, (2, 2))
    return s.bn(key, jnp.concatenate([a, b], -1))


def _op(s: _Scope, key: str, name: str, x: jax.Array, c: int, stride: int) -> jax.Array:
    if name == "skip":
        return x if stride == 1 else _factorized_reduce(s, key, x, c)
    if name in ("avg3", "max3"):
        return _pool(x, name, stride)
    if name == "conv7x1":
        x = s.conv(f"{key}/1x7", jax.nn.relu(x), 1, 7, c, (1, stride))
        return s.bn(key, s.conv(f"{key}/7x1", x, 7, 1, c, (stride, 1)))
    k = int(name[3:])
    # A separable conv is applied twice (DARTS/NASNet), the stride on the first depthwise conv.
    for rep, st in ((0, stride), (1, 1)):
        x = s.conv(f"{key}/dw{rep}", jax.nn.relu(x), k, k, c, (st, st), depthwise=True)
        x = s.bn(f"{key}/bn{rep}", s.conv(f"{key}/pw{rep}", x, 1, 1, c))
    return x


def _cell(s: _Scope, key: str, genotype: dict[str, Any], s0: jax.Array, s1: jax.Array, c: int, reduction: bool) -> jax.Array:
    if s0.shape[1] != s1.shape[1]:
        s0 = _factorized_reduce(s, f"{key}/pre0", s0, c)
    else:
        s0 = s.bn(f"{key}/pre0", s.conv(f"{key}/pre0", jax.nn.relu(s0), 1, 1, c))
    s1 = s.bn(f"{key}/pre1", s.conv(f"{key}/pre1", jax.nn.relu(s1), 1, 1, c))
    states = [s0, s1]
    ops = genotype["reduce" if reduction else "normal"]
    for block in range(len(ops) // 2):
        total = 0.0
        for j in (2 * block, 2 * block + 1):
            name, source = ops[j]
            stride = 2 if reduction and source < 2 else 1
            total = total + _op(s, f"{key}/b{block}_{j % 2}", name, states[source], c, stride)
        states.append(total)
    return jnp.concatenate([states[i] for i in genotype["reduce_concat" if reduction else "normal_concat"]], -1)


def _forward(s: _Scope, images: jax.Array, genotype: dict[str, Any], cells_per_stage: int, filters: int, classes: int) -> jax.Array:
    x = s.bn("stem", s.conv("stem", images, 3, 3, 3 * filters))
    s0 = s1 = x
    c = filters
    for stage in range(3):
        if stage:
            c *= 2
            s0, s1 = s1, _cell(s, f"reduce{stage}", genotype, s0, s1, c, True)
        for index in range(cells_per_stage):
            s0, s1 = s1, _cell(s, f"normal{stage}_{index}", genotype, s0, s1, c, False)
    pooled = jax.nn.relu(s1).mean((1, 2))
    return pooled @ s.param("fc/w", (pooled.shape[-1], classes)) + s.param("fc/b", (classes,))


# The NASNet search space's operations (Zoph et al., 2018, sec. 3; those this module builds).
RANDOM_OPS = ("sep3", "sep5", "sep7", "avg3", "max3", "skip", "conv7x1")


def random_genotype(seed: int) -> dict[str, Any]:
    """A genotype drawn uniformly from the NASNet search space: per cell 5 blocks, each summing two
    operations on any earlier state (the cell's two inputs and the blocks before it), the unused
    states concatenated (all blocks when every one is used), as NASNet does.
    Deterministic in `seed`; the workload `randcell` builds these."""
    import random

    rng = random.Random(seed)
    genotype: dict[str, Any] = {}
    for kind in ("normal", "reduce"):
        ops, used = [], set()
        for block in range(5):
            for _ in range(2):
                source = rng.randrange(2 + block)
                ops.append((rng.choice(RANDOM_OPS), source))
                used.add(source)
        genotype[kind] = ops
        genotype[f"{kind}_concat"] = [i for i in range(2, 7) if i not in used] or list(range(2, 7))
    return genotype


def resolve_genotype(genotype: str) -> dict[str, Any]:
    """A published genotype by name, or `random-<seed>` (`random_genotype`)."""
    if genotype in GENOTYPES:
        return GENOTYPES[genotype]
    prefix, _, seed = genotype.partition("-")
    if prefix == "random" and seed.isascii() and seed.isdigit():
        return random_genotype(int(seed))
    raise ValueError(f"genotype must be one of {sorted(GENOTYPES)} or random-<seed>, got {genotype!r}")


def hlo_text(mode: str, *, genotype: str, cells_per_stage: int, filters: int, image_size: int, classes: int, batch: int) -> str:
    cells = resolve_genotype(genotype)
    images = spec(batch, image_size, image_size, 3)
    recorder = _Scope(None, None, train=False)
    jax.eval_shape(lambda im: _forward(recorder, im, cells, cells_per_stage, filters, classes), images)

    def loss(p: Params, b: Params) -> tuple[jax.Array, Any]:
        scope = _Scope(p, b["state"], train=True)
        logits = _forward(scope, b["images"], cells, cells_per_stage, filters, classes)
        return softmax_cross_entropy(logits, b["labels"]), scope.new_state

    def predict(p: Params, b: Params) -> jax.Array:
        return jax.nn.softmax(_forward(_Scope(p, b["state"], train=False), b["images"], cells, cells_per_stage, filters, classes), -1)

    return lower_hlo(
        mode, recorder.params, loss_fn=loss, predict_fn=predict,
        train_batch={"images": images, "labels": spec(batch, dtype=jnp.int32), "state": recorder.state},
        inference_batch={"images": images, "state": recorder.state},
    )
