"""Overhead of the integrations on this CPU.

torch: compile time (the first call: dynamo + backend + one run) and steady-state latency
(median of `--repeats` calls, backends interleaved round-robin) of eager, `compiler_opt` (fx
executor), `compiler_opt` (onnxruntime executor) and `inductor`, on a few small torch models,
inference under no_grad. Every compiled output is checked against eager.

JAX: compile time (lower + compile after `jax.clear_caches()`) and run time (median, interleaved)
of the suite's JAX models at small sizes with and without the XLA hook (`xla_hook()`, default
pipeline `fuse,schedule`), the time spent inside the hook, and the largest output difference.

    python benchmarks/bench_integrations.py                      # both parts
    python benchmarks/bench_integrations.py --part jax --repeats 50
    python benchmarks/bench_integrations.py --part torch --threads 1   # torch/onnxruntime threads (default 1)

Prints two tables and writes benchmarks/results/bench_integrations.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _median_interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in samples.items()}


# ---- torch -----------------------------------------------------------------------------------


def _torch_models() -> dict[str, tuple[Any, tuple]]:
    import torch

    torch.manual_seed(0)

    class ConvAttention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 32, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(32)
            self.conv2 = torch.nn.Conv2d(32, 32, 3, padding=1, groups=4)
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
            self.norm = torch.nn.LayerNorm(32)
            self.head = torch.nn.Linear(32, 10)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv1(x)))
            y = torch.nn.functional.gelu(self.conv2(y)) + y
            tokens = y.flatten(2).transpose(1, 2)
            attended, _ = self.attn(tokens, tokens, tokens)
            return self.head(self.norm(attended + tokens).mean(1))

    mlp = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)
    )
    layer = torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
    return {
        "conv-attention (8x3x16x16)": (ConvAttention().eval(), (torch.randn(8, 3, 16, 16),)),
        "mlp 256-512-512-10 (batch 64)": (mlp.eval(), (torch.randn(64, 256),)),
        "transformer layer d128 (8x32)": (layer.eval(), (torch.randn(8, 32, 128),)),
    }


def bench_torch(repeats: int, threads: int) -> list[dict[str, Any]]:
    import torch

    if threads > 0:  # OpenMP spin-waiting on an oversubscribed machine makes multi-thread eager erratic
        torch.set_num_threads(threads)

    from compiler_opt.integrations.torch_backend import last_compile_stats, register_torch_backend

    register_torch_backend()
    backends: dict[str, dict[str, Any] | None] = {
        "eager": None,
        "compiler_opt (fx)": {"backend": "compiler_opt"},
        "compiler_opt (onnxruntime)": {"backend": "compiler_opt", "options": {"executor": "onnxruntime", "threads": max(threads, 0)}},
        "inductor": {"backend": "inductor"},
    }
    rows = []
    for model_name, (model, inputs) in _torch_models().items():
        with torch.no_grad():
            expected = model(*inputs)
            callables: dict[str, Callable[[], Any]] = {}
            first: dict[str, float] = {}
            diffs: dict[str, float] = {}
            backend_s: dict[str, float] = {}
            for name, kwargs in backends.items():
                torch._dynamo.reset()
                last_compile_stats(reset=True)
                fn = model if kwargs is None else torch.compile(model, **kwargs)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    start = time.perf_counter()
                    out = fn(*inputs)
                    first[name] = time.perf_counter() - start
                diffs[name] = float((out - expected).abs().max())
                stats = last_compile_stats()
                backend_s[name] = stats.seconds if name.startswith("compiler_opt") else float("nan")
                if stats.fallbacks and name.startswith("compiler_opt"):
                    diffs[name] = float("nan")
                callables[name] = lambda fn=fn: fn(*inputs)
            for fn in callables.values():  # warm-up
                for _ in range(3):
                    fn()
            latency = _median_interleaved(callables, repeats)
        for name in backends:
            rows.append(
                {
                    "model": model_name, "backend": name, "first_call_s": first[name], "backend_s": backend_s[name],
                    "latency_ms": latency[name] * 1e3, "vs_eager": latency[name] / latency["eager"], "max_abs_diff": diffs[name],
                }
            )
            print(f"  {model_name:32s} {name:28s} first {first[name]:7.2f} s  latency {latency[name] * 1e3:8.3f} ms", flush=True)
        torch._dynamo.reset()
    return rows


# ---- JAX -------------------------------------------------------------------------------------


def _materialize(tree: Any, seed: int) -> Any:
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree.flatten(tree)
    rng = np.random.default_rng(seed)
    out = []
    for leaf in leaves:
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            out.append((0.1 * rng.standard_normal(leaf.shape)).astype(leaf.dtype))
        else:
            out.append(rng.integers(0, 2, leaf.shape).astype(leaf.dtype))
    return jax.tree.unflatten(treedef, out)


def _jax_models() -> dict[str, tuple[Callable[..., Any], tuple]]:
    import jax

    from compiler_opt.workloads import bert, rnnlm, transformer_xl

    rng = np.random.default_rng(1)

    def mlp(x, w1, b1, w2, b2, w3, b3):
        h = jax.nn.gelu(x @ w1 + b1)
        h = jax.nn.gelu(h @ w2 + b2)
        return jax.nn.softmax(h @ w3 + b3, axis=-1)

    mlp_args = tuple(rng.standard_normal(s).astype(np.float32) * 0.1 for s in [(64, 256), (256, 512), (512,), (512, 512), (512,), (512, 10), (10,)])
    bp = _materialize(bert.param_specs(layers=2, hidden=64, d_ff=256, vocab=200, seq_len=32), 0)
    tokens = rng.integers(0, 200, (4, 32)).astype(np.int32)
    segments = rng.integers(0, 2, (4, 32)).astype(np.int32)
    mask = np.ones((4, 32), np.int32)

    def bert_loss(p, t, s, m):
        return (bert.encode(p, t, s, m, 4) ** 2).mean()

    xp = _materialize(transformer_xl.param_specs(layers=2, d_model=64, heads=4, d_ff=128, vocab=200), 2)
    xl_tokens = rng.integers(0, 200, (4, 16)).astype(np.int32)
    mems = (0.1 * rng.standard_normal((2, 4, 16, 64))).astype(np.float32)
    rp = _materialize(rnnlm.param_specs(layers=2, hidden=64, vocab=200), 3)
    rnn_tokens = rng.integers(0, 200, (8, 8)).astype(np.int32)
    return {
        "mlp 256-512-512-10 (batch 64)": (mlp, mlp_args),
        "bert 2 layers h64 (4x32), inference": (lambda p, t, s, m: bert.encode(p, t, s, m, 4), (bp, tokens, segments, mask)),
        "bert 2 layers h64 (4x32), gradient": (jax.grad(bert_loss), (bp, tokens, segments, mask)),
        "transformer-xl 2 layers d64 (4x16, mem 16)": (lambda p, t, m: transformer_xl.forward(p, t, m, 4), (xp, xl_tokens, mems)),
        "rnnlm 2x64 (8x8)": (rnnlm.forward, (rp, rnn_tokens)),
    }


def bench_jax(repeats: int, pipeline: str | None, stages: tuple[str, ...] = ("pre", "post")) -> list[dict[str, Any]]:
    import jax

    from compiler_opt.integrations import xla_hook

    rows = []
    for model_name, (fn, args) in _jax_models().items():
        jax.clear_caches()
        start = time.perf_counter()
        plain = jax.jit(fn).lower(*args).compile()
        plain_s = time.perf_counter() - start
        jax.clear_caches()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            with xla_hook(pipeline=pipeline, stages=stages) as hook:
                hooked = jax.jit(fn).lower(*args).compile()
            hooked_s = time.perf_counter() - start
        expected, got = plain(*args), hooked(*args)
        diff = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)))
        calls = {
            "xla": lambda: jax.block_until_ready(plain(*args)),
            "xla+hook": lambda: jax.block_until_ready(hooked(*args)),
        }
        for call in calls.values():
            for _ in range(3):
                call()
        latency = _median_interleaved(calls, repeats)
        row = {
            "model": model_name,
            "compile_s": plain_s,
            "compile_hook_s": hooked_s,
            "hook_s": sum(s.seconds for s in hook.stats.values()),
            "run_ms": latency["xla"] * 1e3,
            "run_hook_ms": latency["xla+hook"] * 1e3,
            "run_ratio": latency["xla+hook"] / latency["xla"],
            "max_abs_diff": diff,
            "hook_changed": {k: v.changed for k, v in hook.stats.items()},
            "hook_errors": hook.errors[:3],
            "warnings": [str(w.message) for w in caught if "compiler_opt" in str(w.message)][:3],
        }
        rows.append(row)
        print(
            f"  {model_name:44s} compile {plain_s:6.2f} -> {hooked_s:6.2f} s (hook {row['hook_s']:.2f} s)  "
            f"run {row['run_ms']:8.3f} -> {row['run_hook_ms']:8.3f} ms  diff {diff:.1e}",
            flush=True,
        )
    return rows


def _print_tables(torch_rows: list[dict[str, Any]], jax_rows: list[dict[str, Any]]) -> None:
    if torch_rows:
        print("\n| model | backend | first call (s) | of it in our backend (s) | latency (ms) | vs eager | max abs diff |")
        print("|---|---|---|---|---|---|---|")
        for r in torch_rows:
            ours = "-" if r["backend_s"] != r["backend_s"] else f"{r['backend_s']:.2f}"
            print(
                f"| {r['model']} | {r['backend']} | {r['first_call_s']:.2f} | {ours} | {r['latency_ms']:.3f} | "
                f"{r['vs_eager']:.2f}x | {r['max_abs_diff']:.1e} |"
            )
    if jax_rows:
        print("\n| model | compile (s) | compile with hook (s) | in the hook (s) | run (ms) | run with hook (ms) | ratio | max abs diff |")
        print("|---|---|---|---|---|---|---|---|")
        for r in jax_rows:
            print(
                f"| {r['model']} | {r['compile_s']:.2f} | {r['compile_hook_s']:.2f} | {r['hook_s']:.2f} | {r['run_ms']:.3f} | "
                f"{r['run_hook_ms']:.3f} | {r['run_ratio']:.2f}x | {r['max_abs_diff']:.1e} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("torch", "jax", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch and onnxruntime intra-op threads (0: their defaults)")
    parser.add_argument("--pipeline", default=None, help="pipeline for the XLA hook (default: fuse,schedule)")
    parser.add_argument("--stages", nargs="+", default=["pre", "post"], choices=["pre", "post"], help="XLA hook stages")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_integrations.json")
    args = parser.parse_args(argv)
    torch_rows = bench_torch(args.repeats, args.threads) if args.part in ("torch", "all") else []
    jax_rows = bench_jax(args.repeats, args.pipeline, tuple(args.stages)) if args.part in ("jax", "all") else []
    _print_tables(torch_rows, jax_rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"machine": platform.platform(), "repeats": args.repeats, "threads": args.threads, "torch": torch_rows, "jax": jax_rows}, indent=2)
    )
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
