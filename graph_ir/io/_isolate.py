"""Run native calls that may abort the process (an XLA CHECK failure, a segfault) in a forked
helper process, so that bad input ends in an error instead of killing the caller.

XLA's HLO text parser and its HLO -> MLIR importer CHECK-fail on some malformed input instead of
returning an error (fuzzing found a reshape whose element counts differ, parameter-number gaps,
out-of-range tuple indices). The helper is forked once, on first use, from the process that has
the libraries loaded; each call sends it the name of a registered function and its bytes over a
pipe and gets bytes back. When the helper dies from a signal, the call becomes a
`CorruptModelError` quoting XLA's check message and the next call forks a new helper. A call
over its time limit kills the helper. Where `os.fork` is missing, or with
`COMPILER_OPT_NATIVE_IN_PROCESS=1` (trusted files in bulk, debugging with gdb), calls run in
process. Cost per call: two pipe copies of the payload (a fork per call cost tens of ms).
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import select
import signal
import struct
import sys
import tempfile
import threading
import time
from typing import Callable

from graph_ir.errors import CorruptModelError

__all__ = ["call_isolated", "register", "IN_PROCESS_ENV"]

IN_PROCESS_ENV = "COMPILER_OPT_NATIVE_IN_PROCESS"
_FUNCTIONS: dict[str, Callable[[bytes], bytes]] = {}
_HEADER = struct.Struct("<cQ")  # status or function-name length, payload length
_OK, _ERROR = b"K", b"E"
_CRASH_SIGNALS = [getattr(signal, name) for name in ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL") if hasattr(signal, name)]


def register(name: str, fn: Callable[[bytes], bytes]) -> None:
    """Make `fn(bytes) -> bytes` callable in the helper by `name` (before the helper forks)."""
    _FUNCTIONS[name] = fn


def _read_exact(fd: int, count: int, deadline: float | None) -> bytes:
    chunks, left = [], count
    while left:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve(requests: int, replies: int) -> None:
    """The helper's loop: (name, payload) in, (status, payload) out, until the pipe closes."""
    while True:
        try:
            _, size = _HEADER.unpack(_read_exact(requests, _HEADER.size, None))
            message = _read_exact(requests, size, None)
        except EOFError:
            return
        name_length = message[0]
        module, name = message[1 : 1 + name_length].decode().split(":", 1)
        payload = message[1 + name_length :]
        try:
            if name not in _FUNCTIONS:  # registered in the caller after this helper forked
                importlib.import_module(module)
            status, result = _OK, _FUNCTIONS[name](payload)
        except BaseException as err:  # noqa: BLE001 - reported to the caller
            status, result = _ERROR, str(err).encode("utf-8", "replace")
        _write_all(replies, _HEADER.pack(status, len(result)) + result)


# Address space the helper may add to what it inherited: a huge allocation fails (and the call
# reports a crash) instead of swapping the machine.
HELPER_EXTRA_ADDRESS_SPACE = 8 * 2**30


def _limit_memory() -> None:
    try:
        import resource

        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[0])
        limit = pages * os.sysconf("SC_PAGE_SIZE") + HELPER_EXTRA_ADDRESS_SPACE
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, ImportError):  # not Linux: no limit
        pass


# Libraries that take seconds to import: when the caller loaded one after the helper forked, a
# fresh fork (milliseconds) inherits it instead of the helper importing it again.
HEAVY_MODULES = ("tensorflow", "jaxlib", "torch")


class _Helper:
    def __init__(self) -> None:
        self.pid = 0
        self.lock = threading.Lock()
        self.heavy: frozenset[str] = frozenset()

    def stale(self) -> bool:
        """The caller has loaded a heavy library since this helper forked."""
        return bool(self.pid) and any(name in sys.modules and name not in self.heavy for name in HEAVY_MODULES)

    def start(self) -> None:
        self.heavy = frozenset(name for name in HEAVY_MODULES if name in sys.modules)
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        self.log = tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:  # the helper: serve, then exit without Python clean-up
            code = 0
            try:
                os.close(request_write)
                os.close(reply_read)
                os.dup2(self.log.fileno(), 2)
                faulthandler.disable()  # a crash here is reported by the caller, not as a traceback
                for number in _CRASH_SIGNALS:  # inherited handlers (libFuzzer's) must not report it either
                    signal.signal(number, signal.SIG_DFL)
                _limit_memory()
                _serve(request_read, reply_write)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(request_read)
        os.close(reply_write)
        self.pid, self.requests, self.replies = pid, request_write, reply_read

    def stop(self) -> int:
        """Reap the helper; its wait status."""
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return status

    def call(self, name: str, payload: bytes, what: str, timeout_s: float, file: str | None) -> bytes:
        with self.lock:
            if self.stale():
                self.stop()
            if not self.pid:
                self.start()
            # The log holds this call's native messages only: a crash quotes its own check, and a long-lived helper's
            # warnings do not pile up on disk (the helper writes through the same file offset).
            self.log.seek(0)
            self.log.truncate()
            encoded = f"{_FUNCTIONS[name].__module__}:{name}".encode()
            message = bytes([len(encoded)]) + encoded + payload
            deadline = time.monotonic() + timeout_s
            try:
                _write_all(self.requests, _HEADER.pack(b"R", len(message)) + message)
                status, size = _HEADER.unpack(_read_exact(self.replies, _HEADER.size, deadline))
                result = _read_exact(self.replies, size, deadline)
            except TimeoutError:
                self.stop()
                raise CorruptModelError(f"{what} did not finish within {timeout_s:.0f} s", file=file) from None
            except (EOFError, BrokenPipeError):
                # The helper died: wait for it so the signal and XLA's message are known.
                time.sleep(0.05)
                died = self.stop()
                self.log.seek(0)
                text = self.log.read().decode("utf-8", "replace")
                self.log.close()
                check = next((line.split("] ", 1)[-1] for line in text.splitlines() if "Check failed" in line), "")
                how = f"signal {os.WTERMSIG(died)}" if os.WIFSIGNALED(died) else "the helper process died"
                raise CorruptModelError(f"{what} crashed on this input ({how}){': ' + check if check else ''}", file=file) from None
        if status == _ERROR:
            raise RuntimeError(result.decode("utf-8", "replace"))
        return result


_HELPER = _Helper()
_OWNER = os.getpid()


def call_isolated(name: str, payload: bytes, *, what: str, timeout_s: float, file: str | None = None) -> bytes:
    """`register`ed function `name` on `payload`, in the helper; its exception text comes back as
    RuntimeError(text), a crash as CorruptModelError."""
    global _HELPER, _OWNER
    if not hasattr(os, "fork") or os.environ.get(IN_PROCESS_ENV, "") not in ("", "0"):
        return _FUNCTIONS[name](payload)
    if os.getpid() != _OWNER:  # a forked process (multiprocessing) gets its own helper
        _HELPER, _OWNER = _Helper(), os.getpid()
    return _HELPER.call(name, payload, what, timeout_s, file)
