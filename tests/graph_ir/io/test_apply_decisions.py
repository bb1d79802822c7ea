"""Fused groups exported as ONNX local functions (graph_ir.io.apply_decisions + onnx_export):
the file passes onnx's full check, runs in onnxruntime with the original's outputs, and the
legality rules (one level, devices, no cycle between groups) reject what cannot be a kernel."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graph_ir
from graph_ir import assert_structurally_equal
from graph_ir.errors import ExportError
from graph_ir.io.apply_decisions import FUSED_DOMAIN, FusionGroup, inline_fused_functions, level_order, materialize_fusion_groups
from graph_ir.io.decisions import DECISION_KEYS
from graph_ir.io.onnx_export import export_onnx, save_onnx
from graph_ir.io.onnx_import import import_onnx, load_onnx
from graph_ir.op_kinds import OpKind

ort = pytest.importorskip("onnxruntime")
logger = logging.getLogger(__name__)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "small_cnn.onnx"
# The same kernels run in both models (onnxruntime inlines local functions); what remains is
# summation order inside fused kernels, far below these bounds.
RTOL, ATOL = 1e-5, 1e-6


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_same_outputs(original: onnx.ModelProto, exported: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> float:
    want, got = _run(original, feeds), _run(exported, feeds)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return max((float(np.max(np.abs(w - g))) if w.size else 0.0) for w, g in zip(want, got))


def _multi_node_groups(graph: graph_ir.Graph) -> dict[tuple[int, str | None], int]:
    counts = collections.Counter((n.fusion_group, n.device) for n in graph.all_nodes() if n.fusion_group is not None)
    return {key: count for key, count in counts.items() if count >= 2}


def _fused_placed_cnn() -> tuple[graph_ir.Graph, onnx.ModelProto]:
    from passes.fusion import Fuse
    from passes.placement import place, resolve_topology

    graph = graph_ir.load(EXAMPLE)
    original = export_onnx(graph)
    place(graph, "m-etf", "2xV100").apply(graph, resolve_topology("2xV100"))
    assert Fuse()(graph).modified
    return graph, original


def test_small_cnn_fused_and_placed_exports_functions_that_run_equal(tmp_path):
    graph, original = _fused_placed_cnn()
    before = str(graph)
    groups = _multi_node_groups(graph)
    model = export_onnx(graph, fused_groups_as_functions=True)
    assert str(graph) == before  # export works on a copy
    onnx.checker.check_model(model, full_check=True)

    # One function per multi-node group; one call per function, in place of the group's nodes.
    assert len(model.functions) == len(groups) >= 5
    calls = [n for n in model.graph.node if n.domain == FUSED_DOMAIN]
    assert sorted(c.op_type for c in calls) == sorted(f.name for f in model.functions)
    assert len(model.graph.node) == len(graph) - sum(groups.values()) + len(groups)
    for call in calls:
        props = {p.key: p.value for p in call.metadata_props}
        gid = int(props[DECISION_KEYS["fusion_group"]])
        device = props[DECISION_KEYS["device"]]
        function = next(f for f in model.functions if f.name == call.op_type)
        assert (gid, device) in groups and len(function.node) == groups[(gid, device)]
        assert {p.value for n in function.node for p in n.metadata_props if p.key == DECISION_KEYS["device"]} == {device}
    assert FUSED_DOMAIN in {o.domain for o in model.opset_import}

    feeds = {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    diff = _assert_same_outputs(original, model, feeds)
    logger.info(
        "small_cnn: %d nodes -> %d (+%d functions), max |diff| %.3g", len(graph), len(model.graph.node), len(model.functions), diff
    )

    # save_onnx writes functions by default when groups exist; import gives calls to them.
    path = tmp_path / "fused.onnx"
    save_onnx(graph, path)
    loaded = load_onnx(path)
    loaded.verify()
    assert sum(n.kind is OpKind.CALL for n in loaded) == len(groups)
    assert {n.device for n in loaded if n.kind is OpKind.CALL} == {d for _, d in groups}
    # ...and inlining them gives back the fused graph, decisions included.
    assert inline_fused_functions(loaded) == len(groups)
    loaded.verify()
    assert not loaded.functions
    # Export put each group's nodes together (level_order); apply the same order to compare.
    groups_now = materialize_fusion_groups(graph)
    graph.reorder([n for u in level_order(graph, groups_now) for n in (u.nodes if isinstance(u, FusionGroup) else [u])])
    assert_structurally_equal(loaded, graph)

    save_onnx(graph, path, fused_groups_as_functions=False)
    assert not onnx.load(str(path)).functions


def _if_model() -> onnx.ModelProto:
    """x -> Relu -> a; b = a * W; y = If(flag) {then: -(b + a), else: b - W}; z = Sigmoid(y)."""
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["b", "a"], ["t1"], name="t_add"), helper.make_node("Neg", ["t1"], ["t2"], name="t_neg")],
        "then",
        [],
        [helper.make_tensor_value_info("t2", TensorProto.FLOAT, [4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["b", "W"], ["e1"], name="e_sub")],
        "else",
        [],
        [helper.make_tensor_value_info("e1", TensorProto.FLOAT, [4])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Mul", ["a", "W"], ["b"], name="mul"),
        helper.make_node("If", ["flag"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Sigmoid", ["y"], ["z"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 3.0], np.float32), "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_group_with_an_if_node_and_a_group_inside_its_branch():
    model = _if_model()
    graph = import_onnx(model)
    for name in ("mul", "if", "sigmoid"):
        graph.find_node(name).fusion_group = 0
    then_branch = graph.find_node("if").attrs["then_branch"].value
    for node in then_branch:
        node.fusion_group = 1
    exported = export_onnx(graph, fused_groups_as_functions=True)
    onnx.checker.check_model(exported, full_check=True)
    functions = {f.name: f for f in exported.functions}
    assert set(functions) == {"fused_0", "fused_1"}
    # The If's branches capture a and W: in a function body they must be inputs.
    assert list(functions["fused_0"].input) == ["a", "W", "flag"]
    assert [n.op_type for n in exported.graph.node] == ["Relu", "fused_0"]
    # The branch's group is a call inside the If inside fused_0, reading its outer values as inputs.
    inner_if = next(n for n in functions["fused_0"].node if n.op_type == "If")
    then_proto = next(a.g for a in inner_if.attribute if a.name == "then_branch")
    assert [(n.domain, n.op_type, list(n.input)) for n in then_proto.node] == [(FUSED_DOMAIN, "fused_1", ["b", "a"])]
    rng = np.random.default_rng(1)
    for flag in (True, False):
        feeds = {"x": rng.standard_normal(4).astype(np.float32), "flag": np.array(flag)}
        _assert_same_outputs(model, exported, feeds)
    again = import_onnx(exported)
    again.verify()
    assert inline_fused_functions(again) == 2
    again.verify()
    assert [n.op_type for n in again] == ["Relu", "Mul", "If", "Sigmoid"]


def _chain_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Neg", ["a"], ["b"], name="b"),
        helper.make_node("Exp", ["x"], ["c"], name="c"),
        helper.make_node("Add", ["c", "a"], ["d"], name="d"),
        helper.make_node("Mul", ["b", "d"], ["e"], name="e"),
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("x", "e", "b")]
    return helper.make_model(helper.make_graph(nodes, "chain", info[:1], info[1:]), opset_imports=[helper.make_opsetid("", 21)])


def _grouped(assignments: dict[str, int], devices: dict[str, str] | None = None) -> graph_ir.Graph:
    graph = import_onnx(_chain_model())
    for name, group in assignments.items():
        graph.find_node(name).fusion_group = group
    for name, device in (devices or {}).items():
        graph.find_node(name).device = device
    return graph


def test_a_group_with_a_path_through_an_outside_node_is_a_cycle():
    graph = _grouped({"a": 1, "d": 1, "e": 1})  # a -> b (outside) -> e
    with pytest.raises(ExportError, match=r"fusion groups 1 .*cycle \(group 1 -> node 'b' -> group 1\)"):
        export_onnx(graph, fused_groups_as_functions=True)


def test_two_groups_that_feed_each_other_are_a_cycle():
    graph = _grouped({"a": 1, "d": 1, "b": 2, "c": 2})  # a -> b and c -> d
    with pytest.raises(ExportError, match=r"fusion groups (1, 2|2, 1) .*would form a cycle") as caught:
        materialize_fusion_groups(graph)
    assert caught.value.field == "fusion_group"
    export_onnx(graph)  # without functions the groups are only metadata: nothing to reject


def test_group_outputs_inputs_and_multi_output_calls():
    graph = _grouped({"a": 3, "b": 3, "c": 3, "d": 3})
    (group,) = materialize_fusion_groups(graph)
    assert [v.name for v in group.inputs] == ["x"]
    assert [v.name for v in group.outputs] == ["b", "d"]  # b is also a graph output
    order = level_order(graph, [group])
    assert order == [group, graph.find_node("e")]
    model = export_onnx(graph, fused_groups_as_functions=True)
    onnx.checker.check_model(model, full_check=True)
    assert [(n.op_type, list(n.output)) for n in model.graph.node] == [("fused_3", ["b", "d"]), ("Mul", ["e"])]
    feeds = {"x": np.random.default_rng(2).standard_normal(3).astype(np.float32)}
    _assert_same_outputs(_chain_model(), model, feeds)


def test_a_group_on_two_devices_is_one_kernel_per_device_or_an_error():
    # a -> b, a -> d, c -> d: gpu0 runs {a, c}; gpu1's {b, d} reads a and c from gpu0's kernel,
    # so it is that group's next piece (graph_ir.kernel_pieces), named with the piece number.
    graph = _grouped({"a": 4, "b": 4, "c": 4, "d": 4}, {"a": "gpu0", "c": "gpu0", "b": "gpu1", "d": "gpu1"})
    with pytest.raises(ExportError, match="fusion group 4 spans devices gpu0 .*gpu1"):
        materialize_fusion_groups(graph, split_devices=False)
    model = export_onnx(graph, fused_groups_as_functions=True)
    onnx.checker.check_model(model, full_check=True)
    devices = {n.op_type: {p.key: p.value for p in n.metadata_props}.get(DECISION_KEYS["device"]) for n in model.graph.node}
    assert devices == {"fused_4_gpu0": "gpu0", "fused_4_gpu1_1": "gpu1", "Mul": None}
    feeds = {"x": np.random.default_rng(3).standard_normal(3).astype(np.float32)}
    _assert_same_outputs(_chain_model(), model, feeds)


def test_a_group_cannot_span_graph_levels():
    graph = import_onnx(_if_model())
    graph.find_node("mul").fusion_group = 5
    then_branch = graph.find_node("if").attrs["then_branch"].value
    then_branch.find_node("t_add").fusion_group = 5
    with pytest.raises(ExportError, match=r"fusion group 5 has nodes in graph 'g' and in graph 'then' \(of node 'if'\)"):
        export_onnx(graph, fused_groups_as_functions=True)


def test_single_node_groups_stay_plain_nodes():
    graph = _grouped({"a": 0, "b": 1})
    model = export_onnx(graph, fused_groups_as_functions=True)
    assert not model.functions and len(model.graph.node) == 5
