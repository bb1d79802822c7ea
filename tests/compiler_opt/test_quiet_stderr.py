"""Quiet by default: CLI commands that load TensorFlow / XLA write none of their C++ log lines
(absl `I0000 ...`, CUDA probes, oneDNN notes) to stderr unless -v; our own errors still show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# absl/glog prefixes (I1126 12:00:00.123 / I0000 00:00:...), and the usual start-up chatter.
NATIVE_LINE = re.compile(r"^[IWEF]\d{4} |absl::|cuda|oneDNN|TF_ENABLE|cpu_feature_guard|tensorflow/", re.MULTILINE)
TF_FILE = "tf/tensorflow-tensorflow__tensorflow__core__grappler__costs__graph_properties_testdata__while_loop.pbtxt"
MLIR_FILE = "stablehlo/openxla-stablehlo__stablehlo__testdata__iota_2x32_shape_.mlir"


def _run(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # what a user's shell has: nothing set
    if cache is not None:
        env["COMPILER_OPT_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "compiler_opt.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_tf_and_xla_commands_leave_stderr_clean(shared_testdata, tmp_path):
    external = shared_testdata / "external"
    for args in (
        ("inspect", str(external / TF_FILE)),
        ("convert", str(external / TF_FILE), str(tmp_path / "out.pb")),
        ("inspect", str(external / MLIR_FILE)),
    ):
        result = _run(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == "", (args, result.stderr)


def test_errors_still_reach_stderr(tmp_path):
    result = _run("inspect", str(tmp_path / "absent.pbtxt"))
    assert result.returncode == 2
    assert result.stderr.startswith("compiler-opt: error:") and "absent.pbtxt" in result.stderr
    assert not NATIVE_LINE.search(result.stderr)


@pytest.mark.slow
def test_building_a_tensorflow_workload_is_quiet(tmp_path):
    # A fresh cache makes the workload build through TensorFlow (the issue's ~10 lines).
    result = _run("simulate", "inception-v3:train", "--devices", "4xV100", cache=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    assert "step time" in result.stdout
