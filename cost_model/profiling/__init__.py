"""Profiled per-op costs on this machine, and calibration of the simulator against real runs.

- `Profiler` times ops or fused groups through a backend (`XlaBackend`: a group cut out of an
  HLO graph and compiled as one XLA CPU executable; `OrtBackend`: a cut of an ONNX graph in an
  onnxruntime session), deduplicated by signature and cached in SQLite (`ProfileCache`).
- `ProfiledCosts` hands those times to the simulator:
  `SimulationProblem.from_graph(graph, topology, kernel_costs=ProfiledCosts(profiler))`.
- `measure_host_device` / `host_topology`: this machine as a DeviceSpec / Topology.
- `calibration` and `study`: random configurations run for real vs simulated
  (benchmarks/bench_calibration.py).
"""

from __future__ import annotations

from cost_model.profiling.cache import ProfileCache, default_cache_dir
from cost_model.profiling.costs import ProfiledCosts
from cost_model.profiling.host import host_topology, measure_host_device, measure_host_link
from cost_model.profiling.ort_backend import OrtBackend
from cost_model.profiling.profiler import Profiler, ProfilingBackend, backend_for
from cost_model.profiling.signature import group_signature, machine_fingerprint, node_signature
from cost_model.profiling.subgraph import GroupCut, ProfilingError, cut_group
from cost_model.profiling.timing import Measurement, time_interleaved
from cost_model.profiling.xla_backend import XlaBackend, compile_hlo_group

__all__ = [
    "GroupCut",
    "Measurement",
    "OrtBackend",
    "ProfileCache",
    "ProfiledCosts",
    "Profiler",
    "ProfilingBackend",
    "ProfilingError",
    "XlaBackend",
    "backend_for",
    "compile_hlo_group",
    "cut_group",
    "default_cache_dir",
    "group_signature",
    "host_topology",
    "machine_fingerprint",
    "measure_host_device",
    "measure_host_link",
    "node_signature",
    "time_interleaved",
]
