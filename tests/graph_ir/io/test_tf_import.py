"""TF GraphDef import/export: every shared testdata file, the mapping on small graphs, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from graph_ir import TensorType  # noqa: E402
from graph_ir.attrs import AttrKind  # noqa: E402
from graph_ir.dtypes import DType  # noqa: E402
from graph_ir.errors import (  # noqa: E402
    CompilerOptError,
    CorruptModelError,
    CycleError,
    DuplicateNameError,
    EmptyModelError,
    LimitExceededError,
    ModelFormatError,
    TypeConsistencyError,
    UndefinedValueError,
    UnsupportedOpError,
)
from graph_ir.io import load  # noqa: E402
from graph_ir.io.tf_export import export_graphdef, save_graphdef  # noqa: E402
from graph_ir.io.tf_import import import_graphdef, load_tf, read_graphdef, tf_topological_order  # noqa: E402
from graph_ir.op_kinds import OpKind  # noqa: E402

TESTDATA = Path(__file__).resolve().parents[3].parent / "shared" / "testdata" / "external" / "tf"

# Files that must fail, and the error each deserves (checked by reading the files).
EXPECTED_FAILURES = {
    # node y_reshape reads "y_shape", which the file never defines (tfcompile feeds it)
    "tensorflow-tensorflow__tensorflow__compiler__aot__test_graph_tfadd.pbtxt": UndefinedValueError,
    # function MyAdd's node Add reads its own output: the grappler test's deliberate error
    "tensorflow-tensorflow__tensorflow__core__grappler__costs__graph_properties_testdata__function_error.pbtxt": CycleError,
}
# Files that TensorFlow 2.21 itself refuses: they import with one warning (TF enriches, it does
# not veto) and fail only under `strict=True`.
TF_REJECTS = {
    # a node of op "Weird": a TensorBoard rendering demo; kept as an opaque node
    "tensorflow-tensorboard__tensorboard__plugins__graph__tf_graph_app__demo__data__graph.pbtxt": UnsupportedOpError,
    # ParseExample's dense_shapes in this old test graph no longer pass today's shape function
    "tensorflow-tensorflow__tensorflow__core__example__testdata__parse_example_graph_def.pbtxt": TypeConsistencyError,
    # an instantiated function body (_Arg/_Retval nodes named "__inference_..."): TF's importer
    # refuses node names that start with "_"
    "tensorflow-tensorflow__tensorflow__compiler__mlir__tensorflow__tests__graphdef2mlir__switch_n.pbtxt": ModelFormatError,
}


def _testdata_files() -> list[Path]:
    return sorted(TESTDATA.glob("*.pb*")) + sorted((TESTDATA / "saved_model").glob("*.pb*"))


def _by_name(nodes) -> dict:
    return {n.name: n for n in nodes}


def _assert_lossless(source, exported) -> None:
    """Same NodeDefs (by name: the IR orders nodes topologically), library, versions."""
    assert _by_name(exported.node) == _by_name(source.node)
    assert exported.versions == source.versions
    assert list(exported.library.gradient) == list(source.library.gradient)
    src_functions = {f.signature.name: f for f in source.library.function}
    out_functions = {f.signature.name: f for f in exported.library.function}
    assert src_functions.keys() == out_functions.keys()
    for name, src in src_functions.items():
        out = out_functions[name]
        assert _by_name(out.node_def) == _by_name(src.node_def), name
        assert dict(out.ret) == dict(src.ret), name
        src_shell, out_shell = type(src)(), type(out)()
        src_shell.CopyFrom(src)
        out_shell.CopyFrom(out)
        for shell in (src_shell, out_shell):
            del shell.node_def[:]
            shell.ClearField("ret")
        assert out_shell == src_shell, name


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_every_testdata_file_imports_or_fails_clearly():
    files = _testdata_files()
    assert len(files) >= 40
    imported = 0
    for path in files:
        expected = EXPECTED_FAILURES.get(path.name) or TF_REJECTS.get(path.name)
        if expected is not None:
            with pytest.raises(expected) as info:
                load_tf(path, strict=True)
            assert type(info.value) is expected, (path.name, info.value)
            assert str(path) in str(info.value) and info.value.node, info.value
            if path.name in EXPECTED_FAILURES:
                continue
        graph = load_tf(path)
        assert ("tf.import_warning" in graph.meta) == (path.name in TF_REJECTS), path.name
        graph.verify()
        source, _ = read_graphdef(path)
        assert len(graph) == len(source.node), path.name
        assert len(graph.functions) == len(source.library.function), path.name
        for fdef in source.library.function:
            body = graph.functions[("tf", fdef.signature.name, "")].graph
            assert len(body) == len(fdef.node_def), (path.name, fdef.signature.name)
            assert len(body.inputs) == len(fdef.signature.input_arg)
            assert len(body.outputs) == len(fdef.signature.output_arg)
        _assert_lossless(source, export_graphdef(graph))
        imported += 1
    assert imported == len(files) - len(EXPECTED_FAILURES)


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_testdata_types_devices_and_v1_loops():
    keras = load_tf(TESTDATA / "tensorflow-tensorflow__tensorflow__compiler__jit__tests__keras_imagenet_main.pbtxt")
    source, _ = read_graphdef(TESTDATA / "tensorflow-tensorflow__tensorflow__compiler__jit__tests__keras_imagenet_main.pbtxt")
    assert {n.name: n.device for n in keras} == {n.name: n.device or None for n in source.node}
    conv = next(n for n in keras if n.op_type == "Conv2D")
    assert conv.kind is OpKind.CONV
    out = conv.outputs[0].type
    assert out.dtype is DType.FLOAT16 is conv.attr("T").dtype  # a mixed-precision model
    assert out.shape is not None and out.shape.rank == 4

    loop = load_tf(TESTDATA / "tensorflow-tensorflow__tensorflow__core__grappler__costs__graph_properties_testdata__while_loop.pbtxt")
    merges = [n for n in loop if n.op_type == "Merge"]
    assert merges and all(n.inputs[1] is None and n.meta["tf.back_edges"] for n in merges)
    for merge in merges:
        producer = loop.find_node(merge.meta["tf.back_edges"][1].split(":")[0])
        assert producer.op_type == "NextIteration" and producer.kind is OpKind.SEND
    order = {n: i for i, n in enumerate(loop)}
    for node in loop:  # control inputs come first too
        for name in node.meta.get("control_predecessors", ()):
            assert order[loop.find_node(name)] < order[node]


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_saved_model_folder_and_format_registry(tmp_path):
    src = TESTDATA / "saved_model" / "tensorflow-tensorflow__tensorflow__c__experimental__saved_model__internal__testdata__SimpleWhileLoop__saved_model.pb"
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(src, folder / "saved_model.pb")
    graph = load_tf(folder)
    graph.verify()
    assert "serving_default" in graph.meta["tf.signatures"]
    whiles = [n for f in graph.functions.values() for n in f.graph if n.op_type == "StatelessWhile"]
    assert whiles and whiles[0].kind is OpKind.LOOP
    assert ("tf", whiles[0].attr("body"), "") in graph.functions  # called functions by name
    again = load(TESTDATA / "onnx-tensorflow-onnx__tests__models__regression__graphdef__frozen.pb")
    assert len(again) == 8
    save_graphdef(again, tmp_path / "out.pbtxt")
    assert len(load(tmp_path / "out.pbtxt")) == 8
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(EmptyModelError, match="saved_model.pb"):
        load_tf(tmp_path / "empty_dir")


# -- small graphs written by hand -------------------------------------------------------------
def _write(tmp_path: Path, text: str, name: str = "g.pbtxt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


CONST = 'attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1.5 } } }'


def test_control_inputs_order_attrs_and_decisions(tmp_path):
    text = f"""
