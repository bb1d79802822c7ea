"""StableHLO -> IR -> StableHLO without XLA HLO: every shared testdata file (dynamic and quantized
modules included), quantization parameters, decisions, and the CLI's `.mlir` -> `.mlir` path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jaxlib")

from graph_ir.dtypes import DType  # noqa: E402
from graph_ir.errors import UnsupportedOpError  # noqa: E402
from graph_ir.io.stablehlo_export import export_stablehlo_text, save_stablehlo  # noqa: E402
from graph_ir.io.stablehlo_import import import_stablehlo_text, load_stablehlo  # noqa: E402
from graph_ir.op_kinds import OpKind  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TESTDATA = ROOT.parent / "shared" / "testdata" / "external" / "stablehlo"
QUANT_CONV = "openxla-stablehlo__stablehlo__testdata__quantized__convolution_qi8.mlir"
DYNAMIC_IOTA = "openxla-stablehlo__stablehlo__testdata__dynamic__vmap_dynamic_update_slice.mlir"


def _signature(graph) -> list:
    """Op names, kinds, operand/result types and quantization of every node, in order."""
    out = []
    for node in graph.all_nodes():
        out.append((node.op_type, node.kind, [str(v.type) for v in node.inputs], [str(v.type) for v in node.outputs],
                    [v.meta.get("stablehlo.quant") for v in node.outputs]))
    for function in graph.functions.values():
        out.append(_signature(function.graph))
    return out


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_every_testdata_file_round_trips_without_hlo():
    files = sorted(TESTDATA.glob("*.mlir"))
    assert len(files) >= 40
    for path in files:
        graph = load_stablehlo(path)
        text = export_stablehlo_text(graph)
        again = import_stablehlo_text(text)
        again.verify()
        assert _signature(again) == _signature(graph), path.name
        # constants keep their data
        for a, b in zip(graph.all_nodes(), again.all_nodes()):
            if a.op_type == "stablehlo.constant" and a.attrs["value"].kind.value == "tensor":
                np.testing.assert_array_equal(a.attrs["value"].value.numpy(), b.attrs["value"].value.numpy())


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_quantized_types_keep_scale_and_zero_point():
    graph = load_stablehlo(TESTDATA / QUANT_CONV)
    graph.verify()
    quantize = [n for n in graph if n.op_type == "stablehlo.uniform_quantize"]
    assert len(quantize) == 3 and all(n.kind is OpKind.QUANTIZE for n in quantize)
    params = quantize[0].outputs[0].meta["stablehlo.quant"]
    assert params.storage == "i8" and params.expressed == "f32"
    assert params.scales == (0.0039188104517319626,) and params.zero_points == (-128,)
    assert quantize[0].outputs[0].dtype is DType.QINT8 and quantize[0].outputs[0].type.nbytes() == 9
    conv = next(n for n in graph if n.op_type == "stablehlo.convolution")
    assert conv.outputs[0].dtype is DType.QINT32 and conv.outputs[0].meta["stablehlo.quant"].zero_points == (0,)
    dequantize = next(n for n in graph if n.op_type == "stablehlo.uniform_dequantize")
    assert dequantize.kind is OpKind.DEQUANTIZE and dequantize.outputs[0].dtype is DType.FLOAT32
    text = export_stablehlo_text(graph)
    assert "!quant.uniform<i32:f32, 1.5350925350904778E-5>" in text and '"stablehlo.uniform_dequantize"' in text


def test_per_axis_quantization_and_bad_quant_type():
    text = """
func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.uniform_quantize %arg0 : (tensor<2x3xf32>) -> tensor<2x3x!quant.uniform<i8:f32:1, {0.5:1, 0.25:-2, 2.0}>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<2x3x!quant.uniform<i8:f32:1, {0.5:1, 0.25:-2, 2.0}>>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
"""
    graph = import_stablehlo_text(text)
    params = next(iter(graph)).outputs[0].meta["stablehlo.quant"]
    assert params.axis == 1 and params.scales == (0.5, 0.25, 2.0) and params.zero_points == (1, -2, 0)
    assert _signature(import_stablehlo_text(export_stablehlo_text(graph))) == _signature(graph)
    with pytest.raises(UnsupportedOpError, match="quant"):
        import_stablehlo_text(text.replace("!quant.uniform<i8:f32:1, {0.5:1, 0.25:-2, 2.0}>", "!quant.any<i8:f32>"))


def test_dynamic_iota_round_trips_and_decisions_travel(tmp_path):
    text = """
func.func @main(%n: tensor<1xi64>) -> tensor<?xf32> {
  %0 = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xi64>) -> tensor<?xf32>
  %1 = stablehlo.add %0, %0 : tensor<?xf32>
  return %1 : tensor<?xf32>
}
"""
    graph = import_stablehlo_text(text)
    add = next(n for n in graph if n.op_type == "stablehlo.add")
    add.device = "gpu:1"
    add.fusion_group = 3
    path = tmp_path / "out.mlir"
    save_stablehlo(graph, path)
    again = load_stablehlo(path)
    iota = next(n for n in again if n.op_type == "stablehlo.dynamic_iota")
    assert iota.outputs[0].shape == (None,) and iota.attrs["iota_dimension"].value == 0
    add = next(n for n in again if n.op_type == "stablehlo.add")
    assert add.device == "gpu:1" and add.fusion_group == 3 and "compiler_opt.device" not in add.attrs


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_cli_convert_mlir_to_mlir_does_not_go_through_hlo(tmp_path):
    source = TESTDATA / DYNAMIC_IOTA
    assert "stablehlo.dynamic_iota" in source.read_text()
    out = tmp_path / "copy.mlir"
    result = subprocess.run(
        [sys.executable, "-m", "compiler_opt.cli.main", "convert", str(source), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _signature(load_stablehlo(out)) == _signature(load_stablehlo(source))


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_cli_inspects_quantized_modules(capsys):
    import json

    from compiler_opt.cli.main import main

    for path in sorted(TESTDATA.glob("*quantized*.mlir")):
        assert main(["inspect", "--json", str(path)]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["format"] == "stablehlo"
        assert summary["ops"].get("stablehlo::stablehlo.uniform_quantize", 0) >= 1, summary["ops"]
