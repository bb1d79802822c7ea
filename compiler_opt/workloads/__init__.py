"""Benchmark workloads: model code for real networks and generators for synthetic graphs.

The registry (`list_workloads`, `build_workload`, `export_workload`; see `registry.py`) names
the suite: RNNLM, GNMT, Transformer-XL, Inception-V3, ResNet-50, NASNet/AmoebaNet, WaveNet,
BERT-base (and DenseNet-121), each as a training step and as inference. One model per module;
the JAX ones share `_jax.py`. Model modules import their framework (JAX, TensorFlow, PyTorch)
when they are built, not when this package is imported. Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "MODES",
    "Workload",
    "WorkloadError",
    "build_workload",
    "cache_dir",
    "export_workload",
    "get_workload",
    "list_workloads",
]


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


# After cache_dir: the registry looks it up when it builds.
from compiler_opt.workloads.registry import (  # noqa: E402
    MODES,
    Workload,
    WorkloadError,
    build_workload,
    export_workload,
    get_workload,
    list_workloads,
)
