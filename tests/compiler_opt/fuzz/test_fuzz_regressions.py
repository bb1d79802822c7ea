"""Inputs the importer fuzzer found (compiler_opt.fuzz), rebuilt by hand: each now ends in a
project error. Native aborts are checked in a subprocess, so a regression fails the test
instead of killing the test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from graph_ir.errors import TypeConsistencyError
from compiler_opt.fuzz.targets import run_one
from graph_ir.io.onnx_import import load_onnx

ROOT = Path(__file__).resolve().parents[3]

# XLA's text parser accepts a layout that disagrees with ENTRY; its HLO -> MLIR importer then
# CHECK-fails ("parameter_shapes.size() == main.getNumArguments()") and aborts the process.
LAYOUT_MISMATCH = """HloModule m, entry_computation_layout={(f32[], f32[])->f32[]}

ENTRY main {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
"""


def _in_subprocess(fmt: str, data: bytes, tmp_path: Path) -> str:
    sample = tmp_path / "sample.bin"
    sample.write_bytes(data)
    code = (
        "import sys; from compiler_opt.fuzz.targets import run_one; "
        f"o = run_one({fmt!r}, open(sys.argv[1], 'rb').read(), sys.argv[2]); print(o.kind, o.detail)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code, str(sample), str(tmp_path)], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the importer crashed the process: {result.stderr[-2000:]}"
    return result.stdout.strip().splitlines()[-1]


def test_hlo_entry_layout_mismatch_is_refused_not_an_abort(tmp_path):
    assert _in_subprocess("hlo", LAYOUT_MISMATCH.encode(), tmp_path) == "refused ModelFormatError"
    wrong_shape = LAYOUT_MISMATCH.replace("(f32[], f32[])", "(f32[2])")
    assert _in_subprocess("hlo", wrong_shape.encode(), tmp_path) == "refused ModelFormatError"


def test_onnx_initializer_whose_declared_input_shape_disagrees(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g",
        [helper.make_tensor_value_info("w", TensorProto.INT64, [0, 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 2])],
        initializer=[helper.make_tensor("w", TensorProto.INT64, [2, 2], [1, 2, 3, 4])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(TypeConsistencyError, match="has shape") as info:
        load_onnx(path)
    assert info.value.field == "w" and str(path) in str(info.value)
    assert run_one("onnx", path.read_bytes(), tmp_path).kind == "refused"


@pytest.mark.parametrize(
    "quant_type",
    ["!quant.uniform<i8:f32, 0.-1>", "!quant.uniform", "!quant.uniform<i8:f32, 0.5:-1", "!quant.uniform<i8:f32, 1e999x:0>"],
    ids=["bad-float", "no-params", "unterminated", "junk-scale"],
)
def test_malformed_quantized_types_are_refused(quant_type, tmp_path):
    from graph_ir.errors import UnsupportedOpError
    from graph_ir.io.stablehlo_import import import_stablehlo_text

    text = f"func.func @main(%a: tensor<2xf32>) -> tensor<2x{quant_type}> {{\n  return %a : tensor<2xf32>\n}}\n"
    with pytest.raises(UnsupportedOpError, match="quant"):
        import_stablehlo_text(text)
    assert run_one("stablehlo", text.encode(), tmp_path).kind == "refused"


# Merge's N (the input count) set to 2**31 - 1 by a mutation: TensorFlow's import_graph_def
# hung on it past the 20 s per-input cap; a count attr sizing outputs that large hung our own
# importer. Both now end quickly.
MERGE_N = """
node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "m" op: "Merge" input: "a" input: "a" attr { key: "N" value { i: 2147483647 } }
       attr { key: "T" value { type: DT_FLOAT } } }
