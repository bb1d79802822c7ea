from __future__ import annotations

import subprocess
import sys

import passes
from graph_ir import DType, Graph, TensorType, Value


def test_public_api() -> None:
    for name in (
        "Pass",
        "PassResult",
        "PassError",
        "PassManager",
        "register_pass",
        "get_pass_class",
        "available_passes",
        "parse_pipeline",
        "format_pipeline",
        "run_pipeline",
    ):
        assert name in passes.__all__ and hasattr(passes, name)


def test_import_is_light_and_registers_the_basic_passes() -> None:
    code = (
        "import sys, passes\n"
        "heavy = [m for m in ('onnx', 'onnxruntime', 'torch', 'tensorflow', 'jax') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print(','.join(sorted(passes.available_passes())))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # installed plugins may add more
    assert {"constant-folding", "cse", "dce", "shape-infer", "topo-sort"} <= set(out.strip().split(","))


def test_run_pipeline_accepts_instances() -> None:
    graph = Graph("main")
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, (2,))))
    graph.add_node("Relu", [x])
    graph.add_output(x)
    result = passes.run_pipeline(graph, [passes.get_pass_class("dce")()], verify_each=True)
    assert result.modified and len(graph) == 0
