"""graph.verify() catches each broken invariant with its own error class, naming node/field.

The IR's methods keep the invariants, so each test breaks one by reaching past them (as a
buggy pass might) and checks verify() reports exactly that.
"""

from __future__ import annotations

import numpy as np
import pytest

from graph_ir import (
    CycleError,
    DType,
    DuplicateNameError,
    Graph,
    Node,
    NumpyTensor,
    OwnershipError,
    Shape,
    TensorType,
    TopologicalOrderError,
    TypeConsistencyError,
    UndefinedValueError,
    Use,
    UseDefError,
    Value,
    VerificationError,
)

F32 = TensorType(DType.FLOAT32, Shape([4]))


def chain() -> tuple[Graph, list[Node]]:
    graph = Graph("chain")
    value = graph.add_input(Value("x", F32))
    nodes = []
    for name in ("a", "b", "c"):
        node = graph.add_node("Relu", [value], name=name)
        value = node.outputs[0]
        nodes.append(node)
    graph.add_output(value)
    graph.verify()
    return graph, nodes


def test_a_well_formed_graph_verifies() -> None:
    chain()[0].verify()


def test_ownership_node_claims_another_graph() -> None:
    graph, (a, _, _) = chain()
    a.graph = Graph("elsewhere")
    with pytest.raises(OwnershipError) as info:
        graph.verify()
    assert info.value.node == "a"


def test_ownership_output_does_not_point_back() -> None:
    graph, (a, b, _) = chain()
    a.outputs[0]._index = 3
    with pytest.raises(OwnershipError, match="does not point back") as info:
        graph.verify()
    assert info.value.node == "a"


def test_ownership_subgraph_parent() -> None:
    graph, (a, _, _) = chain()
    body = Graph("body")
    body.add_output(graph.inputs[0])
    loop = graph.add_node("Identity", [a.outputs[0]], attrs={"body": body}, name="holder")
    body.parent = a  # wrong parent
    with pytest.raises(OwnershipError, match="subgraph") as info:
        graph.verify()
    assert info.value.node == loop.name


def test_use_def_missing_use() -> None:
    graph, (a, b, _) = chain()
    del a.outputs[0]._uses[Use(b, 0)]
    with pytest.raises(UseDefError, match="does not record this use") as info:
        graph.verify()
    assert info.value.node == "b"


def test_use_def_phantom_use() -> None:
    graph, (a, b, c) = chain()
    a.outputs[0]._uses[Use(c, 0)] = None  # c reads b, not a
    with pytest.raises(UseDefError, match="that does not exist") as info:
        graph.verify()
    assert info.value.node == "a"


def test_undefined_value_from_nowhere() -> None:
    graph, (a, b, _) = chain()
    stray = Value("stray", F32)
    b.set_input(0, stray)
    with pytest.raises(UndefinedValueError, match="not defined by any graph") as info:
        graph.verify()
    assert info.value.node == "b"


def test_undefined_value_from_another_graph() -> None:
    graph, (_, b, _) = chain()
    other = Graph("other")
    foreign = other.add_input(Value("foreign", F32))
    b.set_input(0, foreign)
    with pytest.raises(UndefinedValueError, match="outside this graph's scope"):
        graph.verify()


def test_undefined_value_after_its_input_was_dropped() -> None:
    graph, (a, _, _) = chain()
    x = graph.inputs[0]
    graph._inputs.remove(x)  # bypassing remove_input, which refuses while x has uses
    with pytest.raises(UndefinedValueError, match="removed from its graph") as info:
        graph.verify()
    assert info.value.node == "a"


def test_undefined_graph_output() -> None:
    graph, _ = chain()
    graph.add_output(Value("dangling", F32))
    with pytest.raises(UndefinedValueError, match="output %dangling"):
        graph.verify()


def test_duplicate_node_names() -> None:
    graph, (a, b, _) = chain()
    b.name = "a"  # renamed behind the graph's back
    with pytest.raises(DuplicateNameError) as info:
        graph.verify()
    assert info.value.node == "a"


def test_duplicate_value_names() -> None:
    graph, (a, b, _) = chain()
    b.outputs[0].name = "a"
    with pytest.raises(DuplicateNameError, match="defined twice") as info:
        graph.verify()
    assert info.value.field == "a"


def test_duplicate_graph_input() -> None:
    graph, _ = chain()
    graph._inputs.append(graph.inputs[0])
    with pytest.raises(DuplicateNameError, match="twice"):
        graph.verify()


def test_subgraph_value_may_not_shadow_an_outer_one() -> None:
    graph, (a, _, _) = chain()
    body = Graph("body")
    inner = body.add_node("Neg", [graph.inputs[0]], outputs=["a"], name="inner")  # 'a' exists outside
    body.add_output(inner.outputs[0])
    graph.add_node("Identity", [a.outputs[0]], attrs={"body": body}, name="holder")
    with pytest.raises(DuplicateNameError, match="shadows"):
        graph.verify()


