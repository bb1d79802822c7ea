"""Does the dependence-chain block (`cost_model/learned/tile_recurrence.py`) help the tile ranker?
`rank-all-d10` fitted on the code feature set s18, and on s18 + the recurrence block, on the suite's
split (random or program, test fraction 0.25) training kernels + every kernel of the three synthetic
folders; both scored on the same test kernels (`bench_costmodel.score`), per split seed.

    PYTHONPATH=. python benchmarks/bench_tile_recurrence.py cache tile_s23 tile_syn24 tile_syn25 tile_syn26   # the block, from the kept assembly
    PYTHONPATH=. python benchmarks/bench_tile_recurrence.py random 116,117 out/s26/rec_random.json

`cache` reads each folder's code cache (`out/<folder>_code`, its zlib'd assembly) and writes the block per
kernel file to `out/s26/rec_<folder>.npz`; the scoring reads those.
"""
import json
import sys

import numpy as np
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_costmodel import score
from cost_model.learned.data import split_records
from cost_model.learned.tpugraphs import load_dir
from cost_model.learned.tile_code_features import extended_records
from cost_model.learned.tile_rankers import make_tile_ranker
from passes.autotune.search import random_search_measurements


def fill_cache(folders: list[str]) -> None:
    from cost_model.learned.tile_code_features import cache_path, cached_asm, compute_functions
    from cost_model.learned.tile_nest_features import loop_tables
    from cost_model.learned.tile_recurrence import RECURRENCE_FEATURES, recurrence_features

    for folder in folders:
        out = {}
        for r in load_dir(f"out/{folder}"):
            asms = cached_asm(cache_path(f"out/{folder}_code", r), r)
            if asms is None:
                continue
            rows = []
            for a in asms:
                if not a:  # a compile that timed out: missing, as in the code cache
                    rows.append(np.full(RECURRENCE_FEATURES, np.nan, dtype=np.float32))
                    continue
                parsed = compute_functions(a)
                rows.append(recurrence_features(parsed, loop_tables(parsed)))
            out[Path(r.path).name] = np.stack(rows)
        np.savez_compressed(f"out/s26/rec_{folder}.npz", **out)
        print(folder, len(out), flush=True)


if sys.argv[1] == "cache":
    fill_cache(sys.argv[2:])
    sys.exit(0)
split, seeds, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
cols = sys.argv[4] if len(sys.argv) > 4 else "all"
def load(folder):
    recs = load_dir(f"out/{folder}")
    ext = extended_records(recs, f"out/{folder}_code", "s18")
    rec = np.load(f"out/s26/rec_{folder}.npz")
    both = []
    for e in ext:
        if e is None:
            both.append((None, None)); continue
        block = rec[Path(e.path).name]
        if cols != "all":
            block = block[:, [int(c) for c in cols.split(":")]]
        both.append((e, replace(e, config_feat=np.concatenate([e.config_feat, block], axis=1).astype(np.float32))))
    return recs, both
records, base = load("tile_s23")
extra = [b for f in ("tile_syn24", "tile_syn25", "tile_syn26") for b in load(f)[1] if b[0] is not None]
rows = {}
for seed in seeds:
    tr, te = split_records(records, split, test_fraction=0.25, seed=seed)
    tr = [base[i] for i in tr if base[i][0] is not None]; te = [base[i] for i in te if base[i][0] is not None]
    need = [random_search_measurements(r.config_runtime, r.config_runtime.min() * 1.02, seed=seed) for r, _ in te]
    for k, name in ((0, "s18"), (1, "s18+rec")):
        model = make_tile_ranker("rank-all-d10", seed=seed).fit([p[k] for p in tr + extra])
        test = [p[k] for p in te]
        row = score(name, [model.predict(r) for r in test], test, need)
        rows.setdefault(name, []).append(row)
        print(f"seed {seed} {split} {name:8s} top-1 {row['top1']:.2%} top-5 {row['top5']:.2%} tau {row['kendall']:.4f} tuner {row['tuner_measurements']:.2f}", flush=True)
        kinds = {}
        for key, m in row["per_kernel"].items():
            kinds.setdefault(key.split(":")[1], []).append(m["kendall"])
        print("   ", {k: round(float(np.mean(v)), 3) for k, v in sorted(kinds.items())}, flush=True)
Path(out).write_text(json.dumps(rows), encoding="utf-8")
