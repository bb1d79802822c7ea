"""Import/export speed and import memory of our IR against onnx_ir and onnx, on the same files.

    python benchmarks/bench_import.py [--cases densenet121,random-dag] [--nodes 100000]
                                      [--repeat 5] [--json PATH] [--no-memory]

Cases (built from code or taken from shared/testdata, cached, nothing downloaded):
- densenet121: DenseNet-121 written as a torch module (compiler_opt.workloads.densenet),
  exported with the dynamo-based torch.onnx.export, random weights (~32 MB, ~370 nodes);
- random-dag: a random DAG of realistic typed ops (compiler_opt.workloads.synthetic),
  100,000 nodes by default;
- llama-hlo: the largest HLO module in shared/testdata (Llama-3.1 8B, ~25k instructions),
  beside XLA's own text parser (jaxlib `hlo_module_from_text` + reading its HloModuleProto);
- inception-train-tf: the GraphDef of an InceptionV3 training step (Keras, weights=None,
  GradientTape + SGD, ~9.9k nodes), beside TensorFlow's `GraphDef.ParseFromString`; our row
  with TF shape inference (the default) and one without (`graph_ir-noinfer`).

Times are medians over --repeat runs in this process, after one warm-up, tools interleaved.
Import memory is the peak-RSS growth of a fresh subprocess per tool while it loads the file,
measured from the process after its imports. Ratios are against each format's baseline
(BASELINES). Goal (ONNX): our import <= 3x onnx_ir's time and <= 2x its memory; for HLO and
GraphDef the framework's own parse is reported beside ours (it builds no graph, so the ratio
shows what our graph building and verification cost on top of parsing).

Adding a format: add its Tools to TOOLS and its baseline to BASELINES under the format name,
and its Case to CASES; the rest of the script does not change.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script from a source checkout
    sys.path.insert(0, str(REPO_ROOT))

DEFAULT_JSON = REPO_ROOT / "benchmarks" / "results" / "bench_import.json"
OURS = "graph_ir"
BASELINE = "onnx_ir"
# The tool every other row of a format is compared with.
BASELINES = {"onnx": "onnx_ir", "hlo": "xla", "tf": "tensorflow"}
# Formats with a stated goal for our import (time and memory ratios against the baseline).
GOAL_FORMATS = {"onnx"}
GOAL_TIME_RATIO = 3.0
GOAL_MEMORY_RATIO = 2.0


@dataclass(frozen=True)
class Tool:
    """One library's loader and saver, as 'module:function' specs (resolved lazily)."""

    name: str
    load: str
    save: str  # called as save(loaded_object, path)

    def loader(self) -> Callable[[str], Any]:
        return _resolve(self.load)

    def saver(self) -> Callable[[Any, str], None]:
        return _resolve(self.save)


@dataclass(frozen=True)
class Case:
    name: str
    format: str
    build: Callable[[argparse.Namespace], Path]


