"""Shared pytest options and fixtures.

Tests marked `slow` run only with `--runslow` or `COMPILER_OPT_SLOW=1`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_ir.io._native_log import preload_ortools

REPO_ROOT = Path(__file__).resolve().parent.parent

# OR-Tools' CP-SAT segfaults when TensorFlow was imported before it (their native protobuf/absl
# copies clash); one test process imports both, so OR-Tools goes first.
preload_ortools()

# Hypothesis keeps failing examples in `.hypothesis/` of the working directory by default; a test
# run must leave the checkout as it found it, so the example database is off (a failure still
# prints the falsifying example, which is how one reproduces it).
# Its other caches (`constants/`) go to a folder under the system's temporary directory.
try:
    import tempfile

    from hypothesis import settings as _hypothesis_settings
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"compiler-opt-hypothesis-{os.getuid()}"))
    _hypothesis_settings.register_profile("compiler-opt", database=None)
    _hypothesis_settings.load_profile("compiler-opt")
except ImportError:  # hypothesis is a dev dependency; tests that use it import it themselves
    pass


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def _slow_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--runslow")) or os.environ.get("COMPILER_OPT_SLOW", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _slow_enabled(config):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow or COMPILER_OPT_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Two shared cores: torch's own thread pool only adds contention (and 10x wall time)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def onnx_backend_data() -> Path:
    """The ONNX backend test models shipped inside the onnx wheel."""
    import onnx

    path = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data"
    if not path.is_dir():
        pytest.skip(f"onnx backend test data not found at {path}")
    return path


@pytest.fixture(scope="session")
def shared_testdata() -> Path:
    """`../shared/testdata` beside the repository, when this machine has it."""
    path = REPO_ROOT.parent / "shared" / "testdata"
    if not path.is_dir():
        pytest.skip(f"shared test data not present at {path}")
    return path


@pytest.fixture(scope="session")
def example_model() -> Path:
    """The small CNN committed under examples/."""
    path = REPO_ROOT / "examples" / "small_cnn.onnx"
    if not path.is_file():
        pytest.skip(f"bundled example missing: {path} (run examples/make_example.py)")
    return path
