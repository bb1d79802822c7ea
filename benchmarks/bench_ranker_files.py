"""Tile ranker files on disk: size, the warm starts they read, load time and scoring time; optionally every score
against the same-named files of another folder (e.g. the files before `costmodel link-start` rewrote them).

    PYTHONPATH=. python benchmarks/bench_ranker_files.py                       # every shipped tile_gbdt_ens*.json
    PYTHONPATH=. python benchmarks/bench_ranker_files.py cost_model/learned/tile_gbdt_ens.znver5.json \\
        --data out/tile_z5_s23 --code-features out/tile_z5_s23_code --against out/s42/orig --json out/s42/files.json

Times are medians of `--repeats` runs in this process (a file's load includes the files its starts refer to).
Scoring: the ranker's `predict` on each kernel of `--data` (with `--code-features` when the ranker reads them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _chain(path: Path) -> list[str]:
    """The files a ranker file's warm starts refer to (directly), as written in it."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return sorted({str(entry["file"]) for entry in doc.get("starts", []) if "file" in entry})


def _records(data: str | None, code_features: str | None, feature_set: str | None, limit: int) -> list[Any]:
    if not data:
        return []
    from cost_model.learned.tile_code_features import extended_records
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(data)[:limit] if limit else load_dir(data)
    if feature_set is None:
        return records
    if not code_features:
        raise SystemExit(f"the ranker reads code feature set {feature_set!r}: give --code-features for {data}")
    return [r for r in extended_records(records, code_features, feature_set) if r is not None]


def main(argv: list[str] | None = None) -> int:
    from cost_model.learned.gbdt_ensemble import PACKAGED_GBDT_ENSEMBLE, GbdtEnsembleTilePredictor
    from cost_model.learned.gbdt_predictor import code_feature_set_read

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="gbdt-ens ranker files (default: every shipped tile_gbdt_ens*.json)")
    parser.add_argument("--data", help="a tile dataset folder whose kernels are scored")
    parser.add_argument("--code-features", help="--data's code feature cache (for rankers that read compiled-code features)")
    parser.add_argument("--limit", type=int, default=0, help="score only the first N kernels of --data (0: all)")
    parser.add_argument("--against", help="a folder of same-named ranker files whose scores every file's must equal")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files] or sorted(PACKAGED_GBDT_ENSEMBLE.parent.glob("tile_gbdt_ens*.json"))
    rows = []
    print(f"{'file':42s} {'MB':>6s} {'starts read from':32s} {'load s':>7s} {'ms/kernel':>9s} {'vs --against':>24s}")
    for path in files:
        loads = []
        for _ in range(args.repeats):
            began = time.perf_counter()
            ranker = GbdtEnsembleTilePredictor.load(path)
            loads.append(time.perf_counter() - began)
        records = _records(args.data, args.code_features, code_feature_set_read(ranker.extra), args.limit)
        per_kernel = []
        for _ in range(args.repeats if records else 0):
            began = time.perf_counter()
            for record in records:
                ranker.predict(record)
            per_kernel.append((time.perf_counter() - began) / len(records))
        row: dict[str, Any] = {"file": path.name, "mb": path.stat().st_size / 1e6, "starts_from": _chain(path),
                               "load_s": statistics.median(loads), "score_ms": 1e3 * statistics.median(per_kernel) if per_kernel else None,
                               "kernels": len(records)}
        if args.against and records:
            other = GbdtEnsembleTilePredictor.load(Path(args.against) / path.name)
            gaps = [float(np.abs(ranker.predict(r) - other.predict(r)).max()) for r in records]
            picks = sum(int(np.argmin(ranker.predict(r)) == np.argmin(other.predict(r))) for r in records)
            row |= {"largest_difference": max(gaps), "same_first_pick": picks}
        rows.append(row)
        score = f"{row['score_ms']:.2f}" if row["score_ms"] is not None else "-"
        versus = f"diff {row['largest_difference']:.3g}, pick {row['same_first_pick']}/{len(records)}" if "largest_difference" in row else "-"
        print(f"{path.name:42s} {row['mb']:6.1f} {', '.join(row['starts_from']) or '-':32s} {row['load_s']:7.2f} {score:>9s} {versus:>24s}")
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv[1:] if argv is None else argv, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
