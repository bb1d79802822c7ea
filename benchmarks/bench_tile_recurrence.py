"""Does the dependence-chain block (`cost_model/learned/tile_recurrence.py`) help the tile ranker?
`rank-all-d10` fitted on the code feature set s18, and on s18 + the recurrence block, on the suite's
split (random or program, test fraction 0.25) training kernels + every kernel of the `--extra` folders;
both scored on the same test kernels (`bench_costmodel.score`), per split seed.

    PYTHONPATH=. python benchmarks/bench_tile_recurrence.py --fill out/tile_s23 out/tile_syn24 out/tile_syn25 out/tile_syn26
    PYTHONPATH=. python benchmarks/bench_tile_recurrence.py out/tile_s23 --extra out/tile_syn24 --extra out/tile_syn25 \
        --extra out/tile_syn26 --split random --seeds 116,117,118,119 --json out/s26/rec_random.json

Each folder's code cache is `<folder>_code` (`bench_tile_code_features.py`); `--fill` reads its kept assembly
and writes the block of every kernel to `<folder>_code/recurrence.npz` (one array per kernel file), which
the scoring reads. Twenty-sixth session: the block made top-1 worse on 8 of 8 runs (RESULTS (i)).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

BLOCK_FILE = "recurrence.npz"


def fill(folder: str) -> int:
    """The recurrence block of every kernel of `folder` from its code cache's assembly; kernels written."""
    from cost_model.learned.tile_code_features import cache_path, cached_asm, compute_functions
    from cost_model.learned.tile_nest_features import loop_tables
    from cost_model.learned.tile_recurrence import RECURRENCE_FEATURES, recurrence_features
    from cost_model.learned.tpugraphs import load_dir
    from graph_ir.io.atomic import atomic_path

    cache = Path(f"{folder.rstrip('/')}_code")
    blocks = {}
    for record in load_dir(folder):
        asm = cached_asm(cache_path(cache, record), record)
        if asm is None:
            continue
        rows = []
        for text in asm:
            if not text:  # a compile that timed out: missing, as in the code cache
                rows.append(np.full(RECURRENCE_FEATURES, np.nan, dtype=np.float32))
                continue
            parsed = compute_functions(text)
            rows.append(recurrence_features(parsed, loop_tables(parsed)))
        blocks[Path(record.path).name] = np.stack(rows)
    with atomic_path(cache / BLOCK_FILE) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **blocks)
    return len(blocks)


def pairs(folder: str, block_file: str = BLOCK_FILE) -> list[tuple[object, object] | None]:
    """Per kernel of `folder`: (s18 record, s18 + block record), None where a cache lacks it."""
    from cost_model.learned.tile_code_features import extended_records
    from cost_model.learned.tpugraphs import load_dir

    cache = Path(f"{folder.rstrip('/')}_code")
    blocks = np.load(cache / block_file)
    out: list[tuple[object, object] | None] = []
    for record in extended_records(load_dir(folder), cache, "s18"):
        name = None if record is None else Path(record.path).name
        if record is None or name not in blocks.files:
            out.append(None)
            continue
        joined = np.concatenate([record.config_feat, blocks[name]], axis=1).astype(np.float32)
        out.append((record, replace(record, config_feat=joined)))
    return out


def score_blocks(data: str, extra: list[str], split: str, seeds: list[int], block_file: str, label: str,
                 json_path: str | None = None) -> dict[str, list[dict]]:
    """s18 against s18 + a block (`block_file` in each folder's code cache), `rank-all-d10`, per split seed."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import score

    from cost_model.learned.data import split_records
    from cost_model.learned.tile_rankers import make_tile_ranker
    from cost_model.learned.tpugraphs import load_dir
    from passes.autotune.search import random_search_measurements

    records = load_dir(data)
    base = pairs(data, block_file)
    more = [p for folder in extra for p in pairs(folder, block_file) if p is not None]
    rows: dict[str, list[dict]] = {}
    for seed in seeds:
        train_idx, test_idx = split_records(records, split, test_fraction=0.25, seed=seed)
        train = [base[i] for i in train_idx if base[i] is not None] + more
        test = [base[i] for i in test_idx if base[i] is not None]
        needs = [random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=seed) for r, _ in test]
        for k, name in ((0, "s18"), (1, f"s18+{label}")):
            model = make_tile_ranker("rank-all-d10", seed=seed).fit([p[k] for p in train])
            scored = [p[k] for p in test]
            row = score(name, [model.predict(r) for r in scored], scored, needs)
            rows.setdefault(name, []).append(row)
            print(f"seed {seed} {split} {name:8s} top-1 {row['top1']:.2%} top-5 {row['top5']:.2%} tau {row['kendall']:.4f} "
                  f"tuner {row['tuner_measurements']:.2f}", flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({"argv": sys.argv, "rows": rows}), encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="the dataset whose splits are scored (with --fill: every folder to fill)")
    parser.add_argument("--fill", action="store_true", help="write each folder's recurrence block from its code cache, then stop")
    parser.add_argument("--extra", action="append", default=[], help="a folder whose every kernel trains (repeatable)")
    parser.add_argument("--split", choices=("random", "program"), default="random")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if args.fill:
        for folder in args.data:
            print(f"{folder}: {fill(folder)} kernels", flush=True)
        return 0
    if len(args.data) != 1:
        parser.error("score one dataset (the others go in --extra)")

    score_blocks(args.data[0], args.extra, args.split, [int(s) for s in args.seeds.split(",") if s], BLOCK_FILE, "rec", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
