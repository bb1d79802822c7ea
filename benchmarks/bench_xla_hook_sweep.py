"""The XLA hook for JAX over programs nobody tuned it on: every kind of HLO a user's jax code makes.

    python benchmarks/bench_xla_hook_sweep.py [CASE ...] [--pipeline P] [--timeout S] [--json PATH] [--list]

Each case is a small jax function (sorting, top-k, gathers, dynamic slices, pooling and its
gradient, while loops, FFT, LAPACK decompositions, random bits, integer / half / complex types,
vmap, gradients, custom_vjp, ...), run in its own process (a crash or a hang ends that case only):
`jax.jit` without the hook, then under `xla_hook(pipeline, strict=True)` after `jax.clear_caches()`,
outputs compared (`numpy.testing.assert_allclose`, rtol 1e-5 / atol 1e-6; integer and boolean
outputs exactly). Outcomes: `equal` (and whether the hook handed XLA a changed module), `different`,
`error:<Kind>` (the hook raised: strict mode makes XLA fail the compile with our reason),
`crash`, `timeout`. Prints a table and every row's message; the JSON (rewritten after each row)
holds the rows.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child_outcome import run_child  # noqa: E402


def cases() -> dict:
    """name -> (function, arguments), made afresh in each child (jax imported here, not at module load)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x, m, img = f32(8, 16), f32(16, 16), f32(2, 3, 16, 16)
    spd = (m @ m.T + 16 * np.eye(16)).astype(np.float32)

    def maxpool(a):
        return lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    @jax.custom_vjp
    def clip_grad(a):
        return a

    clip_grad.defvjp(lambda a: (a, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def while_newton(a):
        def body(c):
            i, y = c
            return i + 1, 0.5 * (y + a / y)
        return lax.while_loop(lambda c: c[0] < 20, body, (0, jnp.ones_like(a)))[1]

    return {
        "sort": (lambda a: jnp.sort(a, axis=-1), (x,)),
        "argsort-stable": (lambda a: jnp.argsort(a, axis=0, stable=True), (x,)),
        "top-k": (lambda a: lax.top_k(a, 3), (x,)),
        "cumsum-cumprod": (lambda a: (jnp.cumsum(a, 1), jnp.cumprod(a * 0.1 + 1, 0)), (x,)),
        "gather-take": (lambda a, i: jnp.take(a, i, axis=0) * 2, (x, np.array([3, 0, 7, 7, 1], np.int32))),
        "dynamic-slice-update": (lambda a, i: lax.dynamic_update_slice(a, lax.dynamic_slice(a, (i, 0), (2, 16)) + 1, (0, i)),
                                 (x, np.int32(3))),
        "pad-concat-rev": (lambda a: jnp.concatenate([jnp.pad(a, ((1, 2), (0, 3))), jnp.flip(jnp.pad(a, ((2, 1), (3, 0))), 1)]), (x,)),
        "maxpool": (maxpool, (img,)),
        "maxpool-grad": (jax.grad(lambda a: maxpool(a).sum()), (img,)),
        "avgpool-conv-grad": (jax.grad(lambda a, w: jnp.mean(lax.conv(a, w, (2, 2), "SAME") ** 2), argnums=(0, 1)),
                              (img, f32(4, 3, 3, 3))),
        "while-newton": (while_newton, (np.abs(x) + 1,)),
        "fori-matpow": (lambda a: lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c @ a), a), (m * 0.2,)),
        "fft": (lambda a: jnp.fft.irfft(jnp.fft.rfft(a, axis=-1) * 0.5, axis=-1), (x,)),
        "complex": (lambda a: jnp.abs(jnp.exp(1j * a) * (a + 2j)), (x,)),
        "cholesky-solve": (lambda a, b: jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b), (spd, x.T)),
        "qr-eigh-svd": (lambda a: (jnp.linalg.qr(a)[1], jnp.linalg.eigh(a + a.T)[0], jnp.linalg.svd(a, compute_uv=False)), (m,)),
        "triangular-solve": (lambda a, b: jax.scipy.linalg.solve_triangular(jnp.tril(a) + 8 * jnp.eye(16), b, lower=True), (m, x.T)),
        "random-bits": (lambda k: (jax.random.normal(jax.random.wrap_key_data(k), (4, 8)), jax.random.bits(jax.random.wrap_key_data(k), (5,))),
                        (np.array([0, 42], np.uint32),)),
        "int8-matmul": (lambda a, b: lax.dot(a, b, preferred_element_type=jnp.int32), ((rng.integers(-8, 8, (8, 16))).astype(np.int8),
                                                                                        (rng.integers(-8, 8, (16, 4))).astype(np.int8))),
        "int-bitwise": (lambda a: ((a << 2) ^ (a >> 1)) & 0x3F | jnp.left_shift(a, 1).astype(jnp.uint8).astype(jnp.int32),
                        (rng.integers(0, 1000, (32,)).astype(np.int32),)),
        "bf16-mlp": (lambda a, w: jax.nn.relu(a.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32), (x, m)),
        "f16-softmax": (lambda a: jax.nn.softmax(a.astype(jnp.float16), axis=-1).astype(jnp.float32), (x,)),
        "bool-where-argmax": (lambda a: (jnp.where(a > 0, a, -a), jnp.argmax(a, 1), jnp.any(a > 2, 0)), (x,)),
        "vmap-matvec": (jax.vmap(lambda a, v: jnp.tanh(a @ v), in_axes=(None, 0)), (m, x)),
        "grad-of-scan": (jax.grad(lambda a: lax.scan(lambda c, r: (jnp.sin(c) + r, (c * r).sum()), jnp.zeros(16), a)[1].sum()), (x,)),
        "hessian": (jax.hessian(lambda a: jnp.sum(jnp.sin(a) * a ** 2)), (x[0],)),
        "custom-vjp": (jax.grad(lambda a: jnp.sum(clip_grad(a) ** 3)), (x,)),
        "einsum-attention": (lambda q, k, v: jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / 4, -1), v),
                             (f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16))),
        "segment-sum": (lambda a, ids: jax.ops.segment_sum(a, ids, num_segments=4), (x, np.array([0, 1, 1, 3, 0, 2, 2, 3], np.int32))),
        "scalar-and-empty": (lambda a, e: (a.sum() * 0 + 3.0, e * 2, jnp.zeros((0, 4)) + 1), (x, np.zeros((0, 3), np.float32))),
        "tuple-of-identical-outputs": (lambda a: (a, a, a + 0), (x,)),
        "checkpoint-remat": (jax.grad(lambda a: jax.checkpoint(lambda b: jnp.tanh(b @ b.T).sum())(a)), (x,)),
    }


