from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from graph_ir import DType, Graph, TensorType, Value
from passes import PassError, PassManager, PassResult
from passes.basic import CommonSubexpressionElimination, DeadCodeElimination
from passes.infra import DumpAfterPassInstrument, Pass, PassInstrument, TimingInstrument, VerifyInstrument


@dataclass(frozen=True)
class Sleepy(Pass):
    name = "sleepy"
    seconds: float = 0.01

    def call(self, graph: Graph) -> PassResult:
        time.sleep(self.seconds)
        return PassResult(graph, False)


@dataclass(frozen=True)
class RemoveLast(Pass):
    """Removes the last node while there is one that nothing uses (modifies until quiet)."""

    name = "remove-last"

    def call(self, graph: Graph) -> PassResult:
        nodes = graph.nodes
        if nodes and not any(v.has_uses() or v.is_graph_output() for v in nodes[-1].outputs):
            graph.remove(nodes[-1])
            return PassResult(graph, True)
        return PassResult(graph, False)


@dataclass(frozen=True)
class Disconnect(Pass):
    name = "disconnect"

    def call(self, graph: Graph) -> PassResult:
        node = graph.nodes[-1]
        node._inputs = (None,)  # bypass the IR methods: the use-def chains are now wrong
        return PassResult(graph, True)


def sample_graph() -> Graph:
    g = Graph("main")
    x = g.add_input(Value("x", TensorType(DType.FLOAT32, (2,))))
    a = g.add_node("Relu", [x])
    b = g.add_node("Relu", [x])
    c = g.add_node("Add", [a.outputs[0], b.outputs[0]])
    g.add_node("Exp", [c.outputs[0]])
    g.add_node("Exp", [x])
    g.add_output(c.outputs[0])
    return g


def test_instruments_satisfy_the_protocol(tmp_path: Path) -> None:
    for instrument in (TimingInstrument(), DumpAfterPassInstrument(tmp_path), VerifyInstrument()):
        assert isinstance(instrument, PassInstrument)


def test_timing_accumulates_over_fixpoint_iterations() -> None:
    timing = TimingInstrument()
    PassManager([Sleepy(0.02), RemoveLast()], fixpoint=True, instruments=[timing]).run(sample_graph())
    rows = {row.pass_text: row for row in timing.rows}
    assert list(rows) == ["sleepy{seconds=0.02}", "remove-last"]
    # remove-last removes the two trailing Exp nodes, one per round, then a quiet round follows
    assert (rows["remove-last"].runs, rows["remove-last"].modified_runs) == (3, 2)
    assert (rows["sleepy{seconds=0.02}"].runs, rows["sleepy{seconds=0.02}"].modified_runs) == (3, 0)
    assert rows["sleepy{seconds=0.02}"].total_s >= 0.06
    assert timing.total_s == pytest.approx(sum(r.total_s for r in timing.rows))
    report = timing.report().splitlines()
    assert report[0].split() == ["pass", "runs", "modified", "total", "ms", "mean", "ms"]
    assert report[1].split()[:3] == ["sleepy{seconds=0.02}", "3", "0"]
    assert report[2].split()[:3] == ["remove-last", "3", "2"]
    assert report[-1].startswith("total")


def test_dump_after_each_pass(tmp_path: Path) -> None:
    dump = DumpAfterPassInstrument(tmp_path / "dumps", dump_input=True)
    graph = sample_graph()
    before = str(graph)
    snapshots: list[str] = []

    class Snapshot:
        def before_pass(self, pass_: Pass, graph: Graph) -> None:
            pass

        def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
            snapshots.append(str(graph))

    PassManager([CommonSubexpressionElimination(), DeadCodeElimination()], instruments=[dump, Snapshot()]).run(graph)
    names = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert names == ["00-input.txt", "01-cse.txt", "02-dce.txt"]  # no temporary files left behind
    assert dump.written == [tmp_path / "dumps" / n for n in names]
    assert (tmp_path / "dumps" / "00-input.txt").read_text() == before
    assert (tmp_path / "dumps" / "01-cse.txt").read_text() == snapshots[0]
    assert (tmp_path / "dumps" / "02-dce.txt").read_text() == snapshots[1] == str(graph)
    assert snapshots[0] != before and snapshots[1] != snapshots[0]


def test_dump_numbers_runs_across_fixpoint_rounds(tmp_path: Path) -> None:
    dump = DumpAfterPassInstrument(tmp_path)
    PassManager([RemoveLast()], fixpoint=True, instruments=[dump]).run(sample_graph())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["01-remove-last.txt", "02-remove-last.txt", "03-remove-last.txt"]


def test_verify_instrument_names_the_pass() -> None:
    with pytest.raises(PassError) as info:
        PassManager([DeadCodeElimination(), Disconnect()], instruments=[VerifyInstrument()]).run(sample_graph())
    assert info.value.pass_name == "disconnect"
    assert "pass 'disconnect' left an invalid graph" in str(info.value)
