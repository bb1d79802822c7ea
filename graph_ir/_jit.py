"""Choosing between a numba-compiled kernel and its pure-Python twin, the same way everywhere.

The simulator's event loop and the fusion pass's cycle check each have a compiled version
(numba) and a Python one with identical results. `choose_engine` picks once: Python when
`COMPILER_OPT_NO_JIT` is set, when numba is not installed, or when loading the compiled module
fails (a broken numba/llvmlite install must not take the feature down); else the compiled one.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, TypeVar

__all__ = ["NO_JIT_ENV", "choose_engine"]

logger = logging.getLogger(__name__)

NO_JIT_ENV = "COMPILER_OPT_NO_JIT"

F = TypeVar("F")


def choose_engine(what: str, load_compiled: Callable[[], F], python: F) -> tuple[str, F]:
    """`("numba", load_compiled())` or `("python", python)` (module docstring); `what` names the
    kernel in the log line that says which was chosen and why."""
    if os.environ.get(NO_JIT_ENV, "") not in ("", "0"):
        logger.info("%s: pure Python (%s is set)", what, NO_JIT_ENV)
        return "python", python
    try:
        compiled = load_compiled()
    except ImportError:
        logger.info("%s: pure Python (numba is not installed; `pip install compiler-opt[fast]`)", what)
        return "python", python
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        logger.warning("%s: pure Python (numba failed to load: %s)", what, exc)
        return "python", python
    logger.info("%s: numba (compiled on first use, cached on disk)", what)
    return "numba", compiled
