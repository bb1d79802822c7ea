"""XLA's timing setup: sync dispatch and one Eigen thread, only before JAX's CPU client exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json
from cost_model.measure.xla_timing import configure_xla_timing
first = configure_xla_timing()
import jax, jax.numpy as jnp
value = float(jnp.ones(3).sum())  # creates the CPU client with the settings
second = configure_xla_timing()  # too late now: reported, nothing changed
print(json.dumps({"first": first, "second": second, "value": value}))
"""


def test_configure_before_and_after_the_backend_exists() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), XLA_FLAGS="--xla_force_host_platform_device_count=1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["value"] == 3.0
    assert out["first"]["applied"] is True and out["first"]["async_dispatch"] is False
    flags = out["first"]["xla_flags"].split()
    assert "--xla_force_host_platform_device_count=1" in flags  # the caller's flags are kept
    assert "--xla_cpu_multi_thread_eigen=false" in flags and "intra_op_parallelism_threads=1" in flags
    assert out["second"]["applied"] is False and out["second"]["async_dispatch"] is False
