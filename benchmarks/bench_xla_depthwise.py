"""Why the fusion program dw_sep is mispriced: XLA's CPU depthwise conv against a dense one.

    PYTHONPATH=. python benchmarks/bench_xla_depthwise.py [--calls 200 --rounds 7]

Times one jitted call of each conv of `fusion_graphs`' dw_sep program (depthwise 3x3 with
feature_group_count = channels, pointwise 1x1) and a dense 3x3 conv of the same input and output
(16x the FLOPs of the depthwise one), at scales 1 and 2, with the fusion collector's XLA timing
setup (sync dispatch, one Eigen thread): min and median over `rounds` samples of `calls` calls.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    from cost_model.measure.xla_timing import configure_xla_timing

    configure_xla_timing()
    import jax

    dn = ("NHWC", "HWIO", "NHWC")
    rng = np.random.default_rng(0)
    print("| scale | input | conv | FLOPs | min us | median us |")
    print("|---|---|---|---:|---:|---:|")
    for scale in (1, 2):
        x = jax.numpy.asarray(rng.standard_normal((2, 8 * scale, 8 * scale, 16), dtype=np.float32))
        kernels = {"depthwise 3x3 (groups 16)": (rng.standard_normal((3, 3, 1, 16), dtype=np.float32), 16),
                   "dense 3x3, 16 -> 16": (rng.standard_normal((3, 3, 16, 16), dtype=np.float32), 1),
                   f"pointwise 1x1, 16 -> {16 * scale}": (rng.standard_normal((1, 1, 16, 16 * scale), dtype=np.float32), 1)}
        for name, (kernel, groups) in kernels.items():
            k = jax.numpy.asarray(kernel)
            fn = jax.jit(lambda v, k=k, groups=groups: jax.lax.conv_general_dilated(v, k, (1, 1), "SAME", dimension_numbers=dn,
                                                                                     feature_group_count=groups))
            out = fn(x).block_until_ready()
            flops = 2 * out.size * kernel.shape[0] * kernel.shape[1] * kernel.shape[2]
            samples = []
            for _ in range(args.rounds):
                began = time.perf_counter()
                for _ in range(args.calls):
                    fn(x).block_until_ready()
                samples.append((time.perf_counter() - began) / args.calls)
            print(f"| {scale} | {tuple(x.shape)} | {name} | {flops} | {min(samples) * 1e6:.1f} | {np.median(samples) * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
