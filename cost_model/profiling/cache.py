"""A SQLite cache of measurements (stdlib sqlite3), keyed by (signature, backend, machine).

The file is `profiles.sqlite` under $COMPILER_OPT_CACHE, else ~/.cache/compiler-opt (the
workloads cache uses the same folder). Raw samples are stored as JSON beside min and median, so
a later analysis can re-derive any statistic; the signature text is stored to make rows readable.
One connection per cache object; several processes may share the file (SQLite locks it).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from cost_model.profiling.timing import Measurement

__all__ = ["ProfileCache", "default_cache_dir"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    key TEXT NOT NULL,
    backend TEXT NOT NULL,
    machine TEXT NOT NULL,
    min_s REAL NOT NULL,
    median_s REAL NOT NULL,
    repeats INTEGER NOT NULL,
    samples TEXT NOT NULL,
    signature TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (key, backend, machine)
)
"""


def default_cache_dir() -> Path:
    """$COMPILER_OPT_CACHE, else $XDG_CACHE_HOME/compiler-opt, else ~/.cache/compiler-opt."""
    override = os.environ.get("COMPILER_OPT_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compiler-opt"


class ProfileCache:
    """Measurements by (key, backend, machine); `get` counts hits and misses."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            folder = default_cache_dir()
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "profiles.sqlite"
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, timeout=30.0)
        self._db.execute(_SCHEMA)
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str, backend: str, machine: str) -> Measurement | None:
        row = self._db.execute(
            "SELECT samples FROM measurements WHERE key = ? AND backend = ? AND machine = ?", (key, backend, machine)
        ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Measurement.from_samples(json.loads(row[0]), cached=True)

    def put(self, key: str, backend: str, machine: str, measurement: Measurement, signature: str = "") -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                backend,
                machine,
                measurement.min_s,
                measurement.median_s,
                len(measurement.samples),
                json.dumps(measurement.samples),
                signature,
                time.time(),
            ),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ProfileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