"""
UNPACK_NUM = """
node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 } } } }
node { name: "u" op: "Unpack" input: "a" attr { key: "num" value { i: NUM } } attr { key: "T" value { type: DT_FLOAT } } }
"""


def test_tf_count_attrs_that_disagree_or_are_absurd(tmp_path):
    import time

    from graph_ir.errors import CorruptModelError, LimitExceededError, ModelFormatError
    from graph_ir.io.tf_import import load_tf

    from graph_ir.io._native_log import import_tensorflow

    import_tensorflow()  # its start-up is not what is timed
    path = tmp_path / "merge.pbtxt"
    path.write_text(MERGE_N)
    start = time.monotonic()
    graph = load_tf(path)  # lenient: imported, TF not asked
    assert time.monotonic() - start < 10
    assert "has 2 data inputs, its attrs say 2147483647" in graph.meta["tf.import_warning"]
    with pytest.raises(ModelFormatError, match="attrs say 2147483647") as info:
        load_tf(path, strict=True)
    assert info.value.node == "m"
    for num, error in (("2147483647", LimitExceededError), ("-3", CorruptModelError)):
        path.write_text(UNPACK_NUM.replace("NUM", num))
        with pytest.raises(error) as info:
            load_tf(path)
        assert info.value.node == "u" and info.value.field in ("num", "max_node_arity")


def test_hlo_parameter_number_gap_is_refused_not_an_abort(tmp_path):
    # XLA's parser CHECK-fails ("param_no >= 0 && param_no < parameter_count") on a gap.
    text = "HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(9223372036854775807)\n  ROOT r = f32[] add(a, b)\n}\n"
    assert _in_subprocess("hlo", text.encode(), tmp_path) == "refused HloSyntaxError"
    twice = text.replace("parameter(9223372036854775807)", "parameter(0)")
    assert _in_subprocess("hlo", twice.encode(), tmp_path) == "refused HloSyntaxError"


def test_placement_json_out_of_range_numbers(tmp_path):
    import json

    from cost_model.profiled import ProfiledWorkloadError, load_profiled_workload

    node = {"id": 0, "cpuLatency": 1.0, "fpgaLatency": 1.0, "size": 1.0}
    for bad in ({"colorClass": 2**80}, {"id": -(2**70)}, {"cpuLatency": float("nan")}, {"size": 10**400}):
        path = tmp_path / "w.json"
        path.write_text(json.dumps({"nodes": [{**node, **bad}], "edges": [], "maxFPGAs": 2}))
        with pytest.raises(ProfiledWorkloadError):
            load_profiled_workload(path)


def test_hlo_negative_tuple_index_is_refused_not_a_segfault(tmp_path):
    # XLA's parser accepts `index=-7`; its HLO -> MLIR importer then segfaulted.
    text = (
        "HloModule m\n\nENTRY e {\n  p = (f32[], s32[]) parameter(0)\n"
        "  ROOT g = f32[] get-tuple-element(p), index=-7\n}\n"
    )
    assert _in_subprocess("hlo", text.encode(), tmp_path) == "refused ModelFormatError"


def test_hlo_parser_check_failure_is_an_error_not_an_abort(tmp_path):
    # XLA's parser CHECK-fails on a reshape whose element counts differ (the operand's dim was
    # mutated to 2**31); the parse runs in a forked child (graph_ir/io/_isolate.py), so the
    # abort becomes a CorruptModelError quoting XLA's check. In process, not in a subprocess:
    # this is what protects the caller.
    from graph_ir.errors import CorruptModelError
    from graph_ir.io.hlo_import import load_hlo

    path = tmp_path / "reshape.hlo"
    path.write_text(
        "HloModule m\n\nENTRY e {\n  p = bf16[2,2147483648,8,16] parameter(0)\n"
        "  ROOT r = bf16[2,2048,128] reshape(p)\n}\n"
    )
    with pytest.raises(CorruptModelError, match="XLA's HLO parser crashed on this input.*Check failed") as info:
        load_hlo(path)
    assert str(path) in str(info.value)


def test_hlo_sharding_with_billions_of_devices_is_refused_fast(tmp_path):
    # XLA's parser materializes the tile assignment: 2**31 devices took 30 s and gigabytes.
    import time

    from graph_ir.errors import LimitExceededError
    from graph_ir.io import limits
    from graph_ir.io.hlo_import import load_hlo

    path = tmp_path / "shard.hlo"
    text = "HloModule f\n\nENTRY f {\n  a = f32[2,2] parameter(0), sharding={devices=[1,2147483648]0,1}\n  ROOT r = f32[2,2] add(a, a)\n}\n"
    path.write_text(text)
    start = time.monotonic()
    with pytest.raises(LimitExceededError) as info:
        load_hlo(path)
    assert time.monotonic() - start < 5 and info.value.field == "max_sharding_devices" and info.value.line == 4
    path.write_text(text.replace("2147483648]0,1", "2]0,1"))
    with limits.override(max_sharding_devices=1), pytest.raises(LimitExceededError):
        load_hlo(path)
    assert load_hlo(path) is not None  # two devices: fine under the default limit


def test_hlo_sharding_dimension_with_a_space_is_a_syntax_error(tmp_path):
    # Found by the smoke fuzzer: "devices=[1000000 00000000000]" raised a bare ValueError.
    from graph_ir.io.hlo_import import HloSyntaxError, load_hlo

    path = tmp_path / "shard.hlo"
    path.write_text(
        "HloModule f\n\nENTRY f {\n  a = f32[2,2] parameter(0), sharding={devices=[1000000 00000000000]0,1}\n"
        "  ROOT r = f32[2,2] add(a, a)\n}\n"
    )
    with pytest.raises(HloSyntaxError, match="not an integer") as info:
        load_hlo(path)
    assert info.value.line == 4 and info.value.file == str(path)


@pytest.mark.parametrize("dim", ["1\x1f\x1f", "\x1c2", "\u00b2"])
def test_hlo_sharding_dimension_with_control_or_unicode_characters(tmp_path, dim):
    # Found by the smoke fuzzer (forty-second session): "devices=[1\x1f\x1f...]" passed the digit check (str.strip takes
    # \x1f for a blank) and int() raised a bare ValueError; a superscript digit passes str.isdigit but not int().
    from graph_ir.io.hlo_import import HloSyntaxError, load_hlo

    path = tmp_path / "shard.hlo"
    path.write_text(
        f"HloModule f\n\nENTRY f {{\n  a = f32[2,2] parameter(0), sharding={{devices=[{dim},1]0,1}}\n"
        "  ROOT r = f32[2,2] add(a, a)\n}\n", encoding="utf-8",
    )
    with pytest.raises(HloSyntaxError) as info:  # ours or XLA's parser's, never a bare ValueError
        load_hlo(path)
    assert info.value.line == 4 and info.value.file == str(path)


def test_unicode_and_control_digits_get_each_parsers_own_error(tmp_path):
    """`str.isdigit` takes '²' for a digit and `str.strip` takes '\\x1f' for a blank; `int()` takes neither. Every parser
    that checked with one and converted with the other raised a bare ValueError (forty-second session, after the
    HLO sharding case above)."""
    from compiler_opt.api.loading import parse_input_shape
    from compiler_opt.workloads.nasnet import resolve_genotype
    from cost_model.measure.tile.synthetic import parse_kind_weights
    from graph_ir.errors import CompilerOptError
    from graph_ir.io.formats import split_module_spec

    for text in ("reduce=²", "reduce=--3"):
        with pytest.raises(ValueError, match="KIND=INTEGER"):
            parse_kind_weights(text)
    assert parse_kind_weights("reduce= 3\x1f") == {"reduce": 3}  # blanks around the number, as str.strip sees them
    with pytest.raises(CompilerOptError, match="--input-shape"):
        parse_input_shape("x:1,²")
    assert parse_input_shape("x: 1 ,3") == ("x", (1, 3))
    model = tmp_path / "m.hlo"
    model.write_text("HloModule m\n")
    assert split_module_spec(f"{model}#²") == (f"{model}#²", None) and split_module_spec(f"{model}#2") == (str(model), 2)
    with pytest.raises(ValueError, match="genotype must be"):
        resolve_genotype("random-²")


def _placeholder(graph, name: str, dtype: int, size: int) -> None:
    node = graph.node.add(name=name, op="Placeholder")
    node.attr["dtype"].type = dtype
    node.attr["shape"].shape.dim.add().size = size


def _int32_const(graph, name: str, held: int | None = None) -> None:
    """A scalar 0 of dtype int32 whose value tensor says `held` (default: int32 too)."""
    from tensorflow.core.framework import types_pb2

    node = graph.node.add(name=name, op="Const")
    node.attr["dtype"].type = types_pb2.DT_INT32
    node.attr["value"].tensor.dtype = types_pb2.DT_INT32 if held is None else held
    node.attr["value"].tensor.int_val.append(0)


def _concat_on_an_int16_axis():
    """ConcatV2 of two float[2] placeholders on a Const axis whose dtype says int32 and whose value tensor is int16:
    TensorFlow's ConcatV2 shape function CHECK-fails on it."""
    from tensorflow.core.framework import graph_pb2, types_pb2

    graph = graph_pb2.GraphDef()
    _placeholder(graph, "a", types_pb2.DT_FLOAT, 2)
    _placeholder(graph, "b", types_pb2.DT_FLOAT, 2)
    _int32_const(graph, "axis", held=types_pb2.DT_INT16)
    concat = graph.node.add(name="concat", op="ConcatV2", input=["a", "b", "axis"])
    concat.attr["T"].type = types_pb2.DT_FLOAT
    concat.attr["Tidx"].type = types_pb2.DT_INT32
    concat.attr["N"].i = 2
    return graph


