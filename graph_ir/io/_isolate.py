"""Run a native call that may abort the process (an XLA CHECK failure, a segfault) in a forked
child, so that bad input ends in an error instead of killing the caller.

XLA's HLO text parser and its HLO -> MLIR importer CHECK-fail on some malformed input instead of
returning an error (fuzzing found a reshape whose element counts differ, parameter-number gaps,
out-of-range tuple indices). The child runs the call, writes the bytes it returns to a pipe and
exits without cleanup; the parent reads them. A child that dies from a signal becomes a
`CorruptModelError` quoting XLA's check message. Where `os.fork` is missing the call runs in
process. The cost is a fork (copy-on-write) and one copy of the result.
"""

from __future__ import annotations

import os
import select
import signal
import tempfile
import time
from typing import Callable

from graph_ir.errors import CorruptModelError

__all__ = ["call_isolated"]

_OK, _ERROR = b"K", b"E"


def call_isolated(fn: Callable[[], bytes], *, what: str, timeout_s: float, file: str | None = None) -> bytes:
    """`fn()` in a forked child; its exception text comes back as RuntimeError(text)."""
    if not hasattr(os, "fork"):
        return fn()
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:  # the child: no Python clean-up, no atexit, just the call
            code = 0
            try:
                os.close(read_fd)
                os.dup2(log.fileno(), 2)
                try:
                    payload = _OK + fn()
                except BaseException as err:  # noqa: BLE001 - reported to the parent
                    payload = _ERROR + str(err).encode("utf-8", "replace")
                view = memoryview(payload)
                while view:
                    written = os.write(write_fd, view)
                    view = view[written:]
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([read_fd], [], [], max(0.0, left))
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise CorruptModelError(f"{what} did not finish within {timeout_s:.0f} s", file=file)
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        if os.WIFSIGNALED(status) or not data:
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
            check = next((line.split("] ", 1)[-1] for line in text.splitlines() if "Check failed" in line), "")
            how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
            raise CorruptModelError(f"{what} crashed on this input ({how}){': ' + check if check else ''}", file=file)
    if data[:1] == _ERROR:
        raise RuntimeError(data[1:].decode("utf-8", "replace"))
    return data[1:]
