"""Compiled-code features kept on disk, so a second autotune of the same kernels compiles nothing to rank.

The measurement cache already makes a rerun of `autotune` measure nothing, but a ranker fitted with code
features compiles every candidate to rank it (0.2-0.5 s each, most of a kernel's tuning time). This
store keeps each candidate's features in SQLite keyed by everything they depend on: the LLVM target,
the TVM version, the code-feature version and set, the kernel signature and the configuration text.

It is opt-in and scoped: `TileTuner` opens one beside its measurement cache and activates it around
ranking (`active(store)`); `tile_code_features.configs_code_block` reads and fills the active store
from the calling thread only (the compiles may run on threads, the lookups do not).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CodeFeatureStore", "active", "current", "stored_block"]

_SCHEMA = "CREATE TABLE IF NOT EXISTS code_features (key TEXT PRIMARY KEY, width INTEGER NOT NULL, features BLOB NOT NULL)"
_current: CodeFeatureStore | None = None


class CodeFeatureStore:
    """Feature rows by (target, TVM, code-feature version and set, kernel, configuration)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, timeout=30.0)
        self._db.execute(_SCHEMA)
        self._db.commit()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(target_text: str, feature_set: str, signature: str, config_text: str) -> str:
        return f"{target_text}|{_versions()}|{feature_set}|{signature}|{config_text}"

    def get_many(self, keys: Sequence[str]) -> list[np.ndarray | None]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = list(keys[start:start + 500])
            marks = ",".join("?" * len(chunk))
            for key, width, blob in self._db.execute(f"SELECT key, width, features FROM code_features WHERE key IN ({marks})", chunk):
                row = np.frombuffer(blob, dtype=np.float32)
                if row.size == width:
                    found[key] = row.copy()
        rows = [found.get(k) for k in keys]
        self.hits += sum(r is not None for r in rows)
        self.misses += sum(r is None for r in rows)
        return rows

    def put_many(self, keys: Sequence[str], rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.float32)
        self._db.executemany("INSERT OR REPLACE INTO code_features VALUES (?, ?, ?)",
                             [(k, int(r.size), r.tobytes()) for k, r in zip(keys, rows, strict=True)])
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CodeFeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    """What the features depend on besides the target: TVM's version and the code-feature version."""
    import tvm

    from cost_model.learned.tile_code_features import CODE_FEATURE_VERSION

    return f"tvm={tvm.__version__}|v{CODE_FEATURE_VERSION}"


@contextmanager
def active(store: CodeFeatureStore | None) -> Iterator[CodeFeatureStore | None]:
    """Make `store` the one `configs_code_block` reads and fills while the block runs (None: no store)."""
    global _current
    before, _current = _current, store
    try:
        yield store
    finally:
        _current = before


def current() -> CodeFeatureStore | None:
    return _current


def stored_block(space: Any, configs: Sequence[Any], feature_set: str, compute: Any) -> np.ndarray:
    """`compute(missing configs)` for the configurations the active store lacks, the rest read from it;
    without an active store, `compute(configs)`."""
    store = current()
    if store is None:
        return compute(configs)
    from cost_model.measure.tile.runner import host_target_text

    target, signature = host_target_text(), space.kernel.spec.signature
    keys = [CodeFeatureStore.key(target, feature_set, signature, c.text()) for c in configs]
    rows = store.get_many(keys)
    missing = [i for i, r in enumerate(rows) if r is None]
    if missing:
        fresh = np.asarray(compute([configs[i] for i in missing]), dtype=np.float32)
        store.put_many([keys[i] for i in missing], fresh)
        for i, row in zip(missing, fresh, strict=True):
            rows[i] = row
    return np.stack(rows)
