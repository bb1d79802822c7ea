"""Datasets in the TpuGraphs `.npz` schema (Phothilimthana et al., 2023), read and written.

One file per kernel (tile task) or per graph (layout-style task, used here for fusion):
- `node_feat` float32 (N, F), `node_opcode` int (N,), `edge_index` int (E, 2) where row [u, v]
  means node u consumes the output of node v (TpuGraphs' convention);
- tile form: `config_feat` float32 (C, Fc), one knob vector per configuration of the kernel;
- layout form: `node_config_ids` int (M,) the configurable nodes, `node_config_feat`
  float32 (C, M, Fn) their features under each configuration;
- `config_runtime` (C,) and `config_runtime_normalizers` (C,): the runtime of every
  configuration and a per-configuration normalizer (TpuGraphs tile: the default config's time;
  here the kernel's best measured time, so runtime / normalizer >= 1).
Files written here add `meta` (a JSON string: kernel signature, program, machine, seeds, noise),
`config_text` (the configuration of each row) and, in fusion files since the eleventh session,
`node_conv_feat` float32 (N, K): per node the convolution attributes of
`conv_features.CONV_FEATURE_NAMES` (optional: files without it load with None), and since the twelfth
session `node_conv_time` float64 (N,): each conv node's runtime alone on the collecting machine
(seconds, `cost_model.measure.conv_timing`; 0 for other nodes, NaN for a conv not timed;
optional as well). A real TpuGraphs file lacks them and loads the same, with `program` taken
from the file name.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graph_ir.errors import CompilerOptError
from graph_ir.io.atomic import atomic_path

__all__ = ["DatasetError", "KernelRecord", "load_npz", "load_dir", "save_npz"]


class DatasetError(CompilerOptError):
    """A dataset file that does not follow the schema."""


@dataclass
class KernelRecord:
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    config_runtime: np.ndarray
    config_runtime_normalizers: np.ndarray
    config_feat: np.ndarray | None = None  # tile form
    node_config_ids: np.ndarray | None = None  # layout form
    node_config_feat: np.ndarray | None = None  # layout form
    config_text: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    node_conv_feat: np.ndarray | None = None  # optional per-node conv attributes (conv_features)
    node_conv_time: np.ndarray | None = None  # optional per-node seconds of each conv alone (conv_timing)

    @property
    def num_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    @property
    def name(self) -> str:
        return str(self.meta.get("kernel", Path(self.path).stem))

    @property
    def program(self) -> str:
        """What the held-out-program split groups by (TpuGraphs names files `<program>.npz`)."""
        return str(self.meta.get("program", Path(self.path).stem.split(":")[0]))

    @property
    def layout_form(self) -> bool:
        return self.node_config_ids is not None


_REQUIRED = ("node_feat", "node_opcode", "edge_index", "config_runtime")


def save_npz(record: KernelRecord, path: str | os.PathLike[str]) -> Path:
    """Write `record` (atomically; no pickled objects: strings are unicode arrays)."""
    arrays: dict[str, np.ndarray] = {
        "node_feat": np.asarray(record.node_feat, dtype=np.float32),
        "node_opcode": np.asarray(record.node_opcode, dtype=np.int64),
        "edge_index": np.asarray(record.edge_index, dtype=np.int64).reshape(-1, 2),
        "config_runtime": np.asarray(record.config_runtime, dtype=np.float64),
        "config_runtime_normalizers": np.asarray(record.config_runtime_normalizers, dtype=np.float64),
        "meta": np.array(json.dumps(record.meta, sort_keys=True)),
        "config_text": np.array(record.config_text, dtype=np.str_),
    }
    if record.config_feat is not None:
        arrays["config_feat"] = np.asarray(record.config_feat, dtype=np.float32)
    if record.node_config_ids is not None:
        arrays["node_config_ids"] = np.asarray(record.node_config_ids, dtype=np.int64)
        arrays["node_config_feat"] = np.asarray(record.node_config_feat, dtype=np.float32)
    if record.node_conv_feat is not None:
        arrays["node_conv_feat"] = np.asarray(record.node_conv_feat, dtype=np.float32)
    if record.node_conv_time is not None:
        arrays["node_conv_time"] = np.asarray(record.node_conv_time, dtype=np.float64)
    _check(arrays, str(path))
    target = Path(path)
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)
    return target


def _check(arrays: dict[str, np.ndarray], path: str) -> None:
    for name in _REQUIRED:
        if name not in arrays:
            raise DatasetError(f"missing array {name!r}", file=path)
    nodes = arrays["node_feat"].shape[0]
    if arrays["node_feat"].ndim != 2 or arrays["node_opcode"].shape != (nodes,):
        raise DatasetError(f"node_feat {arrays['node_feat'].shape} and node_opcode {arrays['node_opcode'].shape} disagree", file=path)
    edges = arrays["edge_index"]
    if edges.ndim != 2 or edges.shape[1] != 2 or (edges.size and (edges.min() < 0 or edges.max() >= nodes)):
        raise DatasetError(f"edge_index must be (E, 2) with node ids below {nodes}", file=path)
    conv = arrays.get("node_conv_feat")
    if conv is not None and (conv.ndim != 2 or conv.shape[0] != nodes):
        raise DatasetError(f"node_conv_feat {conv.shape} must be ({nodes}, K): one row per node", file=path)
    seconds = arrays.get("node_conv_time")
    if seconds is not None:
        if seconds.shape != (nodes,):
            raise DatasetError(f"node_conv_time {seconds.shape} must be ({nodes},): one time per node", file=path)
        if not np.issubdtype(seconds.dtype, np.floating) or (seconds[~np.isnan(seconds)] < 0).any() or np.isinf(seconds).any():
            raise DatasetError("node_conv_time must hold seconds >= 0 (NaN: a conv not timed)", file=path)
    configs = arrays["config_runtime"].shape[0]
    if "config_feat" in arrays:
        if arrays["config_feat"].shape[0] != configs:
            raise DatasetError(f"config_feat has {arrays['config_feat'].shape[0]} rows, config_runtime {configs}", file=path)
    elif "node_config_feat" in arrays:
        ids, feat = arrays["node_config_ids"], arrays["node_config_feat"]
        if feat.ndim != 3 or feat.shape[0] != configs or feat.shape[1] != ids.shape[0] or (ids.size and ids.max() >= nodes):
            raise DatasetError(f"node_config_feat {feat.shape} does not match {configs} configs x {ids.shape[0]} nodes", file=path)
    else:
        raise DatasetError("neither config_feat (tile form) nor node_config_feat (layout form)", file=path)
    normalizers = arrays.get("config_runtime_normalizers")
    if normalizers is not None and normalizers.shape[0] != configs:
        raise DatasetError(f"config_runtime_normalizers has {normalizers.shape[0]} rows, config_runtime {configs}", file=path)


def load_npz(path: str | os.PathLike[str]) -> KernelRecord:
    """Read one file of this schema (ours or a real TpuGraphs one)."""
    path = os.fspath(path)
    if os.path.isfile(path) and not zipfile.is_zipfile(path):  # np.load would try it as a pickle and blame pickling, not the file
        raise DatasetError("not a readable .npz file: not a zip archive (empty, truncated or another format)", file=path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError) as error:
        raise DatasetError(f"not a readable .npz file: {error}", file=path) from error
    if "config_runtime_normalizers" not in arrays and "config_runtime" in arrays:
        arrays["config_runtime_normalizers"] = np.ones_like(arrays["config_runtime"], dtype=np.float64)
    _check(arrays, path)
    meta: dict[str, Any] = {}
    if "meta" in arrays:
        try:
            meta = json.loads(str(arrays["meta"]))
        except json.JSONDecodeError as error:
            raise DatasetError(f"meta is not JSON: {error}", file=path) from error
    config_feat = arrays["config_feat"].astype(np.float32) if "config_feat" in arrays else None
    if config_feat is not None and "is_reduce" in meta and "extents" in meta and "config_text" in arrays:
        # A tile file of ours: its knob features are recomputed from the stored configurations,
        # so files collected before a feature change train and predict like new ones.
        from cost_model.learned.tile_hw_features import HostCaches, host_caches
        from cost_model.measure.tile.space import refresh_config_features

        machine = meta.get("machine", {})
        # the caches of the machine that measured it where the file records them, else this one's
        host = HostCaches.from_dict(machine["caches"]) if isinstance(machine.get("caches"), dict) else host_caches(int(machine.get("threads", 1) or 1))
        config_feat = refresh_config_features([str(t) for t in arrays["config_text"]], meta["is_reduce"], meta["extents"],
                                              kind=str(meta.get("kind", "")), dims=meta.get("dims", ()), host=host).astype(np.float32)
    return KernelRecord(
        node_feat=arrays["node_feat"].astype(np.float32),
        node_opcode=arrays["node_opcode"].astype(np.int64),
        edge_index=arrays["edge_index"].astype(np.int64),
        config_runtime=arrays["config_runtime"].astype(np.float64),
        config_runtime_normalizers=arrays["config_runtime_normalizers"].astype(np.float64),
        config_feat=config_feat,
        node_config_ids=arrays["node_config_ids"].astype(np.int64) if "node_config_ids" in arrays else None,
        node_config_feat=arrays["node_config_feat"].astype(np.float32) if "node_config_feat" in arrays else None,
        config_text=[str(t) for t in arrays["config_text"]] if "config_text" in arrays else [],
        meta=meta,
        path=path,
        node_conv_feat=arrays["node_conv_feat"].astype(np.float32) if "node_conv_feat" in arrays else None,
        node_conv_time=arrays["node_conv_time"].astype(np.float64) if "node_conv_time" in arrays else None,
    )


def load_dir(folder: str | os.PathLike[str]) -> list[KernelRecord]:
    """Every `*.npz` under `folder` (sorted by name), skipping none silently: a bad file raises."""
    files = sorted(Path(folder).glob("*.npz"))
    if not files:
        raise DatasetError("no .npz files", file=os.fspath(folder))
    return [load_npz(f) for f in files]
