"""ONNX clean-up compared with the tools users already run: compiler-opt's -O2 pipeline vs
onnxsim, onnxslim and onnxruntime's basic offline optimizer, on models exported from code with
`torch.onnx.export(dynamo=True, optimize=False)`.

    python benchmarks/bench_onnx_opt.py [--models resnet50,mobilenet_v2,...] [--repeat 10] [--json PATH] [--in-process]

Models (benchmarks/_torch_models.py; random weights, nothing downloaded): ResNet-50,
MobileNetV2, EfficientNet-B0, ViT-B/16 written as torch modules (torchvision does not install
beside torch 2.13 here); BERT-base and GPT-2 from `transformers` configs (the `bench` extra),
sequence length 128. Exports are cached under benchmarks/results/onnx_models/.

Per model and tool: node count; `onnx.checker.check_model(full_check=True)`; the largest
absolute output difference against the original in onnxruntime (graph optimisation off, seeded
random inputs); onnxruntime latency with ORT_DISABLE_ALL and with the default level
(ORT_ENABLE_ALL), one intra-op thread, median of --repeat runs after a warm-up, tools
interleaved per repeat; and the tool's own time (median of --tool-repeat runs after one warm-up
run per tool, tools interleaved; the warm-up's time, imports included, is in the JSON as
`tool_seconds_first`). The machine is
shared (2 cores, other jobs running): latencies are noisy, compare within a row group.

Each model runs in its own subprocess (ViT-B/16 with five copies of its 347 MB of weights and
ten sessions ended the single-process run); `--in-process` runs them here instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b16", "bert_base", "gpt2"]
CACHE = ROOT / "benchmarks" / "results" / "onnx_models"


def export(name: str) -> Path:
    path = CACHE / f"{name}.onnx"
    if path.is_file():
        return path
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _torch_models import build_model

    torch.set_num_threads(1)
    model, args, names = build_model(name)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    torch.onnx.export(model, args, str(tmp), dynamo=True, optimize=False, input_names=names, external_data=False)
    os.replace(tmp, path)
    return path


def _ours(model: onnx.ModelProto) -> onnx.ModelProto:
    from graph_ir.io.onnx_export import export_onnx
    from graph_ir.io.onnx_import import import_onnx
    from passes import run_pipeline
    from passes.onnx import opt_level_pipeline

    graph = run_pipeline(import_onnx(model), opt_level_pipeline(2)).graph
    return export_onnx(graph)


def _onnxsim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    simplified, ok = onnxsim.simplify(model)
    if not ok:
        raise RuntimeError("onnxsim's own check failed")
    return simplified


def _onnxslim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(model)


def _ort_basic(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = os.path.join(folder, "basic.onnx")
        options.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)


TOOLS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "compiler-opt -O2": _ours,
    "onnxsim": _onnxsim,
    "onnxslim": _onnxslim,
    "ort basic": _ort_basic,
}


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for package in ("onnx", "onnxruntime", "onnxsim", "onnxslim", "torch", "transformers", "compiler-opt"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in value.name:
            feeds[value.name] = np.ones(shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.integers(0, 1000, shape).astype(np.int64)
    return feeds


def _session(model: onnx.ModelProto, level: str) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _full_check(model: onnx.ModelProto) -> str:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:  # noqa: BLE001 - any checker complaint is the answer
        return f"fails: {str(err).splitlines()[0][:80]}"
    return "passes"


def bench_model(name: str, repeat: int, tool_repeat: int) -> list[dict[str, Any]]:
    path = export(name)
    original = onnx.load(path)
    feeds = _feeds(original)
    results: dict[str, onnx.ModelProto] = {"original": original}
    rows: dict[str, dict[str, Any]] = {"original": {"model": name, "tool": "original", "tool_seconds": 0.0}}
    times: dict[str, list[float]] = {}
    for tool, fn in TOOLS.items():  # a warm-up run each (imports, caches), which gives the output
        row: dict[str, Any] = {"model": name, "tool": tool}
        try:
            start = time.perf_counter()
            results[tool] = fn(onnx.load(path))
            row["tool_seconds_first"] = time.perf_counter() - start
            times[tool] = []
        except Exception as err:  # noqa: BLE001 - a tool failing is a result
            row["error"] = f"{type(err).__name__}: {str(err)[:120]}"
        rows[tool] = row
    for _ in range(tool_repeat):
        for tool in times:  # interleaved, so load drifts hit every tool alike
            model = onnx.load(path)
            start = time.perf_counter()
            TOOLS[tool](model)
            times[tool].append(time.perf_counter() - start)
    for tool, values in times.items():
        rows[tool]["tool_seconds"] = statistics.median(values) if values else rows[tool]["tool_seconds_first"]
    reference = _session(original, "ORT_DISABLE_ALL").run(None, feeds)
    for tool, model in results.items():
        rows[tool]["nodes"] = len(model.graph.node)
        rows[tool]["full_check"] = _full_check(model)
    samples: dict[tuple[str, str], list[float]] = {}
    # One optimisation level at a time, its sessions freed before the next: ten sessions of
    # GPT-2 at once did not fit beside the other jobs on this machine.
    for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
        sessions = {}
        for tool, model in results.items():
            try:
                sessions[tool] = _session(model, level)
                if level == "ORT_DISABLE_ALL":
                    got = sessions[tool].run(None, feeds)
                    rows[tool]["max_abs_diff"] = max(
                        float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(r, np.float64)))) for g, r in zip(got, reference)
                    )
            except Exception as err:  # noqa: BLE001
                rows[tool]["error"] = f"{type(err).__name__}: {str(err)[:120]}"
                sessions.pop(tool, None)
        for tool in sessions:
            sessions[tool].run(None, feeds)  # warm-up
        for _ in range(repeat):
            for tool in sessions:  # interleaved, so load drifts hit every tool alike
                start = time.perf_counter()
                sessions[tool].run(None, feeds)
                samples.setdefault((tool, level), []).append(time.perf_counter() - start)
        del sessions
    for (tool, level), values in samples.items():
        rows[tool][f"latency_ms_{level.lower()}"] = 1e3 * statistics.median(values)
    return list(rows.values())


def _print_row(r: dict[str, Any]) -> None:
    print(
        f"{r['model']:16} {r['tool']:17} nodes {r.get('nodes', '-'):>5}  check {r.get('full_check', '-')[:6]:6} "
        f"diff {r.get('max_abs_diff', float('nan')):.2e}  off {r.get('latency_ms_ort_disable_all', float('nan')):8.2f} ms  "
        f"default {r.get('latency_ms_ort_enable_all', float('nan')):8.2f} ms  tool {r.get('tool_seconds', float('nan')):6.2f} s"
        + (f"  ERROR {r['error']}" if "error" in r else ""),
        flush=True,
    )


def _in_subprocess(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One model in a fresh interpreter: its memory is returned to the system when it ends."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "rows.json"
        command = [sys.executable, __file__, "--models", name, "--repeat", str(args.repeat), "--tool-repeat", str(args.tool_repeat), "--json", str(out), "--in-process", "--quiet"]
        done = subprocess.run(command, check=False)
        if done.returncode != 0 or not out.is_file():
            return [{"model": name, "tool": "all", "error": f"the benchmark subprocess exited with {done.returncode}"}]
        return json.loads(out.read_text())["rows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--tool-repeat", type=int, default=3)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "onnx_opt.json"))
    parser.add_argument("--in-process", action="store_true", help="run every model in this process (default: one subprocess each)")
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        if not args.quiet:
            print(f"== {name}", flush=True)
        if not args.in_process:
            found = _in_subprocess(name, args)
        else:
            try:
                found = bench_model(name, args.repeat, args.tool_repeat)
            except Exception as err:  # noqa: BLE001 - an export failing is reported, the rest runs
                found = [{"model": name, "tool": "export", "error": f"{type(err).__name__}: {str(err)[:200]}"}]
        rows += found
        if not args.quiet:
            for r in found:
                _print_row(r)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"versions": _versions(), "rows": rows}, indent=2))
    if not args.quiet:
        print(json.dumps(_versions()))


if __name__ == "__main__":
    main()
