"""Control-only dependencies (node.meta[CONTROL_PREDECESSORS]) order nodes like data edges."""

from __future__ import annotations

import pytest

from graph_ir import CycleError, DType, Graph, TensorType, TopologicalOrderError, Value
from graph_ir.core import CONTROL_PREDECESSORS


def _graph() -> Graph:
    graph = Graph("g")
    x = graph.add_input(Value("x", TensorType(DType.FLOAT32, (2,))))
    a = graph.add_node("Relu", [x], name="a")
    b = graph.add_node("Neg", [x], name="b")
    graph.add_output(a.outputs[0])
    graph.add_output(b.outputs[0])
    return graph


def test_sort_and_verify_follow_control_predecessors():
    graph = _graph()
    graph.find_node("a").meta[CONTROL_PREDECESSORS] = ["b"]  # b must run before a
    with pytest.raises(TopologicalOrderError, match="a"):
        graph.verify()
    graph.sort()
    assert [n.name for n in graph] == ["b", "a"]
    graph.verify()
    assert graph.find_node("a").control_predecessors() == [graph.find_node("b")]


def test_names_of_removed_nodes_are_ignored_and_cycles_reported():
    graph = _graph()
    a, b = graph.find_node("a"), graph.find_node("b")
    a.meta[CONTROL_PREDECESSORS] = ["gone"]
    graph.verify()
    a.meta[CONTROL_PREDECESSORS] = ["b"]
    b.meta[CONTROL_PREDECESSORS] = ["a"]
    with pytest.raises(CycleError, match="cycle"):
        graph.sort()
