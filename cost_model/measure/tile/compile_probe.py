"""Compiles a tile configuration in a child process, so one that LLVM takes minutes over can be
abandoned (e.g. unroll 512 over a wide vectorized body: `ew_reduce(440,24)` with
`{"tiles":[[1,10,44],[4,6]],"order":1,"vectorize":1,"unroll":512,"parallel":0}` ran past ten minutes in
the twenty-sixth session's collection, which compiled in its own process and hung on it).

    probe = CompileProbe(timeout=60.0)
    asm = probe.asm("matmul", (64, 64, 64), config.text())   # "" when the compile ran past the timeout
    probe.close()

The child is spawned (it inherits this process's CPU affinity and environment, not its TVM state),
kept between calls, and killed and replaced after a timeout. Used by the code-feature cache fill
(`cost_model.learned.tile_code_features`) and, with `costmodel collect --compile-timeout`, by the
tile collector before it compiles a configuration in-process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CompileProbe"]


class CompileProbe:
    """One child process that compiles configurations for this host, with a per-call timeout."""

    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"a compile timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._process: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_probe_main, args=(child,), daemon=True)
        self._process.start()
        child.close()

    def asm(self, kind: str, dims: tuple[int, ...], config_text: str) -> str:
        """The assembly, or "" when the compile took longer than the timeout (the child is then
        killed). ValueError, naming the kernel and configuration, when it does not compile at all."""
        if self._process is None or not self._process.is_alive():
            self._start()
        self._conn.send((kind, tuple(dims), config_text))
        if self._conn.poll(self.timeout):  # the first call of a fresh child also imports TVM
            status, text = self._conn.recv()
            if status != "ok":
                raise ValueError(f"{kind}{tuple(dims)}: {config_text} does not compile: {text}")
            return str(text)
        self.close()
        return ""

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._conn.close()
        self._process = self._conn = None

    def __enter__(self) -> CompileProbe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _probe_main(conn: Any) -> None:
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.runner import build_config, host_target
    from cost_model.measure.tile.space import TileConfig, TileSpace

    target, spaces = host_target(), {}
    while True:
        try:
            kind, dims, text = conn.recv()
        except EOFError:
            return
        if (kind, dims) not in spaces:
            spaces = {(kind, dims): TileSpace(build_kernel(KernelSpec(kind, dims)))}
        try:
            built = build_config(spaces[(kind, dims)], TileConfig.from_text(text), target=target)
            conn.send(("ok", str(built.mod.inspect_source("asm"))))
        except Exception as error:  # a bad configuration: the parent raises it with the kernel named
            conn.send(("error", f"{type(error).__name__}: {error}"))
