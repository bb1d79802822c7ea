"""TF GraphDefs that TensorFlow's own importer refuses but that are real graphs (XLA JIT node
names, resource loop variables, TPU ops on a CPU build): they import with one warning, keep the
types the file states, and round trip."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from graph_ir.dtypes import DType  # noqa: E402
from graph_ir.errors import ModelFormatError, TypeConsistencyError, UnsupportedOpError  # noqa: E402
from graph_ir.io.tf_export import export_graphdef  # noqa: E402
from graph_ir.io.tf_import import load_tf, read_graphdef  # noqa: E402
from graph_ir.op_kinds import OpKind  # noqa: E402

F32 = 'attr { key: "T" value { type: DT_FLOAT } }'
I32 = 'attr { key: "T" value { type: DT_INT32 } }'
RES = 'attr { key: "T" value { type: DT_RESOURCE } }'

# The XLA JIT's encapsulation names nodes like this; TF's Python importer refuses a leading "_".
JIT_NAMES = f"""
node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
node {{ name: "_identity_input_1_1_0" op: "Identity" input: "x" {F32} }}
node {{ name: "y" op: "Neg" input: "_identity_input_1_1_0" {F32} }}
"""

# A v1 while loop whose loop variable is a resource handle that Less reads as int32 (the shape
# of grappler's graph_properties test graph): TF's importer refuses the dtype mismatch.
RESOURCE_LOOP = f"""
node {{ name: "v" op: "VarHandleOp" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
       attr {{ key: "shape" value {{ shape {{ }} }} }} }}
node {{ name: "while/Enter" op: "Enter" input: "v" {RES} attr {{ key: "frame_name" value {{ s: "while/ctx" }} }} }}
node {{ name: "while/Merge" op: "Merge" input: "while/Enter" input: "while/NextIteration" {RES}
       attr {{ key: "N" value {{ i: 2 }} }} }}
node {{ name: "while/Less/y" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
       attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 10 }} }} }} }}
