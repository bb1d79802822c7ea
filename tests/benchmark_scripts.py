"""Loading a `benchmarks/` script as a module in tests (benchmarks/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from tests.conftest import REPO_ROOT


@contextmanager
def benchmark_script(name: str) -> Iterator[ModuleType]:
    """`benchmarks/<name>.py` as module `name`, registered while in use (dataclasses need it)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
