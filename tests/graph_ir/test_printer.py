"""The text form and structural equality: names ignored, everything else (decisions included)
compared."""

from __future__ import annotations

import numpy as np
import pytest

from graph_ir import (
    DType,
    Graph,
    NumpyTensor,
    Shape,
    TensorType,
    Value,
    assert_structurally_equal,
    format_graph,
    structural_equal,
)

F32 = TensorType(DType.FLOAT32, Shape(["N", 3]))


def build(*, value_names: str = "", node_prefix: str = "", scale: float = 1.0, device: str | None = None) -> Graph:
    graph = Graph(f"g{node_prefix}")
    x = graph.add_input(Value(f"x{value_names}", F32))
    w = graph.add_initializer(Value(f"w{value_names}", const=NumpyTensor(np.full(3, scale, np.float32))))
    mul = graph.add_node("Mul", [x, w], name=f"{node_prefix}mul", outputs=[f"m{value_names}"])
    relu = graph.add_node("LeakyRelu", [mul.outputs[0]], attrs={"alpha": 0.1}, name=f"{node_prefix}relu", outputs=[f"r{value_names}"])
    relu.device = device
    graph.add_output(relu.outputs[0])
    return graph


def test_text_form_shows_values_types_attributes_and_decisions() -> None:
    graph = build(device="gpu:0")
    graph.find_node("relu").fusion_group = 2
    graph.find_node("relu").tile = (4, 8)
    text = format_graph(graph)
    assert text.splitlines()[0] == "graph g(%x: f32[N,3]) {"
    assert "%w: f32[3] = const tensor<f32[3]>[1.0, 1.0, 1.0]" in text
    assert "%m = Mul(%x, %w) : (None)  # mul" in text
    assert "LeakyRelu(%m) {alpha=0.1}" in text
    assert "@{device=gpu:0, group=2, tile=[4, 8]}" in text
    assert text.rstrip().endswith("return %r\n}")
    assert str(graph) == text


def test_canonical_form_numbers_values_and_drops_node_names() -> None:
    text = format_graph(build(), canonical=True)
    assert "mul" not in text.replace("Mul", "")
    assert "%x" not in text and "%2 = Mul(%1, %0)" in text


def test_structural_equality_ignores_names() -> None:
    assert structural_equal(build(), build(value_names="_other", node_prefix="p_"))
    assert_structurally_equal(build(value_names="_v2"), build())


@pytest.mark.parametrize(
    "change",
    [
        lambda g: setattr(g.find_node("relu"), "device", "cpu"),
        lambda g: setattr(g.find_node("relu"), "fusion_group", 1),
        lambda g: setattr(g.find_node("relu"), "priority", 2.0),
        lambda g: setattr(g.find_node("relu"), "tile", (1,)),
    ],
    ids=["device", "fusion_group", "priority", "tile"],
)
def test_structural_equality_sees_decisions(change) -> None:
    changed = build()
    change(changed)
    assert not structural_equal(changed, build())


def test_structural_equality_sees_constants_attributes_types_and_wiring() -> None:
    base = build()
    assert not structural_equal(build(scale=2.0), base)
    other_attr = build()
    other_attr.find_node("relu").set_attr(other_attr.find_node("relu").attrs["alpha"].__class__.infer("alpha", 0.2))
    assert not structural_equal(other_attr, base)
    other_type = build()
    other_type.inputs[0].type = TensorType(DType.FLOAT16, Shape(["N", 3]))
    assert not structural_equal(other_type, base)
    swapped = build()
    mul = swapped.find_node("mul")
    mul.replace_inputs([mul.inputs[1], mul.inputs[0]])
    assert not structural_equal(swapped, base)


def test_large_constants_compare_by_content_digest() -> None:
    def with_big(values: np.ndarray) -> Graph:
        graph = Graph("big")
        graph.add_output(graph.add_constant(NumpyTensor(values), "c"))
        return graph

    data = np.arange(1000, dtype=np.float32)
    assert structural_equal(with_big(data), with_big(data.copy()))
    changed = data.copy()
    changed[500] = -1
    assert not structural_equal(with_big(changed), with_big(data))


def test_assert_structurally_equal_reports_a_diff() -> None:
    with pytest.raises(AssertionError, match="graphs differ structurally") as info:
        assert_structurally_equal(build(device="cpu"), build())
    diff = str(info.value)
    assert "+" in diff and "device=cpu" in diff


def test_subgraphs_print_nested_and_compare() -> None:
    def with_if(branch_op: str) -> Graph:
        graph = Graph("outer")
        x = graph.add_input(Value("x", F32))
        c = graph.add_input(Value("c", TensorType(DType.BOOL, Shape([]))))
        then_branch, else_branch = Graph("then"), Graph("else")
        then_branch.add_output(then_branch.add_node(branch_op, [x]).outputs[0])
        else_branch.add_output(x)
        node = graph.add_node("If", [c], attrs={"then_branch": then_branch, "else_branch": else_branch})
        graph.add_output(node.outputs[0])
        graph.verify()
        return graph

    text = format_graph(with_if("Neg"))
    assert "then_branch =" in text and "graph then() {" in text and "Neg(%x)" in text
    assert structural_equal(with_if("Neg"), with_if("Neg"))
    assert not structural_equal(with_if("Neg"), with_if("Abs"))
