"""A ranker fitted on one element type's kernels, scored on labels `bench_tile_dtypes.py` timed.

Reads a `bench_tile_dtypes.py --json` file (each kernel's configurations timed as float32 and other types,
and the shipped ranker's scores on the float32 twin and, with `--rank-own`, on each type's own code) and
ranks each kernel's configurations of `--dtype` with each `RANKER` on the kernel's own compiled code (with
`--dtype float32`: the float32 labels, so float32 rankers are compared on kernels none was fitted on). One row
per way of ranking, over the kernels not in `--exclude` folders (a ranker's own training kernels); the
configurations are compiled once per kernel for all files of one code feature set:

    PYTHONPATH=. python benchmarks/bench_tile_type_ranker.py out/s31/dtypes_test.json out/s31/f16_ranker.json \
        --dtype float16 --exclude out/tile_f16_33 --json out/s31/f16_ranker_test.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _twin_of(shape: str) -> Any:
    """The float32 kernel of "tvm-tile:kind(dims)": files written before rows named their kind and dims."""
    from cost_model.measure.tile.kernels import KernelSpec

    kind, dims = re.match(r"tvm-tile:(\w+)\(([\d,]+)\)", shape).groups()
    return KernelSpec(kind, tuple(int(d) for d in dims.split(",")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timed", help="a bench_tile_dtypes.py --json file")
    parser.add_argument("rankers", nargs="+", metavar="ranker", help="gbdt-ens ranker files (costmodel train --model gbdt-ens)")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--exclude", action="append", default=[], help="a dataset folder whose kernels are left out (repeatable)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_tile_dtypes import _scored, command_line

    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    timed = json.loads(Path(args.timed).read_text(encoding="utf-8"))
    top_k = int(timed["top_k"])
    seed = command_line().parse_args(timed["argv"][1:]).seed  # the draw of the configurations the run timed
    excluded = {str(r.meta["kernel"]).rsplit(":", 1)[0] for folder in args.exclude for r in load_dir(folder)}
    from cost_model.learned.gbdt_predictor import ranked_last_if_uncompiled
    from cost_model.measure.tile.dataset import kernel_graph

    rankers = {Path(path).name: GbdtEnsembleTilePredictor.load(path) for path in args.rankers}
    if len(rankers) != len(args.rankers):
        parser.error("two ranker files share a name: the rows would mix")
    ways: dict[str, list[dict]] = {}
    kept = []
    for row in timed["rows"]:
        shape = row["kernel"].rsplit(":", 1)[0]  # "tvm-tile:kind(dims)"
        if shape in excluded or args.dtype not in row["labels"]:
            continue
        twin = KernelSpec(row["kind"], tuple(row["dims"])) if "kind" in row else _twin_of(shape)
        twin_space = TileSpace(build_kernel(twin))
        configs = kernel_configs(twin_space, seed, len(row["labels"]["float32"]))
        labels = np.asarray(row["labels"][args.dtype], dtype=np.float64)
        keep = np.isfinite(labels)
        typed = KernelSpec(twin.kind, twin.dims, dtype=args.dtype)
        own = twin_space if typed == twin else TileSpace(build_kernel(typed))  # float32: the twin itself, built once
        scores = {"shipped, float32 twin (the tuner now)": np.asarray(row["scores"]["twin"])}
        feats, opcodes, _ = kernel_graph(own.kernel)
        rows_by_set: dict[Any, np.ndarray] = {}  # compiled once per code feature set, not per file
        for name, ranker in rankers.items():
            member = ranker.members[0]
            key = (bool(member.extra.get("code_features")), member.extra.get("code_feature_set", "s16"))
            if key not in rows_by_set:
                rows_by_set[key] = member.config_rows(own, configs)
            rows = rows_by_set[key]
            scores[f"{name}, own {args.dtype} code"] = np.asarray(ranked_last_if_uncompiled(ranker.rank_rows(feats, opcodes, rows), rows), dtype=np.float64)
        if f"own:{args.dtype}" in row["scores"]:
            scores[f"shipped, own {args.dtype} code"] = np.asarray(row["scores"][f"own:{args.dtype}"])
        for name, s in scores.items():
            ways.setdefault(name, []).append(_scored(s[keep], labels[keep], top_k) | {"kernel": row["kernel"]})
        kept.append(row["kernel"])
        print(f"{shape:44s} " + "  ".join(f"{name.split(',')[0]}: tau {ways[name][-1]['tau_ranker']:.2f} tuner {ways[name][-1]['tuner']:.1%}"
                                         for name in scores), flush=True)
    print(f"\n{len(kept)} kernels ({args.dtype} labels), the tuner's k = {top_k}:")
    print("| ranking | ranker tau | top-1 | tuner, top k | within 2% |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in ways.items():
        print(f"| {name} | {np.mean([r['tau_ranker'] for r in rows]):.3f} | {np.mean([r['top1'] for r in rows]):.1%} "
              f"| {np.mean([r['tuner'] for r in rows]):.2%} | {np.mean([r['tuner'] <= 0.02 for r in rows]):.0%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "kernels": kept, "ways": ways}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