def _resolve(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


TOOLS: dict[str, list[Tool]] = {
    "onnx": [
        Tool(OURS, "graph_ir.io.onnx_import:load_onnx", "graph_ir.io.onnx_export:save_onnx"),
        Tool(BASELINE, "onnx_ir:load", "onnx_ir:save"),
        Tool("onnx", "onnx:load", "onnx:save"),
    ],
    "hlo": [
        Tool(OURS, "graph_ir.io.hlo_import:load_hlo", "graph_ir.io.hlo_export:save_hlo"),
        Tool("xla", "benchmarks.bench_import:xla_parse", "benchmarks.bench_import:xla_print"),
    ],
    "tf": [
        Tool(OURS, "graph_ir.io.tf_import:load_tf", "graph_ir.io.tf_export:save_graphdef"),
        Tool("graph_ir-noinfer", "benchmarks.bench_import:load_tf_without_inference", "graph_ir.io.tf_export:save_graphdef"),
        Tool("tensorflow", "benchmarks.bench_import:tf_parse", "benchmarks.bench_import:tf_serialize"),
    ],
}


# -- framework baselines: their own parser, no graph of ours built ----------------------------------
def xla_parse(path: str):  # type: ignore[no-untyped-def]
    """XLA's text parser plus reading the module as a proto (what our importer starts from)."""
    from graph_ir.io.xla_bridge import parse_hlo_text

    return parse_hlo_text(Path(path).read_text())


def xla_print(module_proto, path: str) -> None:  # type: ignore[no-untyped-def]
    from graph_ir.io.xla_bridge import hlo_proto_to_text

    Path(path).write_text(hlo_proto_to_text(module_proto))


def tf_parse(path: str):  # type: ignore[no-untyped-def]
    from tensorflow.core.framework import graph_pb2

    return graph_pb2.GraphDef.FromString(Path(path).read_bytes())


def tf_serialize(graph_def, path: str) -> None:  # type: ignore[no-untyped-def]
    Path(path).write_bytes(graph_def.SerializeToString())


def load_tf_without_inference(path: str):  # type: ignore[no-untyped-def]
    from graph_ir.io.tf_import import load_tf

    return load_tf(path, infer_shapes=False)


def _densenet(args: argparse.Namespace) -> Path:
    from compiler_opt.workloads.densenet import cached_densenet121_onnx

    return cached_densenet121_onnx(args.cache)


def _random_dag(args: argparse.Namespace) -> Path:
    from compiler_opt.workloads.synthetic import cached_random_dag_onnx

    return cached_random_dag_onnx(args.nodes, cache=args.cache)


def _largest_hlo(args: argparse.Namespace) -> Path:
    folder = REPO_ROOT.parent / "shared" / "testdata" / "external" / "hlo"
    path = folder / "openxla-xla__xla__tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: the llama-hlo case needs shared/testdata beside the checkout")
    return path