_CHILD = r"""
import json, sys, warnings
import numpy as np
sys.path.insert(0, sys.argv[3])
import jax
from bench_xla_hook_sweep import cases
from compiler_opt.integrations import xla_hook
name, pipeline = sys.argv[1], sys.argv[2]
def emit(outcome, message="", **extra):
    print("OUTCOME " + json.dumps(dict(outcome=outcome, message=message[:600], **extra)), flush=True)
    sys.exit(0)
fn, args = cases()[name]
leaves = lambda out: [np.asarray(t) for t in jax.tree.leaves(out)]
try:
    jax.clear_caches()
    expected = leaves(jax.jit(fn)(*args))
except Exception as err:
    emit("jax-error", f"{type(err).__name__}: {err}")
try:
    jax.clear_caches()
    with xla_hook(pipeline, strict=True) as hook:
        got = leaves(jax.jit(fn)(*args))
except Exception as err:
    emit("error:" + type(err).__name__, " ".join(str(err).split())[:600])
if len(got) != len(expected):
    emit("different", f"{len(got)} outputs against {len(expected)}")
for a, b in zip(got, expected):
    if a.shape != b.shape or a.dtype != b.dtype:
        emit("different", f"output {a.shape} {a.dtype} against {b.shape} {b.dtype}")
    try:
        if np.issubdtype(b.dtype, np.inexact):
            np.testing.assert_allclose(a.astype(np.complex128 if np.iscomplexobj(b) else np.float64),
                                       b.astype(np.complex128 if np.iscomplexobj(b) else np.float64), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, b)
    except AssertionError as err:
        emit("different", " ".join(str(err).split())[:400])
changed = sum(s.changed for s in hook.stats.values())
modules = sum(s.modules for s in hook.stats.values())
emit("equal", f"{modules} module(s) seen, {changed} changed; {sum(s.seconds for s in hook.stats.values()):.2f}s in the hook",
     modules=modules, changed=changed)
"""


def run_one(name: str, pipeline: str, timeout: float) -> dict:
    return run_child(_CHILD, [name, pipeline, str(Path(__file__).parent)], timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all; --list names them)")
    parser.add_argument("--pipeline", default="fuse,schedule{strategy=critical-path}", help="the hook's pipeline (default: xla_hook's)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per case (default 180)")
    parser.add_argument("--json", help="write every row here (rewritten after each)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    args = parser.parse_args(argv)
    known = list(cases())
    if args.list:
        print("\n".join(known))
        return 0
    unknown = [c for c in args.cases if c not in known]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rows: list[dict] = []
    for name in args.cases or known:
        row = {"case": name, **run_one(name, args.pipeline, args.timeout)}
        rows.append(row)
        print(f"{name:28s} {row['outcome']:22s} {row['seconds']:6.1f}s  {row['message'][:120]}", flush=True)
        if args.json:
            tmp = Path(args.json + ".tmp")
            tmp.write_text(json.dumps({"argv": sys.argv, "pipeline": args.pipeline, "rows": rows}, indent=1), encoding="utf-8")
            tmp.replace(args.json)
    counts = collections.Counter(r["outcome"].split(":")[0] if r["outcome"].startswith("error") else r["outcome"] for r in rows)
    print("\n| outcome | cases |\n|---|---:|")
    for outcome, n in sorted(counts.items()):
        print(f"| {outcome} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
