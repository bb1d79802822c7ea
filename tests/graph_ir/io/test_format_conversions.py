"""Conversions between formats: the XLA paths that map ops, and clear errors where none do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jaxlib")
pytest.importorskip("tensorflow", reason="the HLO proto schema ships with the TensorFlow wheel")

from compiler_opt.cli.main import main  # noqa: E402
from graph_ir.errors import ExportError  # noqa: E402
from graph_ir.io.hlo_export import export_hlo_text  # noqa: E402
from graph_ir.io.hlo_import import import_hlo_text, load_hlo  # noqa: E402
from graph_ir.io.onnx_export import export_onnx  # noqa: E402
from graph_ir.io.stablehlo_import import load_stablehlo_as_hlo  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "small_cnn.onnx"


def _constants(graph):
    return {n.name: n.attr("literal").numpy() for n in graph.all_nodes() if n.attr("literal") is not None}


def test_large_constants_survive_hlo_export():
    values = ", ".join(str(i) for i in range(64))
    graph = import_hlo_text(
        f"HloModule m\nENTRY e {{\n  c = f32[64] constant({{{values}}})\n  ROOT n = f32[64] negate(c)\n}}\n"
    )
    again = import_hlo_text(export_hlo_text(graph))
    np.testing.assert_array_equal(_constants(again)["c"], np.arange(64, dtype=np.float32))


def test_stablehlo_to_hlo_to_stablehlo_keeps_ops_and_data(tmp_path):
    import jax
    import jax.numpy as jnp

    weights = np.arange(24, dtype=np.float32).reshape(4, 6) / 7.0

    def fn(x):
        return jnp.tanh(x @ jnp.asarray(weights)).sum(axis=0)

    source = tmp_path / "fn.mlir"
    source.write_text(jax.jit(fn).lower(np.ones((3, 4), np.float32)).as_text())
    assert main(["convert", str(source), str(tmp_path / "fn.hlo")]) == 0
    hlo = load_hlo(tmp_path / "fn.hlo")
    assert any(n.op_type == "dot" for n in hlo.all_nodes())
    constant = next(v for v in _constants(hlo).values() if v.shape == (4, 6))
    np.testing.assert_allclose(constant, weights)
    assert main(["convert", str(tmp_path / "fn.hlo"), str(tmp_path / "back.mlir")]) == 0
    again = load_stablehlo_as_hlo(tmp_path / "back.mlir")
    assert sorted(n.op_type for n in again.all_nodes()) == sorted(n.op_type for n in hlo.all_nodes())


@pytest.mark.parametrize("target", ["x.onnx", "x.pb"])
def test_hlo_graph_cannot_be_written_as_other_formats(tmp_path, target, capsys):
    graph = import_hlo_text("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = f32[2] negate(a)\n}\n")
    with pytest.raises(ExportError, match="XLA HLO"):
        export_onnx(graph)
    source = tmp_path / "m.hlo"
    source.write_text(export_hlo_text(graph))
    assert main(["convert", str(source), str(tmp_path / target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no" in err[0] and "mapping" in err[0]
    assert not (tmp_path / target).exists()


def test_onnx_graph_cannot_be_written_as_hlo(tmp_path, capsys):
    assert main(["convert", str(EXAMPLE), str(tmp_path / "cnn.hlo")]) == 2
    assert "cannot write HLO" in capsys.readouterr().err
    assert not (tmp_path / "cnn.hlo").exists()