def _tf_warning_from_a_child(path) -> str:
    """`load_tf(path)`'s import warning, imported in a child process: where TensorFlow would abort, a regression
    fails the test instead of ending the test run."""
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", "import sys; from graph_ir.io.tf_import import load_tf; g = load_tf(sys.argv[1]); g.verify(); "
         "print(g.meta['tf.import_warning'])", str(path)],
        capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    return child.stdout


def test_a_tf_input_index_that_is_a_unicode_digit_is_named(tmp_path):
    pytest.importorskip("tensorflow")
    from tensorflow.core.framework import graph_pb2, types_pb2

    from graph_ir.errors import CompilerOptError
    from graph_ir.io.formats import load_with_format

    graph = graph_pb2.GraphDef()
    _placeholder(graph, "a", types_pb2.DT_FLOAT, 2)
    b = graph.node.add(name="b", op="Relu", input=["a:²"])
    b.attr["T"].type = types_pb2.DT_FLOAT
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    with pytest.raises(CompilerOptError, match=r"node 'b'.*input\[0\]"):
        load_with_format(str(path))


def test_a_const_whose_value_is_not_its_dtype_never_reaches_tensorflows_shape_inference(tmp_path):
    # Found by the bounded fuzz campaign (forty-second session): TensorFlow's ConcatV2 shape function read the axis
    # Const's int16 tensor as int64 and CHECK-failed, aborting the process.
    pytest.importorskip("tensorflow")
    from graph_ir.errors import CorruptModelError
    from graph_ir.io.tf_import import load_tf

    graph = _concat_on_an_int16_axis()
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    warning = _tf_warning_from_a_child(path)
    assert "shape inference was skipped" in warning and "'axis' (Const) holds a DT_INT16 value but its dtype is DT_INT32" in warning
    with pytest.raises(CorruptModelError, match="DT_INT16") as info:
        load_tf(path, strict=True)
    assert info.value.node == "axis" and info.value.field == "attr.value.tensor.dtype"


