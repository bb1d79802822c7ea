"""Real measurements for the learned cost model: the timing harness, tile kernels through TVM,
and fusion configurations through XLA.

- `harness.Harness`: warm-up, interleaved rounds, min/median, re-measured winners, test-retest
  noise floor, SQLite cache (`cost_model.profiling.cache.ProfileCache`), pluggable timer.
- `tile/`: TensorIR kernels (matmul, batch matmul, conv2d NHWC/NCHW, depthwise, reductions), their
  schedule space, compile + run on this CPU, shapes from the workload suite and HLO files, and
  the TpuGraphs-schema dataset writer (`compiler-opt costmodel collect --task tile`).
- `fusion/`: random legal fusion configurations of graphs timed as XLA executables.
- `conv_timing`: one convolution alone (`ConvSpec` read from an HLO / StableHLO / ONNX conv node)
  compiled and timed through XLA by the harness, cached per machine (`ConvTimer`): the measured
  conv terms of the additive fusion model (twelfth session).
"""

from __future__ import annotations

from cost_model.measure.harness import Harness, KernelMeasurement, config_key, noise_floor, per_call_timer, wall_timer
from cost_model.measure.machine import machine_key, machine_record

__all__ = ["Harness", "KernelMeasurement", "config_key", "machine_key", "machine_record", "noise_floor", "per_call_timer", "wall_timer"]
