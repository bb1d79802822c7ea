"""One sweep row in its own process (a crash or a hang ends that row only): the child prints its outcome as one JSON line
`OUTCOME {...}`; shared by bench_check_sweep, bench_torch_sweep and bench_xla_hook_sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PREFIX = "OUTCOME "


def run_child(code: str, args: list[str], timeout_s: float, *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`python -c code *args` from the checkout: the child's last OUTCOME line as a dict, plus `seconds`; `timeout` when it
    does not answer in `timeout_s`, `crash` (with the end of its stderr) when it exits without an OUTCOME line."""
    start = time.perf_counter()
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = str(REPO) + os.pathsep + child_env.get("PYTHONPATH", "")
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO, env=child_env)
    except subprocess.TimeoutExpired:
        row: dict[str, Any] = {"outcome": "timeout", "message": f"no answer in {timeout_s:g} s"}
    else:
        lines = [line for line in done.stdout.splitlines() if line.startswith(PREFIX)]
        if lines:
            row = json.loads(lines[-1][len(PREFIX):])
        else:
            tail = " ".join((done.stderr or "").strip().splitlines()[-3:])
            row = {"outcome": "crash", "message": f"exit {done.returncode}: {tail}"[:600]}
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row