def test_a_rank_attr_beyond_any_rank_never_reaches_tensorflows_shape_inference(tmp_path):
    # Found by the bounded fuzz campaign (forty-second session): GatherV2 with batch_dims = 2**31 - 1 made TensorFlow's
    # shape function ask for a shape of negative rank, a CHECK-failure that aborted the process.
    pytest.importorskip("tensorflow")
    from tensorflow.core.framework import graph_pb2, types_pb2

    from graph_ir.errors import ModelFormatError
    from graph_ir.io.tf_import import load_tf

    graph = graph_pb2.GraphDef()
    _placeholder(graph, "params", types_pb2.DT_FLOAT, 4)
    _placeholder(graph, "indices", types_pb2.DT_INT32, 2)
    _int32_const(graph, "axis")
    gather = graph.node.add(name="gather", op="GatherV2", input=["params", "indices", "axis"])
    gather.attr["Tparams"].type = types_pb2.DT_FLOAT
    gather.attr["Tindices"].type = types_pb2.DT_INT32
    gather.attr["Taxis"].type = types_pb2.DT_INT32
    gather.attr["batch_dims"].i = 2**31 - 1
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    assert "'gather' (GatherV2) has batch_dims = 2147483647, beyond any tensor rank (254)" in _tf_warning_from_a_child(path)
    with pytest.raises(ModelFormatError, match="batch_dims") as info:
        load_tf(path, strict=True)
    assert info.value.node == "gather" and info.value.field == "attr.batch_dims"
    gather.attr["batch_dims"].i = 0  # a sane graph still gets TensorFlow's shapes, with no warning
    path.write_bytes(graph.SerializeToString())
    assert "tf.import_warning" not in load_tf(path).meta


