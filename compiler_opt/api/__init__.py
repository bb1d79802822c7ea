"""The public Python API: `optimize(model, target=..., tasks=..., method=..., budget_s=..., check=...,
seed=...) -> OptimizeResult` (optimize.py), with model loading (loading.py) and the numerical
check against onnxruntime / XLA / TensorFlow (numerics.py)."""

from __future__ import annotations

from compiler_opt.api.loading import ModelFormatError, parse_input_shape
from compiler_opt.api.numerics import NumericsCheck, check_numerics
from compiler_opt.api.optimize import (
    AUTO_METHODS,
    CLASSICAL_AUTO_METHODS,
    GO_AVAILABLE,
    OptimizeError,
    OptimizeResult,
    PassRecord,
    optimize,
)

__all__ = [
    "AUTO_METHODS",
    "CLASSICAL_AUTO_METHODS",
    "GO_AVAILABLE",
    "ModelFormatError",
    "NumericsCheck",
    "OptimizeError",
    "OptimizeResult",
    "PassRecord",
    "check_numerics",
    "optimize",
    "parse_input_shape",
]
