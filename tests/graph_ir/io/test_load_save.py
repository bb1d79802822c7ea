"""graph_ir.load / graph_ir.save: format choice, module selection, errors naming the file, atomic
saves with side files (the file work the CLI used to do itself)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import graph_ir
from graph_ir.errors import CompilerOptError, UnknownFormatError
from graph_ir.io import load_with_format

EXAMPLE = Path("examples/small_cnn.onnx")

TWO_MODULES = """HloModule first

ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

// -----

HloModule second

ENTRY main {
  p = f32[4] parameter(0)
  a = f32[4] abs(p)
  ROOT t = f32[4] tanh(a)
}
"""


def test_load_reports_the_format_and_selects_hlo_modules(tmp_path: Path) -> None:
    graph, fmt = load_with_format(EXAMPLE)
    assert fmt == "onnx" and len(graph) == 55
    path = tmp_path / "two.hlo"
    path.write_text(TWO_MODULES)
    assert [n.op_type for n in graph_ir.load(path, module=1)] == ["abs", "tanh"]
    with pytest.raises(UnknownFormatError, match="--module applies to HLO text files, not onnx"):
        graph_ir.load(EXAMPLE, module=0)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        graph_ir.load(tmp_path / "missing.onnx")
    (tmp_path / "folder.onnx").mkdir()
    with pytest.raises(IsADirectoryError):
        graph_ir.load(tmp_path / "folder.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a model at all")
    with pytest.raises(CompilerOptError) as caught:
        graph_ir.load(bad)
    assert caught.value.file is not None and str(bad) in str(caught.value.file)


def test_save_is_atomic_and_moves_side_files_in(tmp_path: Path) -> None:
    graph = graph_ir.load(EXAMPLE)
    target = tmp_path / "out.onnx"
    # A tiny threshold forces the external-data path: the weights go to a side file.
    graph_ir.save(graph, target, external_data_threshold=1)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "out.onnx" in names and len(names) == 2, names  # the model and its data, no staging folder
    model = onnx.load(str(target), load_external_data=False)
    onnx.checker.check_model(str(target), full_check=True)
    assert any(init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer)
    again = graph_ir.load(target)
    for value in graph.initializers.values():
        np.testing.assert_array_equal(again.initializers[value.name].const.numpy(), value.const.numpy())


def test_a_failed_save_leaves_the_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "out.hlo"
    target.write_text("precious")
    graph = graph_ir.load(EXAMPLE)  # ONNX ops cannot be written as HLO
    with pytest.raises(CompilerOptError) as caught:
        graph_ir.save(graph, target)
    assert caught.value.file == str(target)
    assert target.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hlo"]


def test_check_writable_path_is_what_save_checks(tmp_path: Path) -> None:
    from graph_ir.io.formats import check_writable_path

    assert check_writable_path(tmp_path / "m.onnx").name == "onnx"
    with pytest.raises(FileNotFoundError, match="output folder does not exist"):
        check_writable_path(tmp_path / "missing" / "m.onnx")
    with pytest.raises(IsADirectoryError):
        (tmp_path / "d.onnx").mkdir()
        check_writable_path(tmp_path / "d.onnx")
    with pytest.raises(UnknownFormatError):
        check_writable_path(tmp_path / "m.txt")
