"""Measure this machine as a `DeviceSpec`: what the `cpu` preset would say if it described it.

The shipped `cpu` preset is one socket of a 28-core Xeon 8280 (3.2 TFLOP/s, 140.8 GB/s, 2 us
launch). A container given 2 cores of a shared host is an order of magnitude slower, and its
"launch" (one PjRt execute call from Python) costs ~10 us, not 2; a roofline with the preset's
numbers ranks fusion choices by the wrong balance of launch vs. work. `measure_host_device`
times three XLA kernels through the same execute path the profiler uses:
- launch overhead: a scalar add (all dispatch, no work);
- fp32 peak: a 1024^3 matmul (2.1 GFLOP), minus the launch;
- memory bandwidth: `x + 1` over 4 M floats (16 MB read, 16 MB written), minus the launch: the
  sizes the workloads move, in a buffer the allocator reuses (fresh pages would measure page
  faults, not bandwidth);
and `measure_host_link` times a `device_put` between two forced host devices (a memcpy).
Results are min-of-N and cached in the profile cache's folder as JSON keyed by the machine.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import numpy as np

from cost_model.devices.spec import DeviceSpec, Link
from cost_model.devices.topology import Topology
from cost_model.profiling.cache import default_cache_dir
from cost_model.profiling.signature import machine_fingerprint, signature_key
from cost_model.profiling.timing import time_interleaved

__all__ = ["measure_host_device", "measure_host_link", "host_topology"]

logger = logging.getLogger(__name__)


def _hlo_runner(fn: Any, *args: Any) -> Any:
    # Through the profiler's own path (HLO import -> cut -> execute), so "launch" means the same.
    import jax

    from cost_model.profiling.xla_backend import compile_hlo_group, random_inputs
    from graph_ir.io.hlo_import import import_hlo_text

    graph = import_hlo_text(jax.jit(fn).lower(*args).as_text(dialect="hlo"))
    kernel = compile_hlo_group(graph, list(graph))
    placed = random_inputs(kernel.cut.inputs, kernel.device)
    return lambda: kernel.run_blocking(placed)


def _cached(name: str, compute: Any, use_cache: bool) -> dict[str, float]:
    path = default_cache_dir() / f"host-{signature_key(machine_fingerprint())[:16]}.json"
    stored: dict[str, Any] = {}
    if use_cache and path.is_file():
        stored = json.loads(path.read_text(encoding="utf-8"))
        if name in stored:
            return stored[name]
    value = compute()
    if use_cache:
        stored[name] = value
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(stored, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    return value


def _measure_device_numbers() -> dict[str, float]:
    import jax.numpy as jnp

    scalar = np.float32(1.0)
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    big = np.ones(4 * 2**20, np.float32)
    launch_run = _hlo_runner(lambda x: x + 1.0, scalar)
    matmul_run = _hlo_runner(lambda x, y: jnp.dot(x, y), a, a)
    stream_run = _hlo_runner(lambda x: x + 1.0, big)
    launch, matmul, stream = time_interleaved([launch_run, matmul_run, stream_run], repeats=30, warmup=3)
    overhead = launch.min_s
    flops = 2.0 * 1024**3 / max(matmul.min_s - overhead, 1e-9)
    bandwidth = 2.0 * big.nbytes / max(stream.min_s - overhead, 1e-9)
    return {"launch_overhead_s": overhead, "fp32_flops": flops, "mem_bandwidth": bandwidth}


def measure_host_device(name: str = "cpu0", *, use_cache: bool = True) -> DeviceSpec:
    """This machine's CPU as seen through XLA (see the module docstring)."""
    numbers = _cached("device", _measure_device_numbers, use_cache)
    memory = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    logger.info(
        "host: %.1f GFLOP/s fp32, %.1f GB/s, %.1f us launch",
        numbers["fp32_flops"] / 1e9,
        numbers["mem_bandwidth"] / 1e9,
        numbers["launch_overhead_s"] * 1e6,
    )
    return DeviceSpec(
        name=name,
        kind="cpu",
        model="host (measured)",
        peak_flops={"fp32": numbers["fp32_flops"]},
        mem_bandwidth=numbers["mem_bandwidth"],
        memory_bytes=memory,
        launch_overhead_s=numbers["launch_overhead_s"],
    )


def _measure_link_numbers() -> dict[str, float]:
    import jax

    from cost_model.profiling.xla_backend import host_devices

    devices = host_devices()
    if len(devices) < 2:
        # XLA fixes the host device count when it starts; measure in a child that has two.
        return _measure_link_numbers_in_child()
    small = jax.device_put(np.float32(1.0), devices[0])
    large = jax.device_put(np.ones(8 * 2**20, np.float32), devices[0])
    small_m, large_m = time_interleaved(
        [lambda: jax.device_put(small, devices[1]).block_until_ready(), lambda: jax.device_put(large, devices[1]).block_until_ready()],
        repeats=15,
        warmup=2,
    )
    latency = small_m.min_s
    return {"latency_s": latency, "bandwidth": large.nbytes / max(large_m.min_s - latency, 1e-9)}


def _measure_link_numbers_in_child() -> dict[str, float]:
    import subprocess
    import sys

    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = "import json; from cost_model.profiling.host import _measure_link_numbers as m; print(json.dumps(m()))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"measuring a host link in a child process with 2 host devices failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_host_link(src: str = "cpu0", dst: str = "cpu1", *, use_cache: bool = True) -> tuple[Link, Link]:
    """Both directions of a copy between two forced host devices."""
    numbers = _cached("link", _measure_link_numbers, use_cache)
    return (
        Link(src, dst, numbers["bandwidth"], numbers["latency_s"], "memcpy"),
        Link(dst, src, numbers["bandwidth"], numbers["latency_s"], "memcpy"),
    )


def host_topology(
    num_devices: int = 1, *, device: DeviceSpec | None = None, use_cache: bool = True, shared_executor: bool = True
) -> Topology:
    """`num_devices` copies of the measured host (or of `device`), joined by measured memcpy links.

    `shared_executor` (default): the devices are one executor (`Topology.executors`), which is
    what forced XLA host devices driven from one Python thread on the same cores are: kernels on
    different devices and the copies between them run one at a time. Measured on whole graphs
    (`benchmarks/bench_calibration.py --whole-graphs`), spreading a step over two host devices
    never made it faster here, and the shared model ranks configurations better than
    independent devices do. `shared_executor=False` gives independent machines.
    """
    spec = device if device is not None else measure_host_device(use_cache=use_cache)
    devices = [spec.renamed(f"cpu{i}") for i in range(num_devices)]
    links: list[Link] = []
    if num_devices > 1:
        forward, _ = measure_host_link(use_cache=use_cache)
        for i in range(num_devices):
            for j in range(num_devices):
                if i != j:
                    links.append(Link(f"cpu{i}", f"cpu{j}", forward.bandwidth, forward.latency_s, "memcpy"))
    if not shared_executor:
        return Topology(f"{num_devices}xhost-independent", devices, links)
    return Topology(f"{num_devices}xhost", devices, links, executors=[0] * num_devices)
