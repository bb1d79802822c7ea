"""Node features of kernel graphs, shared by the tile and fusion datasets.

A node: its op kind (an opcode id, embedded by the model), output shape (log2 of up to 6 dims,
right-aligned, and of the element count), rank, row-major strides (log2, 6 slots), layout
one-hot, dtype one-hot, reduction extents (log2, 3 slots, and their product) and, on the node
that does the kernel's work, log2 of the kernel's FLOPs.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from graph_ir.op_kinds import OpKind

__all__ = ["DTYPE_COLUMNS", "LAYOUTS", "NODE_FEATURES", "OPCODES", "node_features", "opcode_id"]

# Tile-stage names first that are not op kinds, then every canonical op kind.
_STAGE_OPS = ("input", "pad", "fma", "exp", "depthwise_conv")
OPCODES: tuple[str, ...] = _STAGE_OPS + tuple(k.value for k in OpKind if k.value not in _STAGE_OPS)
_OPCODE_ID = {name: i for i, name in enumerate(OPCODES)}
LAYOUTS = ("row_major", "NHWC", "NCHW", "HWIO", "OIHW")
_DTYPES = ("float32", "bfloat16", "float16")  # + "other"
_DIMS = 6
NODE_FEATURES = _DIMS + 2 + _DIMS + len(LAYOUTS) + len(_DTYPES) + 1 + 3 + 1 + 1
_DTYPE_BASE = _DIMS + 2 + _DIMS + len(LAYOUTS)
DTYPE_COLUMNS = slice(_DTYPE_BASE, _DTYPE_BASE + len(_DTYPES) + 1)  # the element-type one-hot (float32, bfloat16, float16, other)


def opcode_id(op: str) -> int:
    """Index of `op` (a tile stage name or an OpKind value); unknown ops share the last id."""
    return _OPCODE_ID.get(op, len(OPCODES))


def node_features(shape: Sequence[int], *, layout: str = "row_major", dtype: str = "float32", reduce_extents: Sequence[int] = (), flops: float = 0.0) -> np.ndarray:
    out = np.zeros(NODE_FEATURES, dtype=np.float32)
    dims = [max(int(d), 1) for d in shape][-_DIMS:]
    if dims:
        out[_DIMS - len(dims) : _DIMS] = np.log2(dims)
    out[_DIMS] = math.log2(max(math.prod(dims), 1)) if dims else 0.0
    out[_DIMS + 1] = len(shape)
    strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
    base = _DIMS + 2
    if strides:
        out[base + _DIMS - len(strides) : base + _DIMS] = np.log2(strides)
    base += _DIMS
    if layout in LAYOUTS:
        out[base + LAYOUTS.index(layout)] = 1.0
    base += len(LAYOUTS)
    if dtype in _DTYPES:
        out[base + _DTYPES.index(dtype)] = 1.0
    else:
        out[base + len(_DTYPES)] = 1.0
    base += len(_DTYPES) + 1
    extents = [max(int(e), 1) for e in reduce_extents][:3]
    if extents:
        out[base : base + len(extents)] = np.log2(extents)
    out[base + 3] = math.log2(max(math.prod(extents), 1)) if extents else 0.0
    out[base + 4] = math.log2(flops) if flops > 1 else 0.0
    return out