def test_tensorflow_aborting_in_its_shape_inference_leaves_the_caller_alive(tmp_path, monkeypatch):
    # The checks above keep known aborts from TensorFlow; for the ones nobody foresaw, its shape inference runs in the
    # forked helper. The Const check is switched off here so that TensorFlow really CHECK-fails, in the helper.
    pytest.importorskip("tensorflow")
    from tensorflow.core.framework import types_pb2

    from graph_ir.errors import CorruptModelError
    from graph_ir.io import tf_import

    monkeypatch.delenv("COMPILER_OPT_NATIVE_IN_PROCESS", raising=False)
    monkeypatch.setattr(tf_import._Importer, "check_const_type", lambda self, node_def: None)
    graph = _concat_on_an_int16_axis()
    path = tmp_path / "g.pb"
    path.write_bytes(graph.SerializeToString())
    imported = tf_import.load_tf(path)
    imported.verify()
    warning = imported.meta["tf.import_warning"]
    assert "TensorFlow's shape inference crashed (signal 6): Check failed" in warning and "types are those the file states" in warning
    assert imported.find_node("concat").outputs[0].type.shape is None
    with pytest.raises(CorruptModelError, match="shape inference crashed on this input") as info:
        tf_import.load_tf(path, strict=True)
    assert info.value.file == str(path)
    graph.node[2].attr["value"].tensor.dtype = types_pb2.DT_INT32  # the next graph gets a fresh helper, and its shapes
    path.write_bytes(graph.SerializeToString())
    sane = tf_import.load_tf(path)
    assert "tf.import_warning" not in sane.meta and tuple(sane.find_node("concat").outputs[0].type.shape) == (4,)


def test_a_shape_no_runtime_can_address_names_its_node_and_field(tmp_path):
    # Seen among the forty-third session's campaign's first refusals: right class, but no node to look at.
    pytest.importorskip("tensorflow")
    pytest.importorskip("jaxlib")
    from graph_ir.errors import InvalidShapeError
    from graph_ir.io.formats import load

    graph = tmp_path / "g.pbtxt"
    graph.write_text('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }\n'
                     '  attr { key: "shape" value { shape { dim { size: 9223372036854775807 } dim { size: 2 } } } } }\n')
    with pytest.raises(InvalidShapeError, match="more than the") as info:
        load(str(graph))
    assert (info.value.file, info.value.node, info.value.field) == (str(graph), "x", "attr.shape")
    hlo = tmp_path / "m.hlo"
    hlo.write_text("HloModule m\n\nENTRY main {\n  p = f32[4611686018427387904,8192] parameter(0)\n  ROOT n = f32[4611686018427387904,8192] negate(p)\n}\n")
    with pytest.raises(InvalidShapeError, match="more than the") as info:
        load(str(hlo))
    assert (info.value.file, info.value.node, info.value.field) == (str(hlo), "p", "shape")


def test_a_tf_function_with_two_args_of_one_name_is_a_duplicate_name(tmp_path):
    # The forty-third session's first campaign logged a bare GraphIRError (the base class) for TF text: a function
    # signature naming two input args alike.
    pytest.importorskip("tensorflow")
    from graph_ir.errors import DuplicateNameError
    from graph_ir.io.formats import load

    path = tmp_path / "g.pbtxt"
    path.write_text("""node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "F" input: "x" input: "x" }
library { function {
  signature { name: "F" input_arg { name: "a" type: DT_FLOAT } input_arg { name: "a" type: DT_FLOAT }
              output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "add" op: "AddV2" input: "a" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "y" value: "add:z:0" } } }
""")
    with pytest.raises(DuplicateNameError, match="in function 'F': two input_args are named 'a'") as info:
        load(str(path))
    assert (info.value.file, info.value.field) == (str(path), "signature.input_arg")
