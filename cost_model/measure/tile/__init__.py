"""Tile kernels with real knobs: TVM TensorIR, compiled for this CPU through LLVM (needs the
`tune` extra: apache-tvm). Importing this package does not import TVM."""

from __future__ import annotations

from cost_model.measure.tile.kernels import KINDS, KernelSpec, build_kernel
from cost_model.measure.tile.space import ORDERS, UNROLL_STEPS, TileConfig, TileSpace, config_features

__all__ = ["KINDS", "ORDERS", "UNROLL_STEPS", "KernelSpec", "TileConfig", "TileSpace", "build_kernel", "config_features"]
