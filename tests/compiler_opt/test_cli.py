"""The `compiler-opt` CLI run in-process through `main([...])`: top level, inspect, error lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compiler_opt.cli.main import main

# From the SmallCNN architecture (examples/make_example.py), not from the export: conv weights
# 432 + 2*2304 + 4608 + 2*9216, conv bias 32, 5 batch norms x 4 vectors (16,16,16,32,32 wide),
# Linear 320 + 10 = 28890 float32 parameters.
SMALL_CNN_PARAMETERS = 28890
# Conv FLOPs alone: 2 * out_elems * Cin * 9 for stem, 2 x stage1, down, 2 x stage2.
SMALL_CNN_CONV_FLOPS = 2 * 9 * (16384 * 3 + 2 * 16384 * 16 + 8192 * 16 + 2 * 2048 * 32)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _ort_outputs(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def _image() -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)}


# -- top level -----------------------------------------------------------------------------------
def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--help")
    assert code == 0
    for command in ("inspect", "convert", "passes", "--debug", "--version"):
        assert command in out


def test_version_matches_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = _run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"compiler-opt {version('compiler-opt')}"


def test_missing_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys)
    assert code == 2
    assert "a command is required" in err


def test_bad_option_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "inspect", "--no-such-flag", "m.onnx")
    assert code == 2
    assert "unrecognized arguments" in err


# -- inspect -------------------------------------------------------------------------------------
def test_inspect_json(capsys: pytest.CaptureFixture[str], example_model: Path) -> None:
    code, out, err = _run(capsys, "inspect", str(example_model), "--json")
    assert code == 0, err
    summary = json.loads(out)  # exactly one JSON document
    for key in ("format", "nodes", "edges", "ops", "inputs", "outputs", "flops", "parameter_bytes"):
        assert key in summary
    assert summary["format"] == "onnx"
    proto = onnx.load(str(example_model))
    assert summary["nodes"] == summary["top_level_nodes"] == len(proto.graph.node)
    assert summary["ops"]["Conv"] == 6 and summary["ops"]["BatchNormalization"] == 5
    assert summary["op_kinds"]["conv"] == 6
    assert sum(summary["ops"].values()) == summary["nodes"]
    # Every node-to-node edge in the proto: inputs produced by another node.
    produced = {out for node in proto.graph.node for out in node.output}
    assert summary["edges"] == sum(1 for node in proto.graph.node for i in node.input if i in produced)
    assert summary["inputs"] == [{"name": "image", "dtype": "f32", "shape": [1, 3, 32, 32], "type": "f32[1,3,32,32]"}]
    assert summary["outputs"][0]["shape"] == [1, 10]
    assert summary["parameters"] == SMALL_CNN_PARAMETERS
    assert summary["parameter_bytes"] == 4 * SMALL_CNN_PARAMETERS
    # Conv FLOPs dominate; bias, batch norm, ReLU, pools and Gemm add under 2%.
    assert SMALL_CNN_CONV_FLOPS < summary["flops"] < 1.02 * SMALL_CNN_CONV_FLOPS
    assert summary["opset_imports"] == {"": 20}


def test_inspect_table(capsys: pytest.CaptureFixture[str], example_model: Path) -> None:
    code, out, _ = _run(capsys, "inspect", str(example_model))
    assert code == 0
    assert "\x1b[" not in out  # captured stdout is not a tty: plain text, no colour codes
    lines = out.splitlines()
    assert any(line.startswith("format") and line.rstrip().endswith("onnx") for line in lines)
    assert any(line.split() == ["Conv", "6"] for line in lines)
    assert any(line.split()[:3] == ["input", "image", "f32"] for line in lines)
    assert "ai.onnx=20" in out


def _loop_model(path: Path) -> None:
    """Relu -> Loop (body: Add + Mul, 2 nodes) -> output; 1 + 1 + 2 = 4 nodes in all."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["x_in", "x_in"], ["doubled"]),
            helper.make_node("Mul", ["doubled", "doubled"], ["x_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [4, 8]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [4, 8]),
        ],
        value_info=[helper.make_tensor_value_info("doubled", TensorProto.FLOAT, [4, 8])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Loop", ["trip", "", "r"], ["y"], body=body),
        ],
        "looped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        initializer=[helper.make_tensor("trip", TensorProto.INT64, [], [3])],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [4, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_inspect_counts_subgraph_nodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "loop.onnx"
    _loop_model(path)
    code, out, err = _run(capsys, "inspect", str(path), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["top_level_nodes"] == 2
    assert summary["nodes"] == 5  # Relu, Loop, and the body's Add, Mul, Identity
    assert summary["subgraphs"] == 1
    assert summary["ops"] == {"Relu": 1, "Loop": 1, "Add": 1, "Mul": 1, "Identity": 1}
    # Relu 32 + body once (Add 32 + Mul 32; Identity and Loop are free).
    assert summary["flops"] == 96
    assert summary["parameter_bytes"] == 8
    # Node-to-node uses: Loop <- Relu, Mul <- Add (twice); `x_in`/`cond_in` are body inputs.
    assert summary["edges"] == 3


# -- errors --------------------------------------------------------------------------------------
def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    unknown = tmp_path / "model.xyz"
    unknown.write_bytes(b"whatever")
    return {
        "missing": tmp_path / "missing.onnx",
        "empty": empty,
        "random-bytes": garbage,
        "unknown-extension": unknown,
        "folder": tmp_path,
    }


@pytest.mark.parametrize("case", ["missing", "empty", "random-bytes", "unknown-extension", "folder"])
@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str, command: str
) -> None:
    path = _bad_inputs(tmp_path)[case]
    target = tmp_path / "out" / "result.onnx"
    target.parent.mkdir()
    argv = [command, str(path)] + ([str(target)] if command == "convert" else [])
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"compiler-opt: error: {path}: ")
    assert len(lines[0]) > len(f"compiler-opt: error: {path}: ") + 5  # a message follows
    assert "Traceback" not in err
    assert list(target.parent.iterdir()) == []


