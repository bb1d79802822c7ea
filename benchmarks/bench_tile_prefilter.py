"""The autotuner's code-blind prefilter, scored on a tile dataset's labels: what keeping only a fraction
of the candidates for the compiling ranker costs in the best of its top k.

    PYTHONPATH=. python benchmarks/bench_tile_prefilter.py out/tile_syn26 --code-features out/tile_syn26_code \
        --ranker out/s25/W.json [--fractions 0.25,0.5,0.75,1] [--top-k 7]

For every kernel of the folder (all its configurations are the candidates), the prefilter (`--prefilter`,
default the packaged code-blind `tile_gbdt.ubj`) orders them on the stored config features, the best
`fraction` (at least top-k) go to the ranker (a gbdt-ens file read with the folder's compiled-code
features), and the scores are combined as `autotune` combines them (`passes.autotune.tile.prefiltered_scores`).
Per fraction: the mean best-of-top-k slowdown over the kernel's best, the kernels within 2% of it, the
mean top-1 slowdown, and the share of candidates the ranker compiles. Neither model should have been
fitted on the folder's kernels. Prints a markdown table (overall and per kind); writes
benchmarks/results/bench_tile_prefilter.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_tile_prefilter.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a tile dataset folder (.npz kernels)")
    parser.add_argument("--code-features", required=True, help="its compiled-code feature cache (bench_tile_code_features.py)")
    parser.add_argument("--ranker", required=True, help="a gbdt-ens file fitted with code features")
    parser.add_argument("--prefilter", default=None, help="a code-blind gbdt file (.ubj); default: the packaged one")
    parser.add_argument("--fractions", default="0.25,0.5,0.75,1")
    parser.add_argument("--top-k", type=int, default=7)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)

    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.metrics import top_k_slowdown
    from cost_model.learned.predictor import load_tile_ranker
    from cost_model.learned.tile_code_features import extended_records
    from cost_model.learned.tpugraphs import load_dir
    from passes.autotune.tile import compiles_candidates, prefilter_keep, prefiltered_scores

    try:
        fractions = [float(f) for f in args.fractions.split(",") if f]
    except ValueError:
        parser.error(f"--fractions takes comma-separated numbers, got {args.fractions!r}")
    if not fractions or any(not 0.0 < f <= 1.0 for f in fractions):
        parser.error(f"--fractions must lie in (0, 1], got {args.fractions!r}")
    ranker = GbdtEnsembleTilePredictor.load(args.ranker)
    if not compiles_candidates(ranker):
        parser.error(f"--ranker {args.ranker}: fitted without code features, so it compiles nothing and needs no prefilter")
    blind = load_tile_ranker("gbdt", args.prefilter)
    feature_set = ranker.members[0].extra.get("code_feature_set", "s16")
    records = load_dir(args.data)
    extended = extended_records(records, args.code_features, feature_set)
    pairs = [(r, e) for r, e in zip(records, extended, strict=True) if e is not None]
    if not pairs:
        parser.error(f"{args.code_features}: no kernel of {args.data} has cached code features ({feature_set})")
    rows = []
    for record, full in pairs:
        runtime = np.asarray(record.config_runtime, dtype=np.float64)
        first = blind.rank_rows(record.node_feat, record.node_opcode, record.config_feat)
        whole = ranker.rank_rows(full.node_feat, full.node_opcode, full.config_feat)
        row = {"kernel": record.meta.get("kernel", Path(record.path).stem), "kind": record.meta.get("kind", "?"), "configs": len(runtime), "by_fraction": {}}
        for fraction in fractions:
            keep = prefilter_keep(len(runtime), fraction, args.top_k)
            scores = prefiltered_scores(first, lambda kept, w=whole: w[kept], keep)
            row["by_fraction"][str(fraction)] = {"topk": top_k_slowdown(scores, runtime, args.top_k), "top1": top_k_slowdown(scores, runtime, 1),
                                                 "compiled": keep / len(runtime)}
        rows.append(row)
    print(f"{Path(args.data).name}: {len(rows)} kernels with code features ({len(records) - len(rows)} without), ranker {Path(args.ranker).name}, "
          f"prefilter {Path(args.prefilter).name if args.prefilter else 'tile_gbdt.ubj (packaged)'}, top {args.top_k}")
    print(table(rows, fractions, args.top_k))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv[1:] if argv is None else argv, "rows": rows}, indent=1), encoding="utf-8")
    return 0


def table(rows: list[dict], fractions: list[float], top_k: int) -> str:
    """Overall and per-kind means for each fraction."""
    lines = [f"\n| kept for the ranker | best of top {top_k} over the best (mean) | kernels within 2% | top-1 (mean) | candidates compiled |",
             "|---:|---:|---:|---:|---:|"]
    for fraction in fractions:
        cells = [r["by_fraction"][str(fraction)] for r in rows]
        lines.append(f"| {fraction:g} | +{np.mean([c['topk'] for c in cells]):.2%} | {sum(c['topk'] <= 0.02 for c in cells)} of {len(cells)} | "
                     f"{np.mean([c['top1'] for c in cells]):.1%} | {np.mean([c['compiled'] for c in cells]):.0%} |")
    kinds = sorted({r["kind"] for r in rows})
    lines += ["", f"per kind, best of top {top_k} (mean) / kernels within 2%:", "",
              "| kept | " + " | ".join(f"{k} ({sum(r['kind'] == k for r in rows)})" for k in kinds) + " |", "|---:|" + "---|" * len(kinds)]
    for fraction in fractions:
        cells = []
        for kind in kinds:
            mine = [r["by_fraction"][str(fraction)]["topk"] for r in rows if r["kind"] == kind]
            cells.append(f"+{np.mean(mine):.1%} / {sum(m <= 0.02 for m in mine)}")
        lines.append(f"| {fraction:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
