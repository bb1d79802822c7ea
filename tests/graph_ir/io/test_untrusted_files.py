"""Untrusted model files: ONNX external data through onnx's own checks, one test per known CVE
class (path traversal, absolute paths and symlinks are in test_onnx_bad_input.py; hard links and
symlinked folders here), no unpickling anywhere in the library, and atomic writes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from graph_ir import Graph, Node, TensorType, Value
from graph_ir.dtypes import DType
from graph_ir.types import OpaqueType
from graph_ir.errors import CompilerOptError, ExternalDataError
from graph_ir.io import save
from graph_ir.io.onnx_import import load_onnx

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ("graph_ir", "cost_model", "compiler_opt", "passes")


def _model_with_external(folder: Path, location: str) -> Path:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value=location)
    graph = helper.make_graph([helper.make_node("Neg", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=[tensor])
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_external_data_through_a_hard_link_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 8)
    try:
        os.link(secret, folder / "link.bin")
    except OSError:
        pytest.skip("this file system has no hard links")
    with pytest.raises(ExternalDataError, match="hard link") as info:
        load_onnx(_model_with_external(folder, "link.bin"))
    assert info.value.field == "w"


def test_external_data_through_a_symlinked_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"\0" * 8)
    os.symlink(outside, folder / "sub")
    with pytest.raises(ExternalDataError) as info:
        load_onnx(_model_with_external(folder, "sub/w.bin"))
    assert info.value.field == "w"
    # the same data in a real subfolder loads: the refusal is about the link
    os.unlink(folder / "sub")
    (folder / "sub").mkdir()
    (folder / "sub" / "w.bin").write_bytes(b"\0" * 8)
    assert load_onnx(_model_with_external(folder, "sub/w.bin")) is not None


# Calls that run code or build arbitrary objects from file contents.
_UNSAFE = [
    (re.compile(r"\bpickle\.loads?\(|\bcPickle\b|\bdill\.loads?\(|\bjoblib\.load\("), "unpickling"),
    (re.compile(r"\bmarshal\.loads?\("), "marshal"),
    (re.compile(r"allow_pickle\s*=\s*True"), "numpy pickles"),
    (re.compile(r"\byaml\.load\((?![^)]*SafeLoader)"), "yaml.load without SafeLoader"),
    (re.compile(r"torch\.jit\.load\("), "TorchScript loading runs code"),
]


def test_library_never_unpickles():
    offenders = []
    for package in LIBRARY:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            for pattern, why in _UNSAFE:
                for match in pattern.finditer(text):
                    offenders.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {why}")
            offenders += [f"{path.relative_to(ROOT)}:{line}: torch.load without weights_only=True" for line in _unsafe_torch_loads(text)]
    assert not offenders, offenders


def _unsafe_torch_loads(text: str) -> list[int]:
    """Lines of `torch.load(...)` calls that do not pass `weights_only=True` (read from the syntax
    tree, so nested parentheses in the arguments do not fool it)."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "load" and isinstance(func.value, ast.Name) and func.value.id == "torch":
            safe = any(k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords)
            if not safe:
                lines.append(node.lineno)
    return lines


def test_the_torch_load_check_reads_calls_not_text():
    assert _unsafe_torch_loads("import torch\ntorch.load(open(p), map_location='cpu')\n") == [2]
    assert _unsafe_torch_loads("import torch\ntorch.load(os.fspath(p), map_location='cpu', weights_only=True)\n") == []
    assert _unsafe_torch_loads("import torch\ntorch.load(p, weights_only=False)\n") == [2]


def _unexportable_graph() -> Graph:
    graph = Graph("g")
    x = graph.add_input(Value("x", OpaqueType("handle")))  # no format can write this input
    node = graph.append(Node("Frobnicate", [x], outputs=[Value("y", TensorType(DType.FLOAT32, (2,)))], domain="nowhere.example"))
    graph.add_output(node.outputs[0])
    return graph


@pytest.mark.parametrize("suffix", [".onnx", ".pb", ".hlo", ".mlir"])
def test_a_failed_save_leaves_the_existing_file_untouched(suffix, tmp_path):
    target = tmp_path / f"model{suffix}"
    target.write_bytes(b"precious")
    with pytest.raises(CompilerOptError):
        save(_unexportable_graph(), target)
    assert target.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left behind
