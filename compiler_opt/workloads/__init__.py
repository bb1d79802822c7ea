"""Benchmark workloads: model code for real networks and generators for synthetic graphs.

Modules here are imported on demand: `densenet` needs PyTorch, `synthetic` only onnx/numpy.
Every workload is built from code with seeded random weights; nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """Where generated workloads are cached: $COMPILER_OPT_CACHE, else $XDG_CACHE_HOME/compiler-opt."""
    override = os.environ.get("COMPILER_OPT_CACHE")
    if override:
        path = Path(override)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "compiler-opt"
    path.mkdir(parents=True, exist_ok=True)
    return path
