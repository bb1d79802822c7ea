"""compiler-opt: joint device placement, fusion and scheduling for ML compiler graphs.

Importing this package is cheap on purpose (the CLI starts with it): heavy pieces are loaded
on first attribute access through `__getattr__`, never at import time.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["OptimizeResult", "__version__", "api", "optimize", "workloads"]

# attribute -> module that provides it (loaded on first access).
_LAZY_SUBMODULES = {"workloads": "compiler_opt.workloads", "api": "compiler_opt.api"}
# attribute -> (module, name) of functions and classes re-exported here (loaded on first access).
_LAZY_ATTRIBUTES = {"optimize": ("compiler_opt.api", "optimize"), "OptimizeResult": ("compiler_opt.api", "OptimizeResult")}


def _package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("compiler-opt")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = _package_version()
        globals()["__version__"] = version
        return version
    if name in _LAZY_ATTRIBUTES:
        module_name, attribute = _LAZY_ATTRIBUTES[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    module = _LAZY_SUBMODULES.get(name)
    if module is not None:
        value = importlib.import_module(module)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compiler_opt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