def _inception_train_graphdef(args: argparse.Namespace) -> Path:
    """Build (once, then cached) the GraphDef of an InceptionV3 training step."""
    cache = Path(args.cache or os.environ.get("COMPILER_OPT_CACHE", Path.home() / ".cache" / "compiler-opt"))
    path = cache / "bench" / "inception_v3_train_step.pb"
    if path.is_file():
        return path
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.InceptionV3(weights=None)
    optimizer = tf.keras.optimizers.SGD(0.01)

    @tf.autograph.experimental.do_not_convert
    def step(images, labels):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    concrete = tf.function(step).get_concrete_function(
        tf.TensorSpec([8, 299, 299, 3], tf.float32), tf.TensorSpec([8], tf.int32)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(concrete.graph.as_graph_def().SerializeToString())
    os.replace(tmp, path)
    return path


CASES: list[Case] = [
    Case("densenet121", "onnx", _densenet),
    Case("random-dag", "onnx", _random_dag),
    Case("llama-hlo", "hlo", _largest_hlo),
    Case("inception-train-tf", "tf", _inception_train_graphdef),
]


# -- measurement ---------------------------------------------------------------------------------
def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def time_tools(tools: list[Tool], path: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Median import and export milliseconds per tool; tools interleaved within each round."""
    loaded: dict[str, Any] = {}
    imports: dict[str, list[float]] = {t.name: [] for t in tools}
    exports: dict[str, list[float]] = {t.name: [] for t in tools}
    with tempfile.TemporaryDirectory(prefix="bench_import.") as tmp:
        for round_index in range(repeat + 1):  # round 0 warms caches up and is discarded
            for tool in tools:
                load, save = tool.loader(), tool.saver()
                loaded.pop(tool.name, None)
                gc.collect()
                start = time.perf_counter()
                obj = load(str(path))
                took_load = time.perf_counter() - start
                out = os.path.join(tmp, f"{tool.name}{path.suffix}")
                start = time.perf_counter()
                save(obj, out)
                took_save = time.perf_counter() - start
                loaded[tool.name] = obj
                if round_index:
                    imports[tool.name].append(took_load)
                    exports[tool.name].append(took_save)
        loaded.clear()
    return {
        t.name: {"import_ms": _median_ms(imports[t.name]), "export_ms": _median_ms(exports[t.name])} for t in tools
    }


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux >= 4.0); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    """VmHWM: this process image's peak RSS. (ru_maxrss would also count the forked parent.)"""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _memory_child(format_name: str, tool_name: str, path: str) -> None:
    """Runs in a fresh interpreter: import the tool, then report the peak RSS growth of one load."""
    import psutil

    tool = next(t for t in TOOLS[format_name] if t.name == tool_name)
    load = tool.loader()
    gc.collect()
    baseline = psutil.Process().memory_info().rss
    exact = _reset_peak_rss()
    obj = load(path)
    rss_after = psutil.Process().memory_info().rss
    # Without a peak reset, an import-time peak above the load's would hide it; the current RSS then bounds it.
    peak = max(_peak_rss_bytes(), rss_after) if exact else rss_after
    json.dump({"rss_delta_bytes": peak - baseline, "peak_exact": exact, "kept": obj is not None}, sys.stdout)


def measure_memory(format_name: str, tool: Tool, path: Path) -> float:
    """Peak RSS growth (MB) of loading `path` with `tool`, in a fresh subprocess."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--memory-child", format_name, tool.name, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe for {tool.name} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["rss_delta_bytes"] / 1e6


# -- driver --------------------------------------------------------------------------------------
def run_case(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    path = case.build(args)
    tools = TOOLS[case.format]
    timings = time_tools(tools, path, args.repeat)
    rows = []
    for tool in tools:
        row: dict[str, Any] = {"tool": tool.name, **timings[tool.name]}
        row["import_memory_mb"] = None if args.no_memory else measure_memory(case.format, tool, path)
        rows.append(row)
    baseline = BASELINES[case.format]
    base = next(r for r in rows if r["tool"] == baseline)
    for row in rows:
        row["import_ratio"] = row["import_ms"] / base["import_ms"]
        row["export_ratio"] = row["export_ms"] / base["export_ms"]
        mem, base_mem = row["import_memory_mb"], base["import_memory_mb"]
        row["memory_ratio"] = None if mem is None or not base_mem else mem / base_mem
    ours = next(r for r in rows if r["tool"] == OURS)
    goal: dict[str, bool] = {}
    if case.format in GOAL_FORMATS:
        goal["time"] = ours["import_ratio"] <= GOAL_TIME_RATIO
        if ours["memory_ratio"] is not None:
            goal["memory"] = ours["memory_ratio"] <= GOAL_MEMORY_RATIO
    return {
        "case": case.name,
        "format": case.format,
        "baseline": baseline,
        "file": str(path),
        "file_mb": path.stat().st_size / 1e6,
        "rows": rows,
        "goal_met": goal,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_report(results: list[dict[str, Any]]) -> str:
    header = (
        f"{'case':<19} {'tool':<16} {'import ms':>10} {'x base':>9} {'export ms':>10} {'x base':>9} "
        f"{'import MB':>10} {'x base':>9}"
    )
    lines = [header, "-" * len(header)]
    for result in results:
        for row in result["rows"]:
            tool = row["tool"] + (" *" if row["tool"] == result["baseline"] else "")
            lines.append(
                f"{result['case']:<19} {tool:<16} {row['import_ms']:>10.1f} {row['import_ratio']:>9.2f} "
                f"{row['export_ms']:>10.1f} {row['export_ratio']:>9.2f} {_fmt(row['import_memory_mb'], '.1f'):>10} "
                f"{_fmt(row['memory_ratio'], '.2f'):>9}"
            )
    lines.append("")
    lines.append("* the baseline of its format; 'x base' columns are ratios to it")
    lines.append(f"goal (ONNX): {OURS} import <= {GOAL_TIME_RATIO:g}x {BASELINE} time and <= {GOAL_MEMORY_RATIO:g}x its memory")
    for result in results:
        verdicts = ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in result["goal_met"].items()) or "no goal stated"
        lines.append(f"  {result['case']} ({result['file_mb']:.1f} MB file): {verdicts}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(c.name for c in CASES), help="comma-separated (default: all)")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes in the random DAG (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per tool (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results (default: %(default)s)")
    parser.add_argument("--cache", type=Path, default=None, help="workload cache folder (default: the user cache)")
    parser.add_argument("--no-memory", action="store_true", help="skip the per-tool memory subprocesses")
    parser.add_argument("--memory-child", nargs=3, metavar=("FORMAT", "TOOL", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        _memory_child(*args.memory_child)
        return 0
    known = {c.name: c for c in CASES}
    wanted = [name.strip() for name in args.cases.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    results = [run_case(known[name], args) for name in wanted]
    print(format_report(results))
    payload = {
        "benchmark": "bench_import",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "goal": {"import_time_ratio_max": GOAL_TIME_RATIO, "import_memory_ratio_max": GOAL_MEMORY_RATIO},
        "results": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
