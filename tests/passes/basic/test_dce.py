from __future__ import annotations

import time

import numpy as np

from graph_ir import DType, Graph, Node, NumpyTensor, OpKind, TensorType, Value, assert_structurally_equal
from passes.basic import DeadCodeElimination


def f32(name: str, *shape: int) -> Value:
    return Value(name, TensorType(DType.FLOAT32, shape))


def run_dce(graph: Graph, **options: bool) -> bool:
    result = DeadCodeElimination(**options)(graph)
    assert result.graph is graph
    graph.verify()
    return result.modified


def test_dead_chain_dies_in_one_run(assert_same_numerics) -> None:
    before = Graph("main")
    x = before.add_input(f32("x", 2, 3))
    w = before.add_constant(NumpyTensor(np.full((2, 3), 2.0, np.float32)), "w")
    unused = before.add_constant(NumpyTensor(np.ones(4, np.float32)), "unused")
    dead_w = before.add_constant(NumpyTensor(np.ones((2, 3), np.float32)), "dead_w")
    live = before.add_node("Mul", [x, w])
    d1 = before.add_node("Relu", [x])
    d2 = before.add_node("Add", [d1.outputs[0], dead_w])
    before.add_node("Exp", [d2.outputs[0]])
    before.add_output(live.outputs[0])
    original = before.clone()

    assert run_dce(before)

    expected = Graph("main")
    ex = expected.add_input(f32("x", 2, 3))
    ew = expected.add_constant(NumpyTensor(np.full((2, 3), 2.0, np.float32)), "w")
    expected.add_output(expected.add_node("Mul", [ex, ew]).outputs[0])
    assert_structurally_equal(before, expected)
    assert unused.graph is None and dead_w.graph is None
    assert_same_numerics(original, before)
    assert not run_dce(before)


def test_keep_constants_option() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    graph.add_constant(NumpyTensor(np.ones(2, np.float32)), "unused")
    graph.add_node("Neg", [x])
    graph.add_output(x)
    assert run_dce(graph, remove_unused_constants=False)
    assert len(graph) == 0 and list(graph.initializers) == ["unused"]
    assert not run_dce(graph, remove_unused_constants=False)


def test_initializer_that_is_a_graph_input_is_kept() -> None:
    graph = Graph("main")
    default = Value("bias", const=NumpyTensor(np.zeros(2, np.float32)))
    graph.add_initializer(default)
    graph.add_input(default)
    x = graph.add_input(f32("x", 2))
    graph.add_output(graph.add_node("Relu", [x]).outputs[0])
    assert not run_dce(graph)
    assert graph.initializers == {"bias": default} and default in graph.inputs


def test_side_effects_and_their_inputs_are_kept() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    feed = graph.add_node("Relu", [x])
    graph.add_node("Print", [feed.outputs[0]], domain="custom", kind=OpKind.IO)
    graph.add_node("RandomNormal", [], attrs={"shape": [2]})
    graph.add_node("Neg", [x])  # dead
    graph.add_output(x)

    assert run_dce(graph)
    assert [n.op_type for n in graph] == ["Relu", "Print", "RandomNormal"]


def test_nodes_without_outputs_are_kept() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    graph.add_node("Barrier", [x], outputs=0, domain="custom")
    graph.add_output(x)
    assert not run_dce(graph)
    assert len(graph) == 1


def test_multi_output_node_with_one_used_output_is_kept() -> None:
    graph = Graph("main")
    x = graph.add_input(f32("x", 4))
    split = graph.add_node("Split", [x], outputs=2, attrs={"num_outputs": 2})
    graph.add_output(split.outputs[1])
    assert not run_dce(graph)


