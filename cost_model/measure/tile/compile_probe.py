"""Compiles a tile configuration in a child process, so one that LLVM takes minutes over can be
abandoned (e.g. unroll 512 over a wide vectorized body: `ew_reduce(440,24)` with
`{"tiles":[[1,10,44],[4,6]],"order":1,"vectorize":1,"unroll":512,"parallel":0}` ran past ten minutes in
the twenty-sixth session's collection, which compiled in its own process and hung on it).

    probe = CompileProbe(timeout=60.0)
    asm = probe.asm("matmul", (64, 64, 64), config.text())   # "" when the compile ran past the timeout
    probe.close()

The child is a fresh interpreter running this module (it inherits this process's CPU affinity and
environment, not its TVM state, and never re-runs the caller's script), kept between calls, and killed
and replaced after a timeout. Used by the code-feature cache fill
(`cost_model.learned.tile_code_features`) and, with `costmodel collect --compile-timeout`, by the
tile collector before it compiles a configuration in-process. `submit` / `result` split a call, so the
collector can have the child compile the next configuration (on other CPUs: `cpus`) while it compiles
this one itself.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["CompileProbe", "parse_cpus"]


def parse_cpus(text: str | Sequence[int]) -> list[int]:
    """CPU numbers of this machine from "1" / "0,1" (or a sequence); ValueError naming the allowed range."""
    count = os.cpu_count() or 1
    try:
        cpus = sorted({int(c) for c in (text.split(",") if isinstance(text, str) else text) if str(c).strip()})
    except ValueError:
        cpus = []
    if not cpus or not set(cpus) <= set(range(count)):
        raise ValueError(f"compile CPUs must be CPU numbers of this machine (0-{count - 1}), comma-separated, got {text!r}")
    return cpus


class CompileProbe:
    """One child process that compiles configurations for this host, with a per-call timeout."""

    def __init__(self, timeout: float, cpus: Sequence[int] | None = None) -> None:
        if timeout <= 0:
            raise ValueError(f"a compile timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.cpus = None if cpus is None else parse_cpus(cpus)  # the child's CPUs (default: this process's)
        self._process: Any = None
        self._pending: tuple[str, tuple[int, ...], str] | None = None  # the submitted call not yet answered

    def _start(self) -> None:
        # a plain interpreter running this module, not multiprocessing: a spawned child would re-run the caller's
        # main script, which breaks any user script without an `if __name__ == "__main__"` guard
        root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
        if self.cpus is not None:
            env["COMPILER_OPT_PROBE_CPUS"] = ",".join(str(c) for c in self.cpus)
        self._process = subprocess.Popen([sys.executable, "-m", "cost_model.measure.tile.compile_probe"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env, text=True, encoding="utf-8")

    def asm(self, kind: str, dims: tuple[int, ...], config_text: str, dtype: str = "float32", out_dtype: str = "") -> str:
        """The assembly (of the kernel in `dtype` -> `out_dtype`, `KernelSpec`'s element types), or ""
        when the compile took longer than the timeout (the child is then killed). ValueError, naming
        the kernel and configuration, when it does not compile at all."""
        self.submit(kind, dims, config_text, dtype, out_dtype)
        return self.result()

    def submit(self, kind: str, dims: tuple[int, ...], config_text: str, dtype: str = "float32", out_dtype: str = "") -> None:
        """Start compiling one configuration in the child; `result()` waits for it. One call at a time."""
        if self._pending is not None:
            raise RuntimeError("CompileProbe.submit: the previous call's result() was not read")
        if self._process is None or self._process.poll() is not None:
            self._start()
        self._process.stdin.write(json.dumps([kind, [int(d) for d in dims], config_text, dtype, out_dtype]) + "\n")
        self._process.stdin.flush()
        self._pending = (kind, tuple(int(d) for d in dims), config_text)

    def result(self) -> str:
        """The submitted call's answer, as `asm` returns it; the timeout counts from this call."""
        if self._pending is None:
            raise RuntimeError("CompileProbe.result: nothing was submitted")
        (kind, dims, config_text), self._pending = self._pending, None
        process = self._process
        ready, _, _ = select.select([process.stdout], [], [], self.timeout)  # the first call of a fresh child also imports TVM
        if not ready:
            self.close()
            return ""
        line = process.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the compile child exited while compiling {kind}{dims}: {config_text}")
        status, text = json.loads(line)
        if status != "ok":
            raise ValueError(f"{kind}{dims}: {config_text} does not compile: {text}")
        return str(text)

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                stream.close()
        self._process = None
        self._pending = None

    def __enter__(self) -> CompileProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _serve() -> None:
    """The child: one JSON line [kind, dims, config text, dtype, out_dtype] in, one JSON line ["ok", asm] or ["error", why] out."""
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.runner import config_asm, host_target
    from cost_model.measure.tile.space import TileConfig, TileSpace

    cpus = os.environ.get("COMPILER_OPT_PROBE_CPUS")
    if cpus:  # the parent's `cpus`: compile beside it, not on the CPU it times on
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the answers' own descriptor: anything TVM or LLVM prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    target, spaces = host_target(), {}
    for line in sys.stdin:
        kind, dims, text, dtype, out_dtype = json.loads(line)
        key = (kind, tuple(dims), dtype, out_dtype)
        if key not in spaces:
            spaces = {key: TileSpace(build_kernel(KernelSpec(kind, key[1], dtype=dtype, out_dtype=out_dtype)))}
        try:
            answer = ["ok", config_asm(spaces[key], TileConfig.from_text(text), target=target)]
        except Exception as error:  # a bad configuration: the parent raises it with the kernel named
            answer = ["error", f"{type(error).__name__}: {error}"]
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
