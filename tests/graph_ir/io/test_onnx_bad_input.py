"""Bad ONNX input: each problem raises its own graph_ir.errors class with a message naming the
file, node and field; the CLI turns it into exit status 2 and one line on stderr; loading never
modifies the file; no input crashes the importer with anything but a ModelFormatError or a
VerificationError."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graph_ir.errors import (
    CompilerOptError,
    CorruptModelError,
    CycleError,
    DuplicateNameError,
    EmptyModelError,
    ExternalDataError,
    InvalidShapeError,
    ModelFormatError,
    TensorDataError,
    UndefinedValueError,
    UnsupportedOpError,
    UnsupportedOpsetError,
    VerificationError,
)
from graph_ir.io.onnx_export import export_onnx
from graph_ir.io.onnx_import import load_onnx

HAS_CLI = importlib.util.find_spec("compiler_opt.cli.main") is not None


def tensor_info(name: str, shape=(2,), elem_type: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape) if shape is not None else None)


def model(nodes, *, inputs=None, outputs=None, initializers=(), value_info=(), opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "main", inputs or [tensor_info("x")], outputs or [tensor_info("y")], list(initializers), value_info=list(value_info)
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def good_model() -> onnx.ModelProto:
    then_branch = helper.make_graph([helper.make_node("Neg", ["a"], ["t"], name="neg")], "then", [], [tensor_info("t")])
    else_branch = helper.make_graph([helper.make_node("Abs", ["a"], ["e"], name="abs")], "else", [], [tensor_info("e")])
    return model(
        [
            helper.make_node("Add", ["x", "w"], ["a"], name="add"),
            helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="if"),
        ],
        inputs=[tensor_info("x"), tensor_info("c", (), TensorProto.BOOL)],
        initializers=[numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")],
    )


def write(path: Path, content: onnx.ModelProto | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.SerializeToString())
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def expect_error(path: Path, error: type[CompilerOptError], *, node: str | None = None, field: str | None = None, text: str = ""):
    """load_onnx raises exactly `error`, naming the file (and node/field when given); the file is
    unchanged afterwards; the CLI reports the same as exit status 2 and one stderr line."""
    before = digest(path)
    with pytest.raises(CompilerOptError) as info:
        load_onnx(path)
    err = info.value
    assert type(err) is error, f"{type(err).__name__}: {err}"
    message = str(err)
    assert err.file == str(path) and message.startswith(str(path)), message
    if node is not None:
        assert err.node == node and f"node '{node}'" in message, message
    if field is not None:
        assert err.field == field and f"field '{field}'" in message, message
    assert text in message, message
    assert digest(path) == before, "loading modified the file"
    return err


def run_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from compiler_opt.cli.main import main

    status = main(["inspect", str(path)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# -- one specific error per problem -----------------------------------------------------------------

# (id, model builder or raw bytes, error class, node, field, text in message)
CASES: list[tuple[str, Callable[[], onnx.ModelProto | bytes], type[CompilerOptError], str | None, str | None, str]] = [
    ("empty-file", lambda: b"", EmptyModelError, None, None, "empty"),
    (
        "cycle",
        lambda: model(
            [
                helper.make_node("Relu", ["b"], ["a"], name="first"),
                helper.make_node("Neg", ["a"], ["b"], name="second"),
                helper.make_node("Abs", ["b"], ["y"], name="third"),
            ]
        ),
        CycleError,
        None,
        None,
        "cycle",
    ),
    (
        "undefined-input",
        lambda: model([helper.make_node("Relu", ["missing"], ["y"], name="relu")]),
        UndefinedValueError,
        "relu",
        "input[0]",
        "'missing'",
    ),
    (
        "undefined-graph-output",
        lambda: model([helper.make_node("Relu", ["x"], ["r"], name="relu")]),
        UndefinedValueError,
        None,
        "y",
        "not produced",
    ),
    (
        "duplicate-node-name",
        lambda: model([helper.make_node("Relu", ["x"], ["a"], name="twin"), helper.make_node("Neg", ["a"], ["y"], name="twin")]),
        DuplicateNameError,
        "twin",
        "name",
        "used twice",
    ),
    (
        "duplicate-output-name",
        lambda: model([helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="second")]),
        DuplicateNameError,
        "second",
        "output",
        "'y'",
    ),
    (
        "duplicate-initializer",
        lambda: model(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
            initializers=[numpy_helper.from_array(np.ones(2, np.float32), "w")] * 2,
        ),
        DuplicateNameError,
        None,
        "w",
        "twice",
    ),
    (
        "unknown-op",
        lambda: model([helper.make_node("Frobnicate", ["x"], ["y"], name="frob")]),
        UnsupportedOpError,
        "frob",
        "op_type",
        "Frobnicate",
    ),
    (
        "op-newer-than-opset",  # Gelu appeared in opset 20
        lambda: model([helper.make_node("Gelu", ["x"], ["y"], name="gelu")], opset=17),
        UnsupportedOpError,
        "gelu",
        "op_type",
        "opset 17",
    ),
    (
        "opset-0",
        lambda: model([helper.make_node("Relu", ["x"], ["y"], name="relu")], opset=0),
        UnsupportedOpsetError,
        None,
        "opset_import",
        "opset 0",
    ),
    (
        "opset-10000",
        lambda: model([helper.make_node("Relu", ["x"], ["y"], name="relu")], opset=10_000),
        UnsupportedOpsetError,
        None,
        "opset_import",
        "opset 10000",
    ),
    ("raw-data-short", lambda: _with_initializer(_short_raw_data()), TensorDataError, None, "w", "shorter"),
    ("raw-data-long", lambda: _with_initializer(_long_raw_data()), TensorDataError, None, "w", "longer"),
    ("typed-data-short", lambda: _with_initializer(_short_float_data()), TensorDataError, None, "w", "float_data"),
    ("initializer-dims-2^40x2^40", lambda: _with_initializer(_huge_dims()), TensorDataError, None, "w", "elements"),
    ("initializer-negative-dim", lambda: _with_initializer(_negative_dims()), TensorDataError, None, "w", "negative"),
    (
        "value-info-dims-2^40x2^40",
        lambda: model(
            [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["y"], name="neg")],
            value_info=[tensor_info("a", (2**40, 2**40))],
        ),
        InvalidShapeError,
        None,
        "a",
        "elements",
    ),
    (
        "input-dims-2^40x2^40",
        lambda: model([helper.make_node("Relu", ["x"], ["y"], name="relu")], inputs=[tensor_info("x", (2**40, 2**40))]),
        InvalidShapeError,
        None,
        "x",
        "elements",
    ),
    ("unknown-element-type", lambda: _with_input_elem_type(99), CorruptModelError, None, "x", "element type"),
    ("invalid-utf8-node-name", lambda: _invalid_utf8(b"relu"), CorruptModelError, None, "name", "UTF-8"),
    ("model-without-graph", lambda: b"\x08\x07", EmptyModelError, None, "graph", "no graph"),  # ir_version 7 only
]


def _initializer(**fields) -> onnx.TensorProto:
    return onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, **fields)


def _short_raw_data() -> onnx.TensorProto:
    return _initializer(dims=[4], raw_data=b"\0" * 7)


def _long_raw_data() -> onnx.TensorProto:
    return _initializer(dims=[2], raw_data=b"\0" * 9)


def _short_float_data() -> onnx.TensorProto:
    return _initializer(dims=[3], float_data=[1.0, 2.0])


def _huge_dims() -> onnx.TensorProto:
    return _initializer(dims=[2**40, 2**40])


def _negative_dims() -> onnx.TensorProto:
    return _initializer(dims=[-3])


def _with_initializer(tensor: onnx.TensorProto) -> onnx.ModelProto:
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[tensor])


def _with_input_elem_type(code: int) -> onnx.ModelProto:
    bad = model([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    bad.graph.input[0].type.tensor_type.elem_type = code
    return bad


def _invalid_utf8(name: bytes) -> bytes:
    raw = model([helper.make_node("Relu", ["x"], ["y"], name=name.decode())]).SerializeToString()
    at = raw.index(name)
    return raw[:at] + b"\xff" + raw[at + 1 :]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_specific_error_naming_file_node_and_field(case, tmp_path: Path) -> None:
    name, build, error, node, field, text = case
    path = write(tmp_path / f"{name}.onnx", build())
    expect_error(path, error, node=node, field=field, text=text)


def test_cycle_error_names_the_nodes_on_the_cycle(tmp_path: Path) -> None:
    path = write(tmp_path / "cycle.onnx", CASES[1][1]())
    err = expect_error(path, CycleError)
    assert err.node in ("first", "second")
    assert "first -> second -> first" in str(err) or "second -> first -> second" in str(err)
    assert "third" not in str(err)


# -- truncated and random bytes --------------------------------------------------------------------


def _load_outcome(path: Path) -> str:
    """'verified' or the error class name; anything but a CompilerOptError fails the test."""
    try:
        graph = load_onnx(path)
        graph.verify()
    except (ModelFormatError, VerificationError) as err:
        assert err.file == str(path), str(err)
        return type(err).__name__
    export_onnx(graph)  # an accepted graph must also be exportable
    return "verified"


def test_every_truncation_point_is_an_error_or_a_verified_graph(tmp_path: Path, caplog) -> None:
    """Cutting the bytes anywhere: CorruptModelError for almost every point; a cut at a field
    boundary may leave a smaller well-formed model, which then must fail specifically or verify."""
    caplog.set_level(logging.ERROR)
    raw = good_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    outcomes: dict[str, int] = {}
    for cut in range(len(raw)):
        write(path, raw[:cut])
        outcome = _load_outcome(path)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("CorruptModelError", 0) > len(raw) // 2, outcomes
    assert outcomes.get("EmptyModelError", 0) >= 1, outcomes  # cut = 0


@pytest.mark.parametrize("cut_fraction", [0.1, 0.25, 0.5, 0.75, 0.99])
def test_truncated_model_is_corrupt(cut_fraction: float, tmp_path: Path) -> None:
    raw = good_model().SerializeToString()
    cut = int(len(raw) * cut_fraction)
    path = write(tmp_path / "truncated.onnx", raw[:cut])
    before = digest(path)
    with pytest.raises(ModelFormatError) as info:
        load_onnx(path)
    assert info.value.file == str(path)
    assert digest(path) == before


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_are_rejected(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    path = write(tmp_path / "noise.onnx", rng.bytes(int(rng.integers(16, 4096))))
    with pytest.raises(ModelFormatError) as info:
        load_onnx(path)
    assert info.value.file == str(path) and str(info.value).startswith(str(path))


def test_byte_mutations_never_crash_the_importer(tmp_path: Path, caplog) -> None:
    """Flip 1-3 random bytes of a valid model 400 times: a specific error or a verified graph."""
    caplog.set_level(logging.ERROR)
    raw = good_model().SerializeToString()
    rng = np.random.default_rng(0)
    path = tmp_path / "mutant.onnx"
    seen: set[str] = set()
    for _ in range(400):
        mutant = bytearray(raw)
        for _ in range(int(rng.integers(1, 4))):
            mutant[int(rng.integers(len(mutant)))] = int(rng.integers(256))
        write(path, bytes(mutant))
        seen.add(_load_outcome(path))
    assert "CorruptModelError" in seen and len(seen) >= 3, seen


# -- external data -----------------------------------------------------------------------------------


def _external_model(location: str) -> onnx.ModelProto:
    tensor = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value=location)
    return _with_initializer(tensor)


@pytest.mark.parametrize(
    "location,text",
    [
        ("../outside.bin", "outside"),
        ("sub/../../outside.bin", "outside"),
        ("/etc/hostname", "absolute"),
        ("missing.bin", "missing.bin"),
    ],
    ids=["parent", "sub-parent", "absolute", "missing"],
)
def test_external_data_outside_the_model_folder(location: str, text: str, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 8)
    path = write(folder / "m.onnx", _external_model(location))
    expect_error(path, ExternalDataError, field="w", text=text)


def test_external_data_through_a_symlink_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    os.symlink(tmp_path / "secret.bin", folder / "link.bin")
    path = write(folder / "m.onnx", _external_model("link.bin"))
    expect_error(path, ExternalDataError, field="w", text="symbolic link")


def test_external_data_shorter_than_the_dims(tmp_path: Path) -> None:
    (tmp_path / "short.bin").write_bytes(b"\0" * 5)  # the dims [2] of float32 need 8
    path = write(tmp_path / "m.onnx", _external_model("short.bin"))
    expect_error(path, ExternalDataError, field="w", text="holds 5 bytes, the dims need 8")


@pytest.mark.parametrize("offset,length,text", [("4", None, "holds 4 bytes"), ("4", "8", "lies outside"), ("x", None, "integer")])
def test_external_data_offset_and_length_checked(offset: str, length: str | None, text: str, tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)
    bad = _external_model("w.bin")
    bad.graph.initializer[0].external_data.add(key="offset", value=offset)
    if length is not None:
        bad.graph.initializer[0].external_data.add(key="length", value=length)
    path = write(tmp_path / "m.onnx", bad)
    expect_error(path, ExternalDataError, field="w", text=text)


# -- the CLI ------------------------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_CLI, reason="compiler_opt.cli.main is not there yet")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cli_inspect_exits_2_with_one_line(case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, build, error, node, field, text = case
    path = write(tmp_path / f"{name}.onnx", build())
    status, out, err = run_cli(path, capsys)
    assert status == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0] and text in lines[0], lines[0]
    if node is not None:
        assert f"node '{node}'" in lines[0]


@pytest.mark.skipif(not HAS_CLI, reason="compiler_opt.cli.main is not there yet")
def test_cli_inspect_of_random_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "noise.onnx", np.random.default_rng(7).bytes(512))
    status, _, err = run_cli(path, capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and str(path) in err


# -- loading never writes ------------------------------------------------------------------------------


def test_loading_a_good_model_with_external_data_modifies_nothing(tmp_path: Path) -> None:
    weights = np.arange(512, dtype=np.float32)
    good = model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        inputs=[tensor_info("x", (512,))],
        outputs=[tensor_info("y", (512,))],
        initializers=[numpy_helper.from_array(weights, "w")],
    )
    path = tmp_path / "good.onnx"
    onnx.save_model(good, path, save_as_external_data=True, location="good.bin", size_threshold=0)
    before = {p.name: (digest(p), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    graph = load_onnx(path)
    graph.verify()
    np.testing.assert_array_equal(graph.initializers["w"].const.numpy(), weights)
    export_onnx(graph)
    assert {p.name: (digest(p), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before