def _if_graph(direct_return: bool = True) -> tuple[Graph, Node]:
    """An If whose then-branch has dead nodes; one captures an outer value used nowhere else."""
    graph = Graph("main")
    cond = graph.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = graph.add_input(f32("x", 2))
    only_inner = graph.add_node("Sigmoid", [x], name="only_inner")
    returned = graph.add_node("Tanh", [x], name="returned", outputs=[f32("t", 2)])

    then_branch = Graph("then")
    dead_inner = then_branch.add_node("Neg", [only_inner.outputs[0]])
    then_branch.add_node("Exp", [dead_inner.outputs[0]])
    then_branch.add_output(then_branch.add_node("Relu", [x], outputs=[f32("r", 2)]).outputs[0])
    else_branch = Graph("else")
    if direct_return:  # the IR allows it, ONNX does not
        else_branch.add_output(returned.outputs[0])  # an outer value returned as is: a use
    else:
        else_branch.add_output(else_branch.add_node("Identity", [returned.outputs[0]], outputs=[f32("e", 2)]).outputs[0])
    branches = {"then_branch": then_branch, "else_branch": else_branch}
    node = graph.add_node("If", [cond], attrs=branches, outputs=[f32("y", 2)])
    graph.add_output(node.outputs[0])
    return graph, node


def test_subgraph_sweep_keeps_numerics(assert_same_numerics) -> None:
    graph, if_node = _if_graph(direct_return=False)
    original = graph.clone()
    assert run_dce(graph)
    assert [n.op_type for n in if_node.attr("then_branch")] == ["Relu"]
    for seed in range(4):  # both branches get taken
        assert_same_numerics(original, graph, seed=seed)


def test_subgraphs_are_swept_and_free_outer_values() -> None:
    graph, if_node = _if_graph()
    assert run_dce(graph)

    expected = Graph("main")
    cond = expected.add_input(Value("cond", TensorType(DType.BOOL, ())))
    x = expected.add_input(f32("x", 2))
    returned = expected.add_node("Tanh", [x], outputs=[f32("t", 2)])
    then_branch = Graph("then")
    then_branch.add_output(then_branch.add_node("Relu", [x], outputs=[f32("r", 2)]).outputs[0])
    else_branch = Graph("else")
    else_branch.add_output(returned.outputs[0])
    branches = {"then_branch": then_branch, "else_branch": else_branch}
    out = expected.add_node("If", [cond], attrs=branches, outputs=[f32("y", 2)])
    expected.add_output(out.outputs[0])
    assert_structurally_equal(graph, expected)
    assert graph.find_node("only_inner") is None and graph.find_node("returned") is not None


def test_dead_if_is_removed_with_its_body() -> None:
    graph, if_node = _if_graph()
    graph.set_outputs([graph.inputs[1]])
    assert run_dce(graph)
    assert len(graph) == 0


def test_if_holding_a_side_effect_is_kept() -> None:
    graph, if_node = _if_graph()
    then_branch = if_node.attr("then_branch")
    then_branch.add_node("Send", [graph.inputs[1]], outputs=1, domain="custom", kind=OpKind.SEND)
    graph.set_outputs([graph.inputs[1]])
    assert run_dce(graph)
    assert [n.op_type for n in graph] == ["Tanh", "If"]  # Sigmoid died with the inner dead chain
    assert [n.op_type for n in then_branch] == ["Relu", "Send"]


def test_function_bodies_are_swept() -> None:
    from graph_ir import Function

    graph = Graph("main")
    x = graph.add_input(f32("x", 2))
    body = Graph("body")
    a = body.add_input(f32("a", 2))
    body.add_node("Neg", [a])
    body.add_output(body.add_node("Relu", [a]).outputs[0])
    graph.functions[("local", "f", "")] = Function("local", "f", body)
    graph.add_output(graph.add_node("f", [x], domain="local").outputs[0])
    assert run_dce(graph)
    assert [n.op_type for n in body] == ["Relu"]


def test_long_chains_are_linear() -> None:
    def build(n: int) -> Graph:
        graph = Graph("main")
        x = graph.add_input(f32("x", 2))
        value = x
        for _ in range(n):
            value = graph.add_node("Relu", [value]).outputs[0]
        graph.add_output(x)
        return graph

    small, large = build(2_000), build(20_000)
    start = time.perf_counter()
    assert run_dce(small)
    small_s = time.perf_counter() - start
    start = time.perf_counter()
    assert run_dce(large)
    large_s = time.perf_counter() - start
    assert len(small) == len(large) == 0
    # 10x the nodes should cost about 10x; a quadratic pass would cost about 100x
    assert large_s < 30 * small_s + 0.05
