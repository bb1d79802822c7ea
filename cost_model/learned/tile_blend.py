"""Several fitted gbdt-ens tile rankers as one (fifty-fifth session): every member of every file, each z-scored over a
kernel's candidates as its own file does it, at its weight in its file times its file's weight. Nothing is fitted,
so a blend of files fitted on different CPUs can serve a CPU none of them has enough kernels of (RESULTS (i),
fifty-fifth session).

    ranker = blend_files([("tile_gbdt_ens.json", 1.0), ("tile_gbdt_ens.znver5.json", 1.0)])
    ranker.save("blend.json", link_members=True)   # members stored as checked references to the two files
    compiler-opt costmodel blend tile_gbdt_ens.json tile_gbdt_ens.znver5.json -o blend.json

A file's own weights are kept inside it, so at equal file weights each file counts as its own members' weighted sum.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
from cost_model.learned.gbdt_predictor import code_feature_set_read
from cost_model.learned.tpugraphs import DatasetError

__all__ = ["blend", "blend_files", "parse_file_weight"]


def blend(rankers: Sequence[tuple[str, GbdtEnsembleTilePredictor, float]]) -> GbdtEnsembleTilePredictor:
    """One ensemble of `rankers` ((name, loaded file, weight) each). The files must read the same compiled-code
    features (a candidate's row is built once for every member) and carry no per-kind weights or re-ranker, which
    a blend has no single place for; DatasetError naming the file otherwise."""
    if len(rankers) < 2:
        raise ValueError(f"a blend needs at least two files, got {len(rankers)}")
    first_name, first, _ = rankers[0]
    reads = code_feature_set_read(first.extra)
    members, weights, parts = [], [], []
    for name, ranker, weight in rankers:
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"{name}: a file's weight must be a positive number, got {weight}")
        if code_feature_set_read(ranker.extra) != reads:
            raise DatasetError(f"reads code feature set {code_feature_set_read(ranker.extra)!r}, {first_name} {reads!r}: "
                               "a blend's members must read the same rows", file=name)
        if ranker.kind_weights or ranker.reranker is not None:
            raise DatasetError("has per-kind member weights or a re-ranker, which a blend cannot keep", file=name)
        members += ranker.members
        weights += [weight * w for w in ranker.weights]
        parts.append({"file": os.path.basename(name), "weight": weight} | {k: ranker.extra[k] for k in ("hosts", "timing_protocols", "element_types")
                                                                            if k in ranker.extra})
    extra: dict[str, Any] = {k: first.extra[k] for k in ("code_features", "code_feature_set") if k in first.extra}
    extra["hosts"] = sorted({h for part in parts for h in part.get("hosts", [])})
    extra["timing_protocols"] = sorted({p for part in parts for p in part.get("timing_protocols", [])})
    extra["blend"] = parts
    return GbdtEnsembleTilePredictor(members, weights, extra)


def blend_files(files: Sequence[tuple[str, float]]) -> GbdtEnsembleTilePredictor:
    """`blend` of gbdt-ens files ((path, weight) each), each loaded once."""
    return blend([(os.fspath(path), GbdtEnsembleTilePredictor.load(path), float(weight)) for path, weight in files])


def parse_file_weight(text: str) -> tuple[str, float]:
    """`costmodel blend`'s FILE[:WEIGHT] (weight 1 when none is given). A colon followed by something that is not a
    number is part of the file's name."""
    name, sep, weight = text.rpartition(":")
    if sep and name:
        try:
            return name, float(weight)
        except ValueError:
            pass
    return text, 1.0
