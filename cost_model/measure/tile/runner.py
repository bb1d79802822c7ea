"""Compile a scheduled tile kernel for this CPU through LLVM and run it on seeded random inputs.

The target is LLVM with `-mcpu` set to the host CPU as LLVM names it (`llvm_get_system_cpu`),
so vector widths match this machine. Outputs of a compiled config are checked against the
unscheduled kernel once per kernel (`check_against`): a schedule must not change the result.
Threads: TVM's runtime pool reads TVM_NUM_THREADS when it starts; the collector sets it (1 by
default on this shared machine) and records it with the data.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_model.measure.tile.kernels import TileKernel
from cost_model.measure.tile.space import TileConfig, TileSpace

__all__ = ["CompiledConfig", "build_config", "check_against", "compile_config", "config_asm", "host_target", "host_target_text", "inputs_for", "numpy_dtype"]

logger = logging.getLogger(__name__)


def host_target_text() -> str:
    from tvm.target import codegen

    return f"llvm -mcpu={codegen.llvm_get_system_cpu()}"


def host_target() -> Any:
    from tvm.target import Target, codegen

    return Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()})


@dataclass
class CompiledConfig:
    config: TileConfig
    function: Any  # the callable packed function
    args: list[Any]
    compile_seconds: float
    number: int = 1  # calls per timed sample (short kernels: several, so call overhead is small)

    def __call__(self) -> None:
        for _ in range(self.number):
            self.function(*self.args)

    def output(self) -> np.ndarray:
        return self.args[-1].numpy()


def numpy_dtype(name: str) -> np.dtype:
    """The numpy (or ml_dtypes, for bfloat16) type of a tile kernel element type (`kernels.DTYPES`)."""
    from cost_model.measure.tile.kernels import DTYPES
    from graph_ir.dtypes import DType

    return DType.from_short_name(DTYPES[name]).numpy


def inputs_for(kernel: TileKernel, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs (the float32 draw, then cast: every element type sees the same values) and a zero output."""
    rng = np.random.default_rng(seed)
    spec = kernel.spec
    arrays = [(rng.standard_normal(s).astype(np.float32) * 0.1).astype(numpy_dtype(spec.dtype)) for s in kernel.arg_shapes[:-1]]
    arrays.append(np.zeros(kernel.arg_shapes[-1], dtype=numpy_dtype(spec.result_dtype)))
    return arrays


def build_config(space: TileSpace, config: TileConfig, *, target: Any = None) -> Any:
    """Schedule and compile `config` (TVM's executable, not yet loaded: its `.mod` holds the
    generated code, `inspect_source("asm")`)."""
    import tvm

    return tvm.compile(space.schedule(config), target=target if target is not None else host_target())


def config_asm(space: TileSpace, config: TileConfig, *, target: Any = None) -> str:
    """The assembly LLVM makes of `config` for this host (or `target`): what the code features read."""
    return str(build_config(space, config, target=target).mod.inspect_source("asm"))


def compile_config(space: TileSpace, config: TileConfig, *, target: Any = None, arrays: list[np.ndarray] | None = None) -> CompiledConfig:
    """Schedule, compile and bind inputs; the result is a blocking runner."""
    import tvm

    began = time.perf_counter()
    executable = build_config(space, config, target=target)
    seconds = time.perf_counter() - began
    module = executable.jit() if hasattr(executable, "jit") else executable
    function = module["main"]
    dev = tvm.cpu()
    arrays = arrays if arrays is not None else inputs_for(space.kernel)
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    return CompiledConfig(config, function, args, seconds)


def reference_output(space: TileSpace, arrays: list[np.ndarray], *, target: Any = None) -> np.ndarray:
    """The kernel's output with the trivial schedule (one tile per loop, nothing else)."""
    trivial = TileConfig(tuple((e,) + (1,) * (space.levels(i) - 1) for i, e in enumerate(space.extents)), order=3, vectorize=False)
    run = compile_config(space, trivial, target=target, arrays=arrays)  # runtime tensors are copies: `arrays` stay as they are
    run()
    return run.output()


def check_against(run: CompiledConfig, reference: np.ndarray, *, rtol: float = 1e-3, atol: float = 1e-4) -> None:
    """Run once and compare with the reference; ValueError naming the config on a mismatch. The
    tolerances are raised to a few ulps of the output's type (`graph_ir.compare`): a schedule
    that sums in another order may round a bf16 / f16 result differently."""
    from graph_ir.compare import close

    run()
    got = run.output()
    if not close(reference, got, rtol, atol):
        worst = float(np.max(np.abs(got.astype(np.float64) - reference.astype(np.float64))))
        raise ValueError(f"schedule {run.config.text()} changed the result (max abs diff {worst:.3g})")


