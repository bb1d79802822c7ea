"""Decisions read from and written to nodes, their validation, and the CostModel interface."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.decisions import DecisionError, Decisions
from graph_ir.order import node_order
from cost_model.costs import Cost, CostModel, SimulatorCostModel
from cost_model.simulator import SimulationProblem, simulate
from test_simulator import US, Builder, diamond, topology


def test_from_graph_reads_node_fields_and_defaults() -> None:
    b = diamond()
    topo = topology(3)
    b.node("B").device = "d2"
    b.node("C").device = "/job:w/replica:0/task:0/device:D:1"  # TensorFlow-style name
    b.node("C").fusion_group = 4
    b.node("D").priority = 2.5
    decisions = Decisions.from_graph(b.graph, topo)
    assert decisions.device.dtype == np.int32 and decisions.fusion_group.dtype == np.int32
    assert decisions.priority.dtype == np.float64
    # A has no device: topology.default_device (the first non-CPU device, d0 here).
    assert decisions.device.tolist() == [0, 2, 1, 0]
    assert decisions.fusion_group.tolist() == [-1, -1, 4, -1]
    assert decisions.priority.tolist() == [0.0, 0.0, 0.0, 2.5]
    assert Decisions.from_graph(b.graph, topo, default_device="d1").device.tolist() == [1, 2, 1, 1]


def test_apply_writes_back_and_round_trips() -> None:
    b = diamond()
    topo = topology(2)
    decisions = Decisions(np.array([1, 0, 1, 0]), np.array([-1, 3, 3, -1]), np.array([0.5, 0, 1, 0]))
    decisions.apply(b.graph, topo)
    assert [n.device for n in b.graph] == ["d1", "d0", "d1", "d0"]
    assert [n.fusion_group for n in b.graph] == [None, 3, 3, None]
    assert b.node("A").priority == 0.5
    assert Decisions.from_graph(b.graph, topo) == decisions


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("device", "gpu7", "unknown device 'gpu7'"), ("fusion_group", -3, "fusion_group must be"), ("fusion_group", 2**40, "fusion_group must be")],
)
def test_bad_node_fields_name_the_node(field: str, value: object, message: str) -> None:
    b = diamond()
    setattr(b.node("C"), field, value)
    with pytest.raises(DecisionError, match=message) as info:
        Decisions.from_graph(b.graph, topology(2))
    assert info.value.node == "C" and info.value.field == field


def test_validate_array_decisions() -> None:
    problem = SimulationProblem.from_graph(diamond().graph, topology(2))
    good = Decisions.default(4)
    with pytest.raises(DecisionError, match="device index 5 out of range") as info:
        Decisions(np.array([0, 5, 0, 0]), good.fusion_group, good.priority).validate(2, nodes=problem.nodes)
    assert info.value.node == "B"
    with pytest.raises(DecisionError, match="not finite"):
        Decisions(good.device, good.fusion_group, np.array([0, np.nan, 0, 0])).validate(2)
    with pytest.raises(DecisionError, match="-1 for none"):
        Decisions(good.device, np.array([-1, -2, -1, -1]), good.priority).validate(2)
    with pytest.raises(DecisionError, match="one length"):
        Decisions(np.zeros(3), np.zeros(4), np.zeros(4))
    with pytest.raises(DecisionError, match="cover 3 nodes"):
        simulate(problem, Decisions.default(3))


def test_node_order_is_topological_even_when_the_graph_is_not() -> None:
    b = diamond()
    nodes = b.graph.nodes
    b.graph.reorder([nodes[3], nodes[0], nodes[2], nodes[1]])  # D first: not topological
    order = [n.name for n in node_order(b.graph)]
    assert order.index("A") < order.index("B") < order.index("D") and order.index("C") < order.index("D")
    problem = SimulationProblem.from_graph(b.graph, topology(1))
    assert [n.name for n in problem.nodes] == order
    assert simulate(problem, Decisions.default(4)).step_time_s == pytest.approx(40 * US, rel=1e-12)


def test_simulator_cost_model_answers_through_the_interface() -> None:
    b = diamond()
    topo = topology(2)
    b.node("C").device = "d1"
    model = SimulatorCostModel(topo)
    assert isinstance(model, CostModel)
    cost = model.estimate(b.graph)
    assert isinstance(cost, Cost)
    assert cost.step_time_s == pytest.approx(41 * US, rel=1e-12)
    assert cost.bytes_moved == 8000 and cost.oom is False
    assert cost.device_names == ("d0", "d1") and len(cost.busy_s) == 2 and len(cost.peak_memory_bytes) == 2
    problem = model.problem(b.graph)
    assert model.estimate(problem, Decisions.default(4)).step_time_s == pytest.approx(40 * US, rel=1e-12)
    assert model.estimate(problem) == cost  # decisions read from the nodes


def test_cost_model_accepts_a_preset_name() -> None:
    b = Builder()
    b.graph.add_output(b.op("Relu", [b.input("x")], "r"))
    cost = SimulatorCostModel("2xV100").estimate(b.graph)
    # On a V100 (900 GB/s, 5 us launch): 8000 bytes -> 8.9 ns + 5 us.
    assert cost.step_time_s == pytest.approx(8000 / 900e9 + 5e-6, rel=1e-12)
    assert cost.busy_s[1] > 0 and cost.busy_s[0] == 0  # gpu0 is the default device
