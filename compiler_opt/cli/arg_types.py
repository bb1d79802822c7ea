"""argparse value types shared by the `compiler-opt` commands."""

from __future__ import annotations

import argparse
import math

__all__ = ["finite_float", "non_negative_float"]


def finite_float(text: str) -> float:
    """A float option's value, refused at parse time when it is NaN or infinite: NaN passes every `<`
    range check after parsing and surfaced as an internal error or a silent empty run (forty-ninth session)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """`finite_float`, and at least 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value
