"""Does one XLA call cost more the more distinct executables a step runs? A mechanism check of the
fusion model's call growth term (`fusion_terms.CALL_GROWTH_TERMS`, twenty-first session: a call
priced 0.61 us x sqrt(calls) fitted best, and passed a pre-registered test on new programs).

    PYTHONPATH=. taskset -c 0 python benchmarks/bench_call_growth.py [--counts 1,2,4,8,16,32,64] [--size 256] [--json out.json]

A "step" runs N small executables one after the other, each on its own buffers, as the fusion
collector runs a configuration's groups (XLA CPU, synchronous dispatch, one thread:
`configure_xla_timing`). Three ways to make N calls:

- `distinct`: N different executables (each its own elementwise + reduce program over its own
  argument: distinct code and distinct buffers), the fusion labels' situation;
- `same`: one executable called N times on one argument (the same code, the same buffers);
- `same code, own buffers`: one executable called on N different arguments (the same code, N
  buffers), which separates code from data.

Per-call time = min over rounds of (step time / N); rounds interleave the counts and the kinds in a
seeded random order. If the per-call cost grows with N for `distinct` and not for `same`, the growth
is the executables' own footprint (their code and buffers evicting each other), which is what the
term's reading says. Prints a table (per-call us per N and kind, and the fitted exponent of
step time ~ N^p); timings: run on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,2,4,8,16,32,64", help="executables (calls) per step")
    parser.add_argument("--size", type=int, default=256, help="elements per argument (float32); each program's own size is this + its index")
    parser.add_argument("--rounds", type=int, default=31, help="timed rounds per (count, kind); each round times >= --sample-ms of steps")
    parser.add_argument("--sample-ms", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args(argv)
    try:
        counts = sorted({int(c) for c in args.counts.split(",") if c})
    except ValueError:
        parser.error(f"--counts takes integers, got {args.counts!r}")
    if not counts or counts[0] < 1 or args.size < 1 or args.rounds < 1:
        parser.error("--counts, --size and --rounds must be positive")

    from cost_model.measure.xla_timing import configure_xla_timing

    settings = configure_xla_timing()
    import jax
    import jax.numpy as jnp

    top = counts[-1]

    def program(i: int):  # distinct constants and sizes: XLA compiles each to its own executable
        scale, shift = np.float32(1.0 + 0.01 * i), np.float32(0.001 * i)
        return jax.jit(lambda x: jnp.tanh(x * scale + shift) * jnp.sum(x))

    rng = np.random.default_rng(args.seed)
    own = [jnp.asarray(rng.standard_normal(args.size + i, dtype=np.float32)) for i in range(top)]
    distinct = [program(i) for i in range(top)]
    shared = program(top)
    same_arg = jnp.asarray(rng.standard_normal(args.size, dtype=np.float32))
    same_size = [jnp.asarray(rng.standard_normal(args.size, dtype=np.float32)) for _ in range(top)]
    for f, x in zip(distinct, own):
        f(x).block_until_ready()  # compile
    shared(same_arg).block_until_ready()

    def step(kind: str, n: int):
        if kind == "distinct":
            calls = [(distinct[i], own[i]) for i in range(n)]
        elif kind == "same":
            calls = [(shared, same_arg)] * n
        else:
            calls = [(shared, same_size[i]) for i in range(n)]

        def run() -> None:
            for f, x in calls:
                f(x).block_until_ready()
        return run

    kinds = ("distinct", "same", "same code, own buffers")
    runners = {(k, n): step(k, n) for k in kinds for n in counts}
    loops = {}
    for key, run in runners.items():  # steps per sample so one sample lasts >= sample-ms
        run()
        began = time.perf_counter()
        run()
        loops[key] = max(1, int(np.ceil(args.sample_ms * 1e-3 / max(time.perf_counter() - began, 1e-7))))
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in runners}
    order = list(runners)
    for _ in range(args.rounds):
        rng.shuffle(order)
        for key in order:
            run, reps = runners[key], loops[key]
            began = time.perf_counter()
            for _ in range(reps):
                run()
            samples[key].append((time.perf_counter() - began) / reps / key[1])
    per_call = {key: float(np.min(v)) for key, v in samples.items()}
    print(f"XLA timing: {settings}")
    print("\n| calls per step | " + " | ".join(f"{k}: us per call" for k in kinds) + " |")
    print("|---:|" + "---:|" * len(kinds))
    for n in counts:
        print(f"| {n} | " + " | ".join(f"{per_call[(k, n)] * 1e6:.2f}" for k in kinds) + " |")
    exponents = {}
    for k in kinds:
        steps = np.array([per_call[(k, n)] * n for n in counts])
        exponents[k] = float(np.polyfit(np.log(counts), np.log(steps), 1)[0]) if len(counts) > 1 else float("nan")
    print("\nstep time ~ calls^p, fitted over the counts: " + ", ".join(f"{k} p = {p:.2f}" for k, p in exponents.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "settings": settings, "counts": counts, "size": args.size,
                                               "per_call_s": {f"{k}@{n}": v for (k, n), v in per_call.items()}, "exponent": exponents}, indent=1),
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
