"""Does the cache-set conflict block (`cost_model/learned/tile_conflict_features.py`) help the tile ranker?
`rank-all-d10` on the code feature set s18, and on s18 + the conflict block, fitted on a split's training
kernels + every kernel of the `--extra` folders and scored on the same test kernels, per split seed
(`bench_tile_recurrence.score_blocks`).

    PYTHONPATH=. python benchmarks/bench_tile_conflicts.py --fill out/tile_s23 out/tile_syn24 ... out/tile_syn29
    PYTHONPATH=. python benchmarks/bench_tile_conflicts.py out/tile_s23 --extra out/tile_syn24 ... --extra out/tile_syn29 \
        --split program --seeds 132,133 --json out/s31/conflict_program.json

`--fill` computes the block of every configuration of every kernel from the dataset's own records (the
schedule, the kernel's shape and this machine's cache geometry; no compile) and writes it to
`<folder>_code/conflict.npz`, one array per kernel file, beside the code cache the s18 rows come from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

BLOCK_FILE = "conflict.npz"


def fill(folder: str) -> int:
    """The conflict block of every kernel of `folder`; kernels written."""
    from tqdm import tqdm

    from cost_model.learned.tile_conflict_features import conflict_features
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.tile.space import TileConfig
    from graph_ir.io.atomic import atomic_path

    blocks = {}
    for record in tqdm(load_dir(folder), desc=f"conflicts {Path(folder).name}", unit="kernel"):
        meta = record.meta
        blocks[Path(record.path).name] = np.stack([
            conflict_features(TileConfig.from_text(str(text)), meta["is_reduce"], meta["extents"], meta["kind"], meta["dims"])
            for text in record.config_text])
    cache = Path(f"{folder.rstrip('/')}_code")
    with atomic_path(cache / BLOCK_FILE) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **blocks)
    return len(blocks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="the dataset whose splits are scored (with --fill: every folder to fill)")
    parser.add_argument("--fill", action="store_true", help="write each folder's conflict block, then stop")
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
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_tile_recurrence import score_blocks

    score_blocks(args.data[0], args.extra, args.split, [int(s) for s in args.seeds.split(",") if s], BLOCK_FILE, "conf", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
