"""Route what native libraries write straight to file descriptor 2 into Python logging.

XLA and TensorFlow log from C++ (absl) before any Python logging is set up, e.g. "Invalid
stack_frame_id" or TensorFlow's oneDNN/CUDA start-up notes; for a command-line compiler tool that
is noise on the user's terminal. While a block runs, fd 2 points at a temporary file; afterwards
the text goes to the given logger at debug level (visible with -vv).
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import sys
import tempfile
from typing import Iterator

__all__ = ["native_stderr_to_log", "quiet_native_stderr", "import_tensorflow", "preload_ortools"]


@contextlib.contextmanager
def native_stderr_to_log(logger: logging.Logger) -> Iterator[None]:
    try:
        saved = os.dup(2)
    except OSError:  # no real stderr (embedded interpreters): nothing to redirect
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured = sink.read().decode("utf-8", "replace").strip()
            if captured:
                logger.debug("native log: %s", captured[:4000])


@contextlib.contextmanager
def quiet_native_stderr(logger: logging.Logger) -> Iterator[None]:
    """For a whole command: file descriptor 2 goes to a temporary file (what TensorFlow, XLA
    and absl write from C++ at any point, including lazily loaded libraries), while Python's
    `sys.stderr` keeps writing to the real stderr, so our own messages and warnings still show.
    The captured text goes to `logger` at debug level at the end."""
    try:
        real_fd = os.dup(2)
    except OSError:
        yield
        return
    swap = False
    try:  # replace sys.stderr only when it is the process's fd 2 (test runners substitute their own)
        swap = sys.stderr is not None and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        swap = False
    saved_stderr = sys.stderr
    with tempfile.TemporaryFile() as sink:
        if swap:
            sys.stderr.flush()
            sys.stderr = open(real_fd, "w", buffering=1, encoding=getattr(saved_stderr, "encoding", None) or "utf-8",
                              errors="backslashreplace", closefd=False)
            # A native abort would otherwise die silently (its message goes to the sink): show
            # Python's traceback of it on the real stderr.
            faulthandler.enable(file=sys.stderr)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            if swap:
                sys.stderr.flush()
                faulthandler.disable()
                sys.stderr = saved_stderr
            os.dup2(real_fd, 2)
            os.close(real_fd)
            sink.seek(0)
            captured = sink.read().decode("utf-8", "replace").strip()
            if captured:
                logger.debug("native log: %s", captured[:4000])


def preload_ortools() -> None:
    """Import OR-Tools' CP-SAT now if it is installed and TensorFlow is not loaded yet.

    CP-SAT crashes (SIGSEGV) in a process that imported TensorFlow before OR-Tools (seen with
    tensorflow 2.21 + ortools 9.15); loaded the other way round both work.
    """
    import importlib.util
    import sys

    if "ortools.sat.python.cp_model" in sys.modules or "tensorflow" in sys.modules:
        return
    if importlib.util.find_spec("ortools") is not None:
        import ortools.sat.python.cp_model  # noqa: F401


def import_tensorflow():  # type: ignore[no-untyped-def]
    """Import TensorFlow (once) with its start-up chatter sent to the debug log."""
    import sys

    if "tensorflow" not in sys.modules:
        preload_ortools()
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with native_stderr_to_log(logging.getLogger("tensorflow.startup")):
            import tensorflow  # noqa: F401
    return sys.modules["tensorflow"]
