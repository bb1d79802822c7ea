"""Merge fusion collections that share a paired reference into one dataset folder.

A referenced fusion collection (`collect_fusion_dataset(..., reference_graph=...)`) labels every
configuration by the median ratio of its time to the reference fusion's, times ONE scale per
collection: the `SCALE_QUANTILE` quantile over its graphs of the reference's median seconds. Two
collections with the same reference graph and seed time the same reference fusion, so their
ratios are comparable, but their scales are not the same number (each is a percentile over a
different set of graph processes, taken at a different time of the machine). Merging therefore
re-expresses every file in one scale: label x (target scale / the file's own scale), i.e. the
same ratio times the target's seconds. The default target is the first source's scale, so the
first collection's labels are copied unchanged and the others are moved onto its unit.

`refeaturize=True` (`costmodel merge --refeaturize`, eleventh session) also recomputes every
file's per-node convolution attributes (`node_conv_feat`, `conv_features`) from the graph
rebuilt by name (`fusion_graphs.fusion_graph`: the programs are deterministic), after checking
that the rebuilt graph's node features, opcodes and edges equal the file's, so files collected
before the column existed gain it without being measured again.

`add_conv_times` (`costmodel conv-times DIR`, twelfth session) gives every file of a folder the
`node_conv_time` column: each graph rebuilt by name (the same check), its convs compiled and
timed alone through XLA (`cost_model.measure.conv_timing.ConvTimer`: every distinct conv of the
folder in one interleaved harness pass, cached in the folder's SQLite cache), the seconds written
per node. The labels are not touched. Merging moves referenced conv times onto the target scale
with the labels and drops raw ones (not in any collection's unit).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.learned.tpugraphs import DatasetError, load_dir, save_npz
from cost_model.measure.harness import noise_floor
from graph_ir.io.atomic import atomic_path

__all__ = ["add_conv_times", "conv_timer_for", "merge_fusion_collections", "rebuilt_nodes", "refeaturize_record"]

logger = logging.getLogger(__name__)


def _summary(folder: Path) -> dict[str, Any]:
    path = folder / "dataset.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DatasetError(f"cannot read the collection summary ({error})", file=os.fspath(path)) from error
    reference = summary.get("reference") or {}
    if not reference.get("graph") or not reference.get("scale_s"):
        raise DatasetError("not a referenced fusion collection (no reference.graph / reference.scale_s)", file=os.fspath(path))
    return summary


def rebuilt_nodes(record: Any, purpose: str = "re-featurize it") -> list[Any]:
    """The nodes (`node_order`) of `record`'s graph rebuilt by name; `DatasetError` when the graph
    is not a known fusion program or no longer matches the file (node features, opcodes, edges)."""
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.learned.fusion_features import fusion_graph_arrays

    try:
        nodes = node_order(fusion_graph(record.name))
    except (KeyError, ValueError) as error:
        raise DatasetError(f"cannot rebuild graph {record.name!r} to {purpose}: {error}", file=record.path) from error
    feats, opcodes, edges = fusion_graph_arrays(nodes)
    if (opcodes.shape != record.node_opcode.shape or not (opcodes == record.node_opcode).all() or edges.shape != record.edge_index.shape
            or not (edges == record.edge_index).all() or not np.allclose(feats, record.node_feat, atol=1e-5)):
        raise DatasetError(f"graph {record.name!r} rebuilt today differs from the file's (node_feat / node_opcode / edge_index): "
                           f"cannot {purpose}", file=record.path)
    return nodes


def refeaturize_record(record: Any) -> Any:
    """Set `record.node_conv_feat` from its graph rebuilt by name (`rebuilt_nodes`' check first)."""
    from cost_model.learned.conv_features import fusion_conv_features

    record.node_conv_feat = fusion_conv_features(rebuilt_nodes(record))
    return record


def conv_timer_for(folder: str | os.PathLike[str], cache: Any, *, repeats: int = 11, seed: int = 0) -> Any:
    """The `ConvTimer` for a fusion dataset folder: with the collection's paired reference (its
    `dataset.json`: reference graph, seed, scale) when it has one, so the conv times are in the
    labels' unit; raw seconds (min) otherwise."""
    from cost_model.measure.conv_timing import ConvTimer

    path = Path(folder) / "dataset.json"
    summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    reference = summary.get("reference") or {}
    if not reference.get("graph") or not reference.get("scale_s"):
        return ConvTimer(cache, repeats=repeats, seed=seed)
    from compiler_opt.costmodel.fusion_collect import reference_runner

    return ConvTimer(cache, repeats=repeats, seed=seed, reference=reference_runner(reference["graph"], seed=int(summary.get("seed", 0) or 0)),
                     reference_name=reference["graph"], scale_s=float(reference["scale_s"]))


def add_conv_times(folder: str | os.PathLike[str], timer: Any) -> dict[str, Any]:
    """Write `node_conv_time` (each conv node's seconds alone, `timer`: a `conv_timing.ConvTimer`)
    into every `.npz` of a fusion dataset folder, every distinct conv of the folder timed in one
    pass. Files whose graph has no conv get an all-zero column. Returns {"files", "convs"
    (distinct specs), "measured" (timed now, the rest came from the cache), "seconds" (spec text
    -> seconds)}; `DatasetError` (before any file is written) when a graph cannot be rebuilt."""
    from cost_model.measure.conv_timing import conv_spec

    records = load_dir(folder)
    nodes = {record.name: rebuilt_nodes(record, "time its convs") for record in records}
    specs = [spec for graph in nodes.values() for spec in map(conv_spec, graph) if spec is not None]
    seconds = timer.time(specs)  # one interleaved pass over the folder's distinct convs
    for record in records:
        record.node_conv_time = timer.node_times(nodes[record.name])  # all known now: read, not timed
        record.meta["conv_times"] = {"backend": timer.harness.backend, "machine": timer.harness.machine, "repeats": timer.harness.repeats,
                                     "statistic": timer.harness.statistic, "scale_s": timer.scale_s}
        save_npz(record, record.path)
    logger.info("%s: conv times in %d files, %d distinct convs (%d timed now)", folder, len(records), len(seconds), timer.measured)
    return {"files": len(records), "convs": len(seconds), "measured": timer.measured, "seconds": seconds}


def merge_fusion_collections(sources: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str], *,
                             scale_s: float | None = None, refeaturize: bool = False) -> dict[str, Any]:
    """Copy every graph file of `sources` into `out_dir` with its labels in one scale (`scale_s`,
    default the first source's `reference.scale_s`) and write a `dataset.json` naming the sources,
    their scales and the factor each was multiplied by. Raises `DatasetError` when the sources'
    reference graphs or seeds differ, a graph name occurs twice, or a file's scale is not its
    collection's."""
    folders = [Path(s) for s in sources]
    if not folders:
        raise DatasetError("no source collections to merge", file=os.fspath(out_dir))
    summaries = [_summary(f) for f in folders]
    refs = {(s["reference"]["graph"], s.get("seed")) for s in summaries}
    if len(refs) != 1:
        raise DatasetError(f"the sources were collected against different references / seeds: {sorted(map(str, refs))}", file=os.fspath(folders[1]))
    target = float(scale_s if scale_s is not None else summaries[0]["reference"]["scale_s"])
    out = Path(out_dir)
    if out.resolve() in {f.resolve() for f in folders}:
        raise DatasetError("the merged folder must not be one of the sources", file=os.fspath(out))
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    retest: list[tuple[float, float]] = []
    per_graph: dict[str, float] = {}
    described = []
    for folder, summary in zip(folders, summaries):
        own = float(summary["reference"]["scale_s"])
        factor = target / own
        records = load_dir(folder)
        for record in records:
            name = record.name
            if name in seen:
                raise DatasetError(f"graph {name} is in two sources ({seen[name]} and {folder})", file=os.fspath(folder / f"{name}.npz"))
            seen[name] = os.fspath(folder)
            reference = dict(record.meta.get("reference") or {})
            if reference.get("scale") is None or not np.isclose(float(reference["scale"]), own, rtol=1e-9):
                raise DatasetError(f"labels not in the collection's scale {own!r} (file says {reference.get('scale')!r})",
                                   file=os.fspath(folder / f"{name}.npz"))
            record.config_runtime = np.asarray(record.config_runtime, dtype=np.float64) * factor
            record.config_runtime_normalizers = np.full_like(record.config_runtime, record.config_runtime.min())
            for key in ("config_runtime_median", "config_runtime_min"):
                record.meta[key] = [float(v) * factor for v in record.meta.get(key, [])]
            record.meta["retest"] = [[float(a) * factor, float(b) * factor] for a, b in record.meta.get("retest", [])]
            record.meta["reference"] = reference | {"scale": target, "collection_scale": own, "collection": folder.name}
            retest += [(a, b) for a, b in record.meta["retest"]]
            if record.node_conv_time is not None:  # conv times in the collection's unit move with the labels
                timed = record.meta.get("conv_times") or {}
                if np.isclose(float(timed.get("scale_s", 0.0)), own, rtol=1e-9):
                    record.node_conv_time = record.node_conv_time * factor
                    record.meta["conv_times"] = timed | {"scale_s": target}
                else:  # raw seconds (no reference): not in any collection's unit
                    logger.warning("%s: node_conv_time is not in the collection's unit (raw seconds): dropped; run `costmodel conv-times` "
                                   "on the merged folder", name)
                    record.node_conv_time = None
                    record.meta.pop("conv_times", None)
            if refeaturize:
                refeaturize_record(record)
            save_npz(record, out / f"{name}.npz")
        per_graph |= summary["reference"].get("per_graph_s", {})
        described.append({"folder": folder.name, "kernels": len(records), "scale_s": own, "factor": factor,
                          "configs_per_kernel": summary.get("configs_per_kernel"), "noise_floor": summary.get("noise_floor")})
        logger.info("%s: %d graphs, labels x %.4f (scale %.3g s -> %.3g s)", folder, len(records), factor, own, target)
    merged = {"kernels": len(seen), "seed": summaries[0].get("seed"), "merged_from": described, "refeaturized": refeaturize,
              "reference": {"graph": summaries[0]["reference"]["graph"], "scale_s": target, "per_graph_s": per_graph},
              "machine": summaries[0].get("machine"), "noise_floor": noise_floor(retest)}
    with atomic_path(out / "dataset.json") as tmp:  # never a half-written summary beside the files
        tmp.write_text(json.dumps(merged, indent=1), encoding="utf-8")
    return merged
