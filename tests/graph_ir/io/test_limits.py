"""Resource limits (graph_ir.io.limits): each one refuses an input over it with LimitExceededError
naming the limit, and the documented overrides (environment, `override`) raise it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from cost_model.profiled import load_profiled_workload
from graph_ir.errors import LimitExceededError
from graph_ir.io import limits
from graph_ir.io.hlo_import import load_hlo
from graph_ir.io.onnx_import import load_onnx

ROOT = Path(__file__).resolve().parents[3]
HLO = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
"""


def _onnx(tmp_path: Path, nodes: int = 3, dims=(2,)) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Neg", [f"x{i}"], [f"x{i + 1}"]) for i in range(nodes)], "g",
        [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"x{nodes}", TensorProto.FLOAT, [2])],
        initializer=[TensorProto(name="w", data_type=TensorProto.FLOAT, dims=list(dims), raw_data=b"") if dims != (2,)
                     else helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_node_count_limit_and_override(tmp_path):
    path = _onnx(tmp_path, nodes=5)
    with limits.override(max_nodes=4):
        with pytest.raises(LimitExceededError) as info:
            load_onnx(path)
    assert info.value.field == "max_nodes" and "5" in str(info.value) and "COMPILER_OPT_LIMITS" in str(info.value)
    assert len(load_onnx(path)) == 5  # default limit
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    with limits.override(max_nodes=0), pytest.raises(LimitExceededError, match="node count"):
        load_hlo(hlo)


def test_text_size_and_nesting(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    with limits.override(max_text_bytes=10), pytest.raises(LimitExceededError) as info:
        load_hlo(hlo)
    assert info.value.field == "max_text_bytes" and str(hlo) in str(info.value)
    deep = tmp_path / "deep.hlo"
    deep.write_text("HloModule m\nENTRY e {\n  ROOT p = " + "(" * 5000 + "f32[]" + ")" * 5000 + " parameter(0)\n}\n")
    with pytest.raises(LimitExceededError, match="line 3: brackets nest deeper than 256") as info:
        load_hlo(deep)
    assert info.value.field == "max_nesting_depth"
    nested = tmp_path / "w.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LimitExceededError):
        load_profiled_workload(nested)
    # strings do not count: 300 brackets inside a string literal are no nesting
    limits.check_nesting('"' + "(" * 300 + '"')


def test_tensor_elements_and_external_data(tmp_path):
    path = _onnx(tmp_path, dims=(2**21, 2**21))  # 2**42 elements declared, no data
    with pytest.raises(LimitExceededError) as info:
        load_onnx(path)
    assert info.value.field == "max_tensor_elements"
    folder = tmp_path / "ext"
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"\0" * 64)
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16], data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value="w.bin")
    graph = helper.make_graph([helper.make_node("Neg", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], initializer=[tensor])
    model_path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_path)
    with limits.override(max_external_data_bytes=32), pytest.raises(LimitExceededError) as info:
        load_onnx(model_path)
    assert info.value.field == "max_external_data_bytes"
    load_onnx(model_path)


def test_environment_override_and_bad_values(tmp_path):
    path = _onnx(tmp_path, nodes=5)
    code = "import sys; from graph_ir.io.onnx_import import load_onnx; load_onnx(sys.argv[1])"
    env = dict(os.environ, PYTHONPATH=str(ROOT), COMPILER_OPT_LIMITS="max_nodes=4")
    result = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "LimitExceededError" in result.stderr
    env["COMPILER_OPT_LIMITS"] = "max_nodes=1e3, max_text_bytes=2e9"
    result = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    os.environ["COMPILER_OPT_LIMITS"] = "max_bogus=3"
    try:
        with pytest.raises(Exception, match="unknown limit 'max_bogus'"):
            limits.current()
    finally:
        del os.environ["COMPILER_OPT_LIMITS"]
    with pytest.raises(TypeError):
        with limits.override(max_bogus=1):
            pass
    assert json.dumps(limits.current().max_nodes)


_CONV = """func.func @main(%x: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, INDEX, f]x[0, 1, i, o]->[b, 0, 1, f], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32>
  return %0 : tensor<1x2x2x1xf32>
}
"""


def test_a_huge_dimension_index_is_refused_before_mlir_parses_it(tmp_path: Path) -> None:
    # Found by the fuzz smoke test: MLIR's parser sized a vector by the index (6 GB for 2**31 - 1).
    from graph_ir.io.stablehlo_import import load_stablehlo

    path = tmp_path / "conv.mlir"
    path.write_text(_CONV.replace("INDEX", "2147483647"))
    with pytest.raises(LimitExceededError, match=r"dim_numbers \(line 2\) is 2147483647") as info:
        load_stablehlo(path)
    assert info.value.file == str(path) and info.value.field == "max_dimension_index"
    path.write_text(_CONV.replace("INDEX", "1"))
    assert any("convolution" in node.op_type for node in load_stablehlo(path))