node {{ name: "while/Less" op: "Less" input: "while/Merge" input: "while/Less/y" {I32} }}
node {{ name: "while/LoopCond" op: "LoopCond" input: "while/Less" }}
node {{ name: "while/Switch" op: "Switch" input: "while/Merge" input: "while/LoopCond" {RES} }}
node {{ name: "while/Identity" op: "Identity" input: "while/Switch:1" {RES} }}
node {{ name: "while/NextIteration" op: "NextIteration" input: "while/Identity" {RES} }}
node {{ name: "while/Exit" op: "Exit" input: "while/Switch" {RES} }}
"""

# `_TPUDeviceOrdinalPlaceholder` is registered only in TPU builds of TensorFlow; `TPUFancyOp`
# is registered nowhere, and the graph reads its second output.
TPU_OPS = f"""
node {{ name: "ordinal" op: "_TPUDeviceOrdinalPlaceholder" attr {{ key: "logical_core" value {{ i: 0 }} }} }}
node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
node {{ name: "fancy" op: "TPUFancyOp" input: "x" input: "^ordinal" attr {{ key: "mode" value {{ s: "fast" }} }} {F32} }}
node {{ name: "out" op: "Neg" input: "fancy:1" {F32} }}
node {{ name: "ord_copy" op: "Identity" input: "ordinal" {I32} }}
library {{ function {{
  signature {{ name: "body" input_arg {{ name: "a" type: DT_FLOAT }} output_arg {{ name: "r" type: DT_FLOAT }} }}
  node_def {{ name: "op" op: "TPUFancyOp" input: "a" {F32} }}
  node_def {{ name: "n" op: "Neg" input: "op:out:2" {F32} }}
  ret {{ key: "r" value: "n:y:0" }}
}} }}
"""


def _write(tmp_path: Path, text: str, name: str = "g.pbtxt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _load_warning(path: Path, caplog) -> tuple:
    with caplog.at_level(logging.WARNING, logger="graph_ir.io.tf_import"):
        graph = load_tf(path)
    warnings = [r.getMessage() for r in caplog.records if r.name == "graph_ir.io.tf_import" and r.levelno == logging.WARNING]
    return graph, warnings


def _assert_round_trip(path: Path, graph) -> None:
    source, _ = read_graphdef(path)
    exported = export_graphdef(graph)
    assert {n.name: n for n in exported.node} == {n.name: n for n in source.node}
    assert [f.signature.name for f in exported.library.function] == [f.signature.name for f in source.library.function]
    for src, out in zip(source.library.function, exported.library.function):
        assert {n.name: n for n in out.node_def} == {n.name: n for n in src.node_def}
        assert dict(out.ret) == dict(src.ret)


def test_jit_node_names_import_with_one_warning(tmp_path, caplog):
    path = _write(tmp_path, JIT_NAMES)
    graph, warnings = _load_warning(path, caplog)
    graph.verify()
    assert len(warnings) == 1 and "invalid characters" in warnings[0] and str(path) in warnings[0]
    assert "invalid characters" in graph.meta["tf.import_warning"]
    node = graph.find_node("_identity_input_1_1_0")
    assert node.outputs[0].dtype is DType.FLOAT32 and graph.find_node("y").inputs[0] is node.outputs[0]
    _assert_round_trip(path, graph)
    with pytest.raises(ModelFormatError, match="TensorFlow rejects the graph"):
        load_tf(path, strict=True)


def test_resource_loop_variable_imports_with_one_warning(tmp_path, caplog):
    path = _write(tmp_path, RESOURCE_LOOP)
    graph, warnings = _load_warning(path, caplog)
    graph.verify()
    assert len(warnings) == 1 and "resource" in warnings[0] and "while/Less" in warnings[0]
    assert graph.find_node("while/Merge").outputs[0].dtype is DType.RESOURCE
    assert graph.find_node("while/Less").outputs[0].dtype is DType.BOOL
    assert graph.find_node("while/Merge").meta["tf.back_edges"] == {1: "while/NextIteration"}
    _assert_round_trip(path, graph)
    with pytest.raises(TypeConsistencyError):
        load_tf(path, strict=True)


def test_unregistered_ops_are_opaque_nodes(tmp_path, caplog):
    path = _write(tmp_path, TPU_OPS)
    graph, warnings = _load_warning(path, caplog)
    graph.verify()
    assert len(warnings) == 1
    assert "_TPUDeviceOrdinalPlaceholder (node 'ordinal')" in warnings[0] and "TPUFancyOp (node 'fancy')" in warnings[0]
    fancy = graph.find_node("fancy")
    assert fancy.meta["tf.unregistered"] and fancy.kind is OpKind.IO  # kept by DCE: its effects are unknown
    assert len(fancy.outputs) == 2 and all(v.dtype is None for v in fancy.outputs)
    assert [v.name for v in fancy.inputs] == ["x:0"] and fancy.attrs["mode"].value == "fast"
    assert graph.find_node("out").inputs[0] is fancy.outputs[1]
    assert graph.find_node("ord_copy").outputs[0].dtype is DType.INT32
    body = graph.functions[("tf", "body", "")].graph
    assert len(body.find_node("op").outputs) == 3  # `op:out:2` is read
    _assert_round_trip(path, graph)
    with pytest.raises(UnsupportedOpError, match="_TPUDeviceOrdinalPlaceholder"):
        load_tf(path, strict=True)


def test_graph_with_known_shapes_still_warns_about_unregistered_ops(tmp_path, caplog):
    shapes = 'attr { key: "_output_shapes" value { list { shape { dim { size: 3 } } } } }'
    text = f'node {{ name: "c" op: "CustomOp" {shapes} }} node {{ name: "n" op: "Neg" input: "c" {F32} {shapes} }}'
    graph, warnings = _load_warning(_write(tmp_path, text), caplog)
    assert len(warnings) == 1 and "CustomOp" in warnings[0] and "refused" not in warnings[0]
    assert list(graph.find_node("c").outputs[0].shape) == [3]
