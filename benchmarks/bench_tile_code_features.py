"""Fill the compiled-code feature cache of a tile dataset (cost_model.learned.tile_code_features).

    PYTHONPATH=. python benchmarks/bench_tile_code_features.py out/tile_s13 --cache out/t11/code [--kernels 2] [--until 16:10]

Every configuration of every kernel is compiled for this host (the collector's compile path) and
its assembly read; one `.npz` per kernel under `--cache`, so a rerun compiles only what is missing.
Kernels are taken in a seeded random order (`--order-seed`), so a run stopped by `--until` (UTC
HH:MM) or `--kernels` covers every kind and program in proportion; `--first` names kernels to do
before that order. Prints the compile rate and
writes a JSON summary beside the cache.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="tile dataset folder (.npz files)")
    parser.add_argument("--cache", required=True, help="folder of the per-kernel code feature files")
    parser.add_argument("--kernels", type=int, default=0, help="compile at most this many kernels (0: all)")
    parser.add_argument("--until", default="", help="UTC HH:MM: start no kernel after it")
    parser.add_argument("--order-seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one configuration may compile (then NaN features)")
    parser.add_argument("--first", default="", help="comma list of kernel file names to compile before the random order (e.g. a diagnosis's kernels)")
    args = parser.parse_args(argv)

    from cost_model.learned.tile_code_features import fill_code_feature_cache
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(args.data)
    order = np.random.default_rng(args.order_seed).permutation(len(records)).tolist()
    first = [name for name in args.first.split(",") if name]
    order = [i for name in first for i, r in enumerate(records) if Path(r.path).name == name] + [i for i in order if Path(records[i].path).name not in first]
    chosen = [records[i] for i in order][: args.kernels or None]
    deadline = None
    if args.until:
        hour, minute = (int(x) for x in args.until.split(":"))
        now = dt.datetime.now(dt.timezone.utc)
        deadline = now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()
    summary = fill_code_feature_cache(chosen, args.cache, deadline=deadline, timeout=args.timeout)
    summary |= {"data": Path(args.data).name, "kernels_asked": len(chosen), "order_seed": args.order_seed, "first": first}
    print(json.dumps(summary, indent=1))
    out = Path(args.cache) / "fill_summary.json"
    history = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else []
    out.write_text(json.dumps(history + [summary], indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
