"""One XLA CPU convolution at a time: depthwise, grouped and dense 3x3 / 5x5 convs under jax.jit,
to see what a grouped conv (feature_group_count > 1) costs against its multiply-adds.

    PYTHONPATH=. taskset -c 1 python benchmarks/bench_grouped_conv.py [--json benchmarks/results/grouped_conv.json]

Single-threaded XLA with synchronous dispatch (`configure_xla_timing`, as the fusion collector);
per conv the median of 9 samples, each a loop of calls lasting >= 10 ms. Prints per conv the
time, output elements, multiply-adds, the dense-equivalent multiply-adds (as if every output met
all input channels) and the time per (output element x window tap), per MAC and per dense MAC.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (groups, in channels, out channels, height = width, window, stride), batch 2, NHWC, SAME padding
SHAPES = [(16, 16, 16, 8, 3, 1), (16, 16, 16, 16, 3, 1), (16, 16, 16, 32, 3, 1), (32, 32, 32, 8, 3, 1), (32, 32, 32, 16, 3, 1), (64, 64, 64, 8, 3, 1),
          (64, 64, 64, 16, 3, 1), (16, 16, 16, 16, 3, 2), (16, 16, 16, 32, 3, 2), (8, 8, 16, 8, 5, 1), (16, 16, 32, 16, 5, 1), (16, 16, 16, 16, 5, 1),
          (4, 16, 16, 8, 3, 1), (4, 16, 32, 16, 3, 1), (4, 16, 16, 16, 3, 1), (2, 16, 16, 16, 3, 1), (8, 16, 16, 16, 3, 1), (4, 32, 32, 16, 3, 1),
          (1, 16, 16, 8, 3, 1), (1, 16, 16, 16, 3, 1), (1, 16, 32, 16, 3, 1), (1, 32, 32, 16, 3, 1)]


def _seconds(fn, *args) -> float:  # type: ignore[no-untyped-def]
    import jax

    from cost_model.measure.harness import batched, per_call_timer

    jitted = jax.jit(fn)
    runner = batched(lambda: jax.block_until_ready(jitted(*args)), 0.01)  # warmed up; samples of >= 10 ms
    return float(np.median([per_call_timer(runner) for _ in range(9)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    from cost_model.measure.xla_timing import configure_xla_timing

    configure_xla_timing()
    import jax

    rng = np.random.default_rng(0)
    dn = ("NHWC", "HWIO", "NHWC")
    rows = []
    print("| kind | groups | Cin | Cout | H=W | window | stride | us | output elements | MACs | dense-equivalent MACs | ns / (output x tap) | ns / MAC | ns / dense MAC |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for groups, cin, cout, hw, k, stride in SHAPES:
        x = rng.standard_normal((2, hw, hw, cin), dtype=np.float32)
        w = rng.standard_normal((k, k, cin // groups, cout), dtype=np.float32)
        seconds = _seconds(lambda x, w, g=groups, s=stride: jax.lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=dn, feature_group_count=g), x, w)
        side = -(-hw // stride)
        out = 2 * side * side * cout
        macs, dense = out * k * k * (cin // groups), out * k * k * cin
        kind = "depthwise" if groups == cin else "grouped" if groups > 1 else "dense"
        rows.append({"kind": kind, "groups": groups, "cin": cin, "cout": cout, "hw": hw, "window": k, "stride": stride, "seconds": seconds,
                     "output_elements": out, "macs": macs, "dense_macs": dense})
        print(f"| {kind} | {groups} | {cin} | {cout} | {hw} | {k}x{k} | {stride} | {seconds * 1e6:.1f} | {out} | {macs} | {dense} | "
              f"{seconds * 1e9 / out / k / k:.2f} | {seconds * 1e9 / macs:.2f} | {seconds * 1e9 / dense:.3f} |", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
