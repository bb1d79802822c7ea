"""How far one computed output is from another: the comparison behind every numerical check (the
optimize check, `compiler_opt.api.numerics`, and the fusion autotuner's, `passes.autotune.fusion`).

Floats (bfloat16 and the float8 types through ml_dtypes too) and complex numbers agree within
atol + rtol * |want| element-wise, NaN equal to NaN and an infinity to the same infinity; the
tolerances are never below `ULPS` units in the last place of the output's own type, since a
rewrite that moves where a bf16 / f16 result is rounded changes it by an ulp or two. Integers,
booleans, strings and other objects must be equal. Shapes must match.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ULPS", "close", "epsilon", "excess", "is_float", "tolerances"]

ULPS = 4.0


def is_float(dtype: np.dtype) -> bool:
    """A real floating type, numpy's or ml_dtypes' (bfloat16, float8_*, float4_* are void-kind to numpy)."""
    return bool(np.issubdtype(dtype, np.floating)) or (dtype.kind == "V" and dtype.name.startswith(("bfloat16", "float")))


def epsilon(dtype: np.dtype) -> float:
    """Machine epsilon of a float or complex type; 0 for anything else."""
    if dtype.kind == "c":
        return float(np.finfo(dtype).eps)
    if not is_float(dtype):
        return 0.0
    if np.issubdtype(dtype, np.floating):
        return float(np.finfo(dtype).eps)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def tolerances(dtype: np.dtype, rtol: float, atol: float) -> tuple[float, float]:
    """(rtol, atol) for an output of `dtype`: the given ones, raised to `ULPS` ulps of the type."""
    few_ulps = ULPS * epsilon(dtype)
    return max(rtol, few_ulps), max(atol, few_ulps)


def excess(want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> tuple[float, float]:
    """(largest error over its tolerance, largest absolute error) of `got` against `want`: above 1
    is a difference. Exact types give 0 or inf; the absolute error is NaN where it has no meaning
    (strings, a shape mismatch)."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return float("inf"), float("nan")
    if want.size == 0:
        return 0.0, 0.0
    inexact = (is_float(want.dtype) or want.dtype.kind == "c") and (is_float(got.dtype) or got.dtype.kind in "cfiub")
    if inexact:
        kind = np.complex128 if want.dtype.kind == "c" or got.dtype.kind == "c" else np.float64
        w, g = want.astype(kind), got.astype(kind)
        same = (np.isnan(w) & np.isnan(g)) | (w == g)  # equal infinities too: inf - inf is NaN
        with np.errstate(invalid="ignore"):
            err = np.where(same, 0.0, np.abs(g - w))
        err = np.where(np.isnan(err), np.inf, err)
        rtol, atol = tolerances(want.dtype, rtol, atol)
        return float(np.max(err / (atol + rtol * np.abs(np.nan_to_num(w))))), float(np.max(err))
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return (float("inf") if err > 0 else 0.0), err
    return (0.0, 0.0) if np.array_equal(want, got) else (float("inf"), float("nan"))


def close(want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether `got` agrees with `want` (see the module's rules)."""
    return excess(want, got, rtol, atol)[0] <= 1.0