def test_debug_shows_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _bad_inputs(tmp_path)["empty"]
    code, _, err = _run(capsys, "inspect", str(path), "--debug")
    assert code == 2
    assert "Traceback" in err
    assert err.rstrip().splitlines()[-1].startswith("compiler-opt: error: ")


def test_internal_error_is_exit_1(capsys: pytest.CaptureFixture[str], example_model: Path, monkeypatch) -> None:
    import compiler_opt.cli.inspect_lib as inspect_lib

    def broken(path: str, **options: object) -> dict:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(inspect_lib, "summarize_model", broken)
    code, _, err = _run(capsys, "inspect", str(example_model))
    assert code == 1
    assert err.splitlines() == [
        "compiler-opt: internal error: RuntimeError: boom second line (rerun with --debug for the traceback)"
    ]


def test_verbose_logs_progress(capsys: pytest.CaptureFixture[str], example_model: Path) -> None:
    import logging

    root_level = logging.getLogger().level
    try:
        code, _, err = _run(capsys, "-v", "inspect", str(example_model), "--json")
        assert code == 0
        assert f"compiler-opt: INFO: compiler_opt.cli.inspect_lib: inspected {example_model}: 55 nodes" in err
        code, _, err = _run(capsys, "inspect", str(example_model), "-vv", "--json")  # after the command too
        assert code == 0 and err.count("inspected") == 1  # one handler, not one per call
    finally:
        logging.getLogger().setLevel(root_level)


def test_tables_use_rich_on_a_terminal(example_model: Path) -> None:
    import io

    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.inspect_lib import summarize_model, summary_tables

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    render_tables(summary_tables(summarize_model(str(example_model))), stream)
    text = stream.getvalue()
    assert "│" in text or "┃" in text  # rich's box drawing
    assert "BatchNormalization" in text and "Inputs and outputs" in text


def test_inspect_infer_shapes_fills_in_flops(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        "untyped_middle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    )
    path = tmp_path / "relus.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), str(path))
    code, out, _ = _run(capsys, "inspect", str(path), "--json")
    # `r` has no recorded shape: shape inference runs on its own (it used to report 32, issue 12)
    assert code == 0 and json.loads(out)["flops"] == 64
    code, out, _ = _run(capsys, "inspect", str(path), "--json", "--infer-shapes")
    assert code == 0 and json.loads(out)["flops"] == 64
