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
tile collector before it compiles a configuration in-process.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["CompileProbe"]


class CompileProbe:
    """One child process that compiles configurations for this host, with a per-call timeout."""

    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"a compile timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._process: Any = None

    def _start(self) -> None:
        # a plain interpreter running this module, not multiprocessing: a spawned child would re-run the caller's
        # main script, which breaks any user script without an `if __name__ == "__main__"` guard
        root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
        self._process = subprocess.Popen([sys.executable, "-m", "cost_model.measure.tile.compile_probe"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env, text=True, encoding="utf-8")

    def asm(self, kind: str, dims: tuple[int, ...], config_text: str, dtype: str = "float32", out_dtype: str = "") -> str:
        """The assembly (of the kernel in `dtype` -> `out_dtype`, `KernelSpec`'s element types), or ""
        when the compile took longer than the timeout (the child is then killed). ValueError, naming
        the kernel and configuration, when it does not compile at all."""
        if self._process is None or self._process.poll() is not None:
            self._start()
        process = self._process
        process.stdin.write(json.dumps([kind, [int(d) for d in dims], config_text, dtype, out_dtype]) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], self.timeout)  # the first call of a fresh child also imports TVM
        if not ready:
            self.close()
            return ""
        line = process.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the compile child exited while compiling {kind}{tuple(dims)}: {config_text}")
        status, text = json.loads(line)
        if status != "ok":
            raise ValueError(f"{kind}{tuple(dims)}: {config_text} does not compile: {text}")
        return str(text)

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                stream.close()
        self._process = None

    def __enter__(self) -> CompileProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _serve() -> None:
    """The child: one JSON line [kind, dims, config text, dtype, out_dtype] in, one JSON line ["ok", asm] or ["error", why] out."""
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.runner import config_asm, host_target
    from cost_model.measure.tile.space import TileConfig, TileSpace

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