def test_unsorted_is_not_a_cycle() -> None:
    graph, (a, b, c) = chain()
    graph.reorder([c, a, b])
    with pytest.raises(TopologicalOrderError) as info:
        graph.verify()
    assert not isinstance(info.value, CycleError)
    assert info.value.node == "c"
    graph.sort()
    assert graph.nodes == [a, b, c]
    graph.verify()


def test_a_cycle_names_its_nodes() -> None:
    graph, (a, b, c) = chain()
    a.set_input(0, b.outputs[0])  # a <- b <- a
    with pytest.raises(CycleError) as info:
        graph.verify()
    message = str(info.value)
    assert ("a -> b -> a" in message) or ("b -> a -> b" in message), message
    assert "c" not in message.split("cycle:")[1]
    with pytest.raises(CycleError):
        graph.sort()


def test_a_capture_counts_for_order() -> None:
    graph, (a, b, c) = chain()
    body = Graph("body")
    inner = body.add_node("Neg", [c.outputs[0]], name="inner")  # reads c from inside
    body.add_output(inner.outputs[0])
    holder = graph.add_node("Identity", [graph.inputs[0]], attrs={"body": body}, name="holder")
    graph.reorder([holder, a, b, c])  # holder runs before c, whose output its body reads
    with pytest.raises(TopologicalOrderError) as info:
        graph.verify()
    assert info.value.node == "holder"
    graph.sort()
    assert graph.nodes[-1] is holder
    graph.verify()


def test_a_subgraph_returning_an_outer_value_depends_on_its_producer() -> None:
    """A branch may return an outer value without any node reading it; the If still depends on
    that value's producer, so verify and sort must see the dependency."""
    graph, (a, b, c) = chain()
    then_branch, else_branch = Graph("then"), Graph("else")
    then_branch.add_output(c.outputs[0])  # returned as is
    else_branch.add_output(graph.inputs[0])
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, Shape([]))))
    if_node = graph.add_node("If", [cond], attrs={"then_branch": then_branch, "else_branch": else_branch}, name="if")
    graph.verify()
    graph.reorder([if_node, a, b, c])
    with pytest.raises(TopologicalOrderError) as info:
        graph.verify()
    assert info.value.node == "if"
    graph.sort()
    assert graph.nodes == [a, b, c, if_node]


def test_constant_dtype_mismatch() -> None:
    graph, _ = chain()
    w = graph.add_constant(NumpyTensor(np.zeros(4, np.float32)), "w")
    w.type = TensorType(DType.INT32, Shape([4]))
    with pytest.raises(TypeConsistencyError, match="holds f32 but is declared i32") as info:
        graph.verify()
    assert info.value.field == "w"


def test_constant_shape_mismatch() -> None:
    graph, _ = chain()
    w = graph.add_constant(NumpyTensor(np.zeros(4, np.float32)), "w")
    w.type = TensorType(DType.FLOAT32, Shape([2, 2]))
    with pytest.raises(TypeConsistencyError, match="shape"):
        graph.verify()
    w.type = TensorType(DType.FLOAT32, Shape(["n"]))  # a symbolic dim matches any size
    graph.verify()


def test_operand_dtype_mismatch() -> None:
    graph, (_, _, c) = chain()
    ints = graph.add_constant(NumpyTensor(np.zeros(4, np.int64)), "ints")
    add = graph.add_node("Add", [c.outputs[0], ints], name="mixed_add")
    c.outputs[0].type = F32
    with pytest.raises(TypeConsistencyError, match="different element types") as info:
        graph.verify()
    assert info.value.node == add.name
    graph.remove(add)
    where = graph.add_node("Where", [graph.add_constant(NumpyTensor(np.ones(4, bool)), "cond"), c.outputs[0], ints], name="where")
    with pytest.raises(TypeConsistencyError):
        graph.verify()
    where.set_input(2, c.outputs[0])  # the condition may differ; the branches may not
    graph.verify()


def test_function_bodies_are_verified() -> None:
    from graph_ir import Function

    graph, _ = chain()
    body = Graph("f")
    x = body.add_input(Value("X"))
    node = body.add_node("Relu", [x], name="inner")
    body.add_output(node.outputs[0])
    graph.functions[("custom", "F", "")] = Function("custom", "F", body)
    graph.verify()
    node.name = "renamed_behind_the_graphs_back"
    with pytest.raises(DuplicateNameError):
        graph.verify()


def test_every_error_is_a_verification_error() -> None:
    for cls in (OwnershipError, UseDefError, CycleError, TopologicalOrderError, DuplicateNameError, UndefinedValueError, TypeConsistencyError):
        assert issubclass(cls, VerificationError)