node {{ name: "b" op: "Identity" input: "a" input: "^c" attr {{ key: "T" value {{ type: DT_FLOAT }} }} device: "/device:CPU:0" }}
node {{ name: "a" op: "Const" {CONST} }}
node {{ name: "c" op: "NoOp" }}
node {{ name: "s" op: "Split" input: "dim" input: "b" attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "num_split" value {{ i: 2 }} }} }}
node {{ name: "dim" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
node {{ name: "u" op: "AddV2" input: "s:1" input: "s" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
"""
    graph = load_tf(_write(tmp_path, text))
    graph.verify()
    names = [n.name for n in graph]
    assert names.index("c") < names.index("b") and names.index("a") < names.index("b")
    b, s, u = graph.find_node("b"), graph.find_node("s"), graph.find_node("u")
    assert b.meta["control_predecessors"] == ["c"] and b.device == "/device:CPU:0"
    assert len(s.outputs) == 2 and u.inputs == (s.outputs[1], s.outputs[0])
    assert s.attr("num_split") == 2 and s.attrs["T"].kind is AttrKind.TYPE and s.attr("T").dtype is DType.FLOAT32
    assert u.outputs[0].type == TensorType(DType.FLOAT32, (1,))  # TensorFlow's shape inference
    const = graph.find_node("a").attrs["value"]
    assert const.kind is AttrKind.TENSOR and np.array_equal(const.value.numpy(), [1.5, 1.5])
    assert [v.name for v in graph.outputs] == ["u:0"]  # sinks (c is a control input, not a sink)
    assert tf_topological_order(graph) == list(graph)

    # A pass rewires u to read a directly, sets decisions and changes an attr: all are written.
    a = graph.find_node("a")
    u.set_input(1, a.outputs[0])
    u.fusion_group, s.device = 3, "/device:GPU:0"
    from graph_ir.attrs import Attr

    b.set_attr(Attr("_note", AttrKind.STRING, "x"))
    exported = _by_name(export_graphdef(graph).node)
    assert list(exported["u"].input) == ["s:1", "a"]
    assert exported["u"].attr["_compiler_opt.fusion_group"].s == b"3"
    assert exported["s"].device == "/device:GPU:0" and list(exported["b"].input) == ["a", "^c"]
    assert exported["b"].attr["_note"].s == b"x"
    again = import_graphdef(export_graphdef(graph))
    assert again.find_node("u").fusion_group == 3


def test_function_bodies_resolve_output_args(tmp_path):
    text = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { dim { size: 4 } } } } }
node { name: "call" op: "SplitAdd" input: "x" }
library { function {
  signature { name: "SplitAdd" input_arg { name: "v" type: DT_FLOAT } output_arg { name: "out" type: DT_FLOAT } }
  node_def { name: "dim" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
  node_def { name: "parts" op: "Split" input: "dim:output:0" input: "v" attr { key: "T" value { type: DT_FLOAT } } attr { key: "num_split" value { i: 2 } } }
  node_def { name: "sum" op: "AddV2" input: "parts:output:1" input: "parts:output:0" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "out" value: "sum:z:0" }
} }
"""
    graph = load_tf(_write(tmp_path, text))
    graph.verify()
    call = graph.find_node("call")
    assert call.kind is OpKind.CALL and call.outputs[0].dtype is DType.FLOAT32
    body = graph.functions[("tf", "SplitAdd", "")].graph
    parts, total = body.find_node("parts"), body.find_node("sum")
    assert total.inputs == (parts.outputs[1], parts.outputs[0])
    assert body.outputs == (total.outputs[0],) and parts.inputs[1] is body.inputs[0]
    source, _ = read_graphdef(tmp_path / "g.pbtxt")
    _assert_lossless(source, export_graphdef(graph))


def test_outputs_option_and_text_and_binary_save(tmp_path):
    path = _write(tmp_path, f'node {{ name: "a" op: "Const" {CONST} }} node {{ name: "n" op: "Neg" input: "a" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}')
    graph = load_tf(path, outputs=["a:0"])
    assert [v.name for v in graph.outputs] == ["a:0"]
    save_graphdef(graph, tmp_path / "out.pb")
    save_graphdef(graph, tmp_path / "out.pbtxt")
    assert _by_name(read_graphdef(tmp_path / "out.pb")[0].node) == _by_name(read_graphdef(tmp_path / "out.pbtxt")[0].node)
    assert not list(tmp_path.glob(".*.tmp"))


# -- bad input ---------------------------------------------------------------------------------
def _error(path: Path, expected: type[CompilerOptError], **options) -> CompilerOptError:
    with pytest.raises(expected) as info:
        load_tf(path, **options)
    assert str(path) in str(info.value), info.value
    return info.value


def test_empty_truncated_and_random_files(tmp_path):
    _error(_write(tmp_path, "", "empty.pb"), EmptyModelError)
    _error(_write(tmp_path, "", "empty.pbtxt"), EmptyModelError)
    _error(_write(tmp_path, "# nothing\n", "comment.pbtxt"), EmptyModelError)
    good = tmp_path / "good.pb"
    save_graphdef(load_tf(_write(tmp_path, f'node {{ name: "a" op: "Const" {CONST} }}')), good)
    raw = good.read_bytes()
    (tmp_path / "cut.pb").write_bytes(raw[: len(raw) // 2])
    _error(tmp_path / "cut.pb", CorruptModelError)
    (tmp_path / "random.pb").write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    _error(tmp_path / "random.pb", CorruptModelError)
    (tmp_path / "latin1.pbtxt").write_bytes(b"node { name: \"\xff\" }")
    _error(tmp_path / "latin1.pbtxt", CorruptModelError)


def test_malformed_text_names_line_and_column(tmp_path):
    err = _error(_write(tmp_path, 'node {\n  name: "a"\n  op: Const"\n}\n'), CorruptModelError)
    assert "line 3" in str(err) and err.field and err.field.startswith("3:")


def test_text_over_the_size_cap_fails_before_parsing(tmp_path):
    path = _write(tmp_path, "node { this is not even valid " + "x" * 100)
    err = _error(path, ModelFormatError, max_text_bytes=64)
    assert type(err) is LimitExceededError and "limit" in str(err) and err.field == "max_text_bytes"


def test_missing_input_cycle_unknown_op_duplicate(tmp_path):
    ident = 'attr { key: "T" value { type: DT_FLOAT } }'
    err = _error(_write(tmp_path, f'node {{ name: "b" op: "Identity" input: "nope:0" {ident} }}', "missing.pbtxt"), UndefinedValueError)
    assert err.node == "b" and "nope" in str(err)
    err = _error(_write(tmp_path, 'node { name: "b" op: "NoOp" input: "^gone" }', "ctl.pbtxt"), UndefinedValueError)
    assert err.node == "b"
    err = _error(_write(tmp_path, f'node {{ name: "a" op: "Const" {CONST} }} node {{ name: "b" op: "Identity" input: "a:3" {ident} }}', "index.pbtxt"), UndefinedValueError)
    assert "output 3" in str(err)
    text = f'node {{ name: "p" op: "Identity" input: "q" {ident} }} node {{ name: "q" op: "Identity" input: "p" {ident} }}'
    err = _error(_write(tmp_path, text, "cycle.pbtxt"), CycleError)
    assert "p" in str(err) and "q" in str(err)
    text = 'node { name: "p" op: "NoOp" input: "^q" } node { name: "q" op: "NoOp" input: "^p" }'
    _error(_write(tmp_path, text, "control_cycle.pbtxt"), CycleError)
    err = _error(_write(tmp_path, 'node { name: "w" op: "FancyNewOp" }', "op.pbtxt"), UnsupportedOpError, strict=True)
    assert err.node == "w" and "FancyNewOp" in str(err)
    _error(_write(tmp_path, 'node { name: "w" op: "NoOp" } node { name: "w" op: "NoOp" }', "dup.pbtxt"), DuplicateNameError)
    text = 'node { name: "c" op: "F" } library { function { signature { name: "F" output_arg { name: "o" type: DT_FLOAT } } } }'
    err = _error(_write(tmp_path, text, "noret.pbtxt"), UndefinedValueError)
    assert "'F'" in str(err)


def test_graph_tensorflow_rejects_is_a_type_error(tmp_path):
    text = (
        f'node {{ name: "a" op: "Const" {CONST} }}'
        'node { name: "m" op: "MatMul" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }'
    )
    err = _error(_write(tmp_path, text), TypeConsistencyError, strict=True)
    assert err.node == "m"
    graph = load_tf(tmp_path / "g.pbtxt")  # lenient: imported, TF's objection kept as a warning
    graph.verify()
    assert "MatMul" in graph.meta["tf.import_warning"] or "rank" in graph.meta["tf.import_warning"]


def test_missing_file_is_os_error(tmp_path):
    with pytest.raises(OSError):
        load_tf(tmp_path / "absent.pb")


def test_string_tensor_packed_in_tensor_content_decodes_and_survives_cse(tmp_path):
    """TF writes string constants with tensor_content (varint lengths + bytes); TF's own
    MakeNdarray cannot read that back, our tensor can, and CSE runs over such graphs."""
    import passes
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    for name in ("names_a", "names_b"):
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = 7  # DT_STRING
        tensor = node.attr["value"].tensor
        tensor.dtype = 7
        tensor.tensor_shape.dim.add(size=3)
        tensor.tensor_content = b"\x01\x02\x03" + b"a" + b"bc" + b"def"
    path = tmp_path / "strings.pb"
    path.write_bytes(graph_def.SerializeToString())
    graph = load_tf(path)
    value = graph.find_node("names_a").attrs["value"].value
    assert value.numpy().tolist() == [b"a", b"bc", b"def"]
    other = graph.find_node("names_b").attrs["value"]
    assert graph.find_node("names_a").attrs["value"].structural_key()[2] == other.structural_key()[2]
    result = passes.run_pipeline(graph, "cse", verify_each=True)  # both are graph outputs: kept
    assert len(result.graph) == 2


def test_huge_output_index_of_an_unregistered_op_is_refused(tmp_path):
    # Found by the fuzz smoke test: an unregistered op's outputs are guessed from the indices the
    # graph reads of it, and `x:z:9223372036854775807` asked for a list of 2**63 outputs
    # (OverflowError; 2**40 gave MemoryError). Now it is over `max_node_arity`, named.
    function = '''library { function {
      signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
      node_def { name: "u" op: "NotARegisteredOp" input: "x" }
      node_def { name: "i" op: "Identity" input: "u:z:%d" attr { key: "T" value { type: DT_FLOAT } } }
      ret { key: "y" value: "i:output:0" } } }'''
    for index in (2**63 - 1, 2**40):
        err = _error(_write(tmp_path, function % index, f"fn{index}.pbtxt"), LimitExceededError)
        assert err.field == "max_node_arity" and err.node == "u", err
    top = f'node {{ name: "u" op: "NotARegisteredOp" }} node {{ name: "i" op: "Identity" input: "u:{2**40}" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}'
    err = _error(_write(tmp_path, top, "top.pbtxt"), LimitExceededError)
    assert err.field == "max_node_arity" and err.node == "u"
    # A few outputs read is still an opaque node with that many outputs.
    graph = load_tf(_write(tmp_path, function % 2, "ok.pbtxt"))
    assert graph is not None
