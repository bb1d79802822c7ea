from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value, VerificationError
from graph_ir.errors import TopologicalOrderError
from passes import PassError, PassManager, PassResult, run_pipeline
from passes.basic import DeadCodeElimination
from passes.infra import BasePassInstrument, FixpointError, Pass


@dataclass(frozen=True)
class CountDown(Pass):
    """Reports a change on its first `changes` runs (counted in a shared list)."""

    name = "count-down"
    changes: int = 2
    log: list = field(default_factory=list, compare=False)

    def call(self, graph: Graph) -> PassResult:
        self.log.append(self.name)
        return PassResult(graph, len(self.log) <= self.changes)


@dataclass(frozen=True)
class Failing(Pass):
    name = "failing"

    def call(self, graph: Graph) -> PassResult:
        raise RuntimeError("kaput")


@dataclass(frozen=True)
class BreakOrder(Pass):
    """Leaves the graph out of topological order (a bug verify_each must catch)."""

    name = "break-order"

    def call(self, graph: Graph) -> PassResult:
        graph.reorder(list(reversed(graph.nodes)))
        return PassResult(graph, True)


class Recorder(BasePassInstrument):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, bool | None]] = []

    def before_pass(self, pass_: Pass, graph: Graph) -> None:
        self.events.append(("before", pass_.name, None))

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
        self.events.append(("after", pass_.name, result.modified))


def chain_graph() -> Graph:
    g = Graph("main")
    x = g.add_input(Value("x", TensorType(DType.FLOAT32, (2,))))
    a = g.add_node("Relu", [x])
    b = g.add_node("Neg", [a.outputs[0]])
    g.add_node("Exp", [x])  # dead
    g.add_output(b.outputs[0])
    return g


def test_sequence_runs_each_pass_once_in_order() -> None:
    recorder = Recorder()
    graph = chain_graph()
    result = PassManager([CountDown(changes=0), DeadCodeElimination()], instruments=[recorder]).run(graph)
    assert result.graph is graph and result.modified  # dce removed the Exp node
    assert recorder.events == [
        ("before", "count-down", None),
        ("after", "count-down", False),
        ("before", "dce", None),
        ("after", "dce", True),
    ]


def test_unmodified_when_no_pass_changes_anything() -> None:
    result = PassManager([CountDown(changes=0)]).run(Graph())
    assert not result.modified


def test_fixpoint_repeats_until_a_quiet_round() -> None:
    counter = CountDown(changes=3)
    manager = PassManager([counter], fixpoint=True)
    result = manager.run(Graph())
    assert result.modified
    assert len(counter.log) == 4 and manager.iterations == 4  # 3 changing rounds + 1 quiet one


def test_fixpoint_error_names_the_passes_still_changing() -> None:
    manager = PassManager([CountDown(changes=100), DeadCodeElimination()], fixpoint=True, max_iterations=5)
    with pytest.raises(FixpointError) as info:
        manager.run(chain_graph())
    message = str(info.value)
    assert "no fixpoint after 5 iterations" in message and "count-down" in message and "dce" not in message
    assert isinstance(info.value, PassError)


def test_without_fixpoint_a_single_round_runs() -> None:
    counter = CountDown(changes=100)
    PassManager([counter], max_iterations=5).run(Graph())
    assert len(counter.log) == 1


def test_failure_names_the_failing_pass() -> None:
    with pytest.raises(PassError) as info:
        PassManager([DeadCodeElimination(), Failing(), CountDown()]).run(chain_graph())
    assert info.value.pass_name == "failing"
    assert "pass 'failing' failed: RuntimeError: kaput" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_verify_each_catches_a_pass_that_breaks_the_graph() -> None:
    with pytest.raises(PassError) as info:
        PassManager([BreakOrder()], verify_each=True).run(chain_graph())
    assert "pass 'break-order' left an invalid graph" in str(info.value)
    assert isinstance(info.value.__cause__, TopologicalOrderError)
    # without verification the broken graph goes through unnoticed
    graph = PassManager([BreakOrder()]).run(chain_graph()).graph
    with pytest.raises(VerificationError):
        graph.verify()


def test_pipeline_string_and_run_pipeline() -> None:
    manager = PassManager("dce,cse{merge-constants=false}", verify_each=True)
    assert [p.name for p in manager.passes] == ["dce", "cse"]
    assert repr(manager) == "PassManager('dce,cse{merge-constants=false}', fixpoint=False)"
    graph = chain_graph()
    graph.add_constant(NumpyTensor(np.zeros(3, np.float32)), "unused")
    result = run_pipeline(graph, "dce", verify_each=True, fixpoint=True)
    assert result.modified
    assert [n.op_type for n in graph] == ["Relu", "Neg"] and not graph.initializers


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="Pass instances"):
        PassManager([lambda g: g])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_iterations"):
        PassManager([], max_iterations=0)
