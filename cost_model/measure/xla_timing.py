"""XLA's CPU runtime set up for timing small programs: synchronous dispatch, one compute thread.

    from cost_model.measure.xla_timing import configure_xla_timing
    settings = configure_xla_timing()      # before anything creates JAX's CPU client

Why (measured, `benchmarks/bench_fusion_noise.py`, RESULTS (i) eighth session): with JAX's default
asynchronous CPU dispatch every executable runs on a worker thread and `block_until_ready` waits
for it; on a process pinned to one core each kernel of a fusion configuration then pays a thread
hand-off whose latency depends on the scheduler, which made a 16-kernel chain take 0.7-1.4 ms
(min to p90) where synchronous dispatch takes 0.34-0.39 ms. Eigen's intra-op pool adds threads
that can only contend on one core. Both are settings of the CPU client, read when it is created,
so this must run before the first JAX computation; afterwards it only reports that it came late.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["XLA_TIMING_FLAGS", "configure_xla_timing"]

logger = logging.getLogger(__name__)

XLA_TIMING_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")


def configure_xla_timing() -> dict[str, Any]:
    """Sync dispatch and single-threaded Eigen for this process; returns what is in effect
    (stored with every dataset): `applied` False when JAX's backend already existed."""
    from jax._src import xla_bridge

    import jax

    applied = not xla_bridge.backends_are_initialized()
    if applied:
        flags = os.environ.get("XLA_FLAGS", "").split()
        names = {f.split("=")[0] for f in flags}
        flags += [f for f in XLA_TIMING_FLAGS if f.split("=")[0] not in names]
        os.environ["XLA_FLAGS"] = " ".join(flags)
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    else:
        logger.warning("JAX's CPU backend exists already: dispatch stays %s, XLA_FLAGS stay %r (timings are noisier)",
                       "async" if jax.config.read("jax_cpu_enable_async_dispatch") else "sync", os.environ.get("XLA_FLAGS", ""))
    return {"applied": applied, "async_dispatch": bool(jax.config.read("jax_cpu_enable_async_dispatch")),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}
