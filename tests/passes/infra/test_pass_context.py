"""The target reaches every pass once, through the PassManager's context; conflicts are errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

import graph_ir
from cost_model.costs import Target
from passes import PassContext, PassManager, PassResult, parse_pipeline, run_pipeline
from passes.infra import Pass, TargetConflictError, resolve_pipeline_target
from passes.placement import MEtfPlacement
from passes.scheduling import Schedule


@dataclass(frozen=True)
class RecordTarget(Pass):
    """Remembers the target it was handed (the list is shared on purpose: passes are frozen)."""

    name: ClassVar[str] = "record-target"
    seen: tuple = ()

    def call(self, graph: graph_ir.Graph, context: PassContext) -> PassResult:
        self.seen[0].append(context.target)  # type: ignore[index]
        return PassResult(graph, False)


@dataclass(frozen=True)
class NoContext(Pass):
    name: ClassVar[str] = "no-context"

    def call(self, graph: graph_ir.Graph) -> PassResult:
        return PassResult(graph, False)


def small_cnn() -> graph_ir.Graph:
    return graph_ir.load("examples/small_cnn.onnx")


def test_a_pass_option_sets_the_target_for_the_whole_pipeline() -> None:
    seen: list[Target] = []
    graph = small_cnn()
    PassManager([MEtfPlacement(devices="8xA100"), RecordTarget(seen=(seen,))]).run(graph)
    assert seen[0].topology.num_devices == 9  # 8 GPUs + the host
    assert seen[0].devices == "8xA100" and "devices" in seen[0].given
    assert {node.device for node in graph} <= {f"gpu{i}" for i in range(8)}


def test_schedule_after_placement_uses_the_placement_devices() -> None:
    """`m-etf{devices=8xA100},schedule` used to schedule on the default 4xV100 without a word."""
    on_pipeline = small_cnn()
    run_pipeline(on_pipeline, "m-etf{devices=8xA100},schedule")
    explicit = small_cnn()
    run_pipeline(explicit, "m-etf,schedule", target=Target.resolve(devices="8xA100"))
    other = small_cnn()
    run_pipeline(other, "m-etf,schedule")  # the default target, 4xV100
    priorities = [n.priority for n in on_pipeline]
    assert priorities == [n.priority for n in explicit]
    assert [n.device for n in on_pipeline] == [n.device for n in explicit]
    assert priorities != [n.priority for n in other] or [n.device for n in on_pipeline] != [n.device for n in other]


def test_two_passes_that_disagree_fail_before_the_graph_is_touched() -> None:
    graph = small_cnn()
    before = graph_ir.format_graph(graph)
    with pytest.raises(TargetConflictError) as caught:
        run_pipeline(graph, "m-etf{devices=8xA100},schedule{devices=4xV100}")
    message = str(caught.value)
    assert "pass 'schedule' option devices=4xV100" in message and "pass 'm-etf' (devices=8xA100)" in message
    assert caught.value.pass_name == "schedule"
    assert graph_ir.format_graph(graph) == before


def test_a_pass_option_that_contradicts_the_driver_target_names_both() -> None:
    with pytest.raises(TargetConflictError, match=r"pass 'm-etf' option devices=8xA100 contradicts the target \(devices=2xV100\)"):
        PassManager("m-etf{devices=8xA100}", target=Target.resolve(devices="2xV100"))
    with pytest.raises(TargetConflictError, match="objective=memory contradicts the target"):
        PassManager("sa{objective=memory}", target=Target.resolve(objective="latency"))


def test_agreeing_spellings_are_not_a_conflict() -> None:
    target = resolve_pipeline_target(parse_pipeline("m-etf{devices=8xa100},schedule{devices=8xA100}"))
    assert target.topology.device_names == Target.resolve(devices="8xA100").topology.device_names


def test_a_pass_called_alone_uses_its_own_option_or_the_default_target() -> None:
    seen: list[Target] = []
    graph = small_cnn()
    MEtfPlacement(devices="2xV100")(graph)
    assert {node.device for node in graph} <= {"gpu0", "gpu1"}
    RecordTarget(seen=(seen,))(graph)
    assert seen[0] == Target()  # 4xV100, roofline, latency
    Schedule()(graph, PassContext(Target.resolve(devices="2xV100")))
    with pytest.raises(TargetConflictError):
        Schedule(devices="8xA100")(graph, PassContext(Target.resolve(devices="2xV100")))


def test_passes_without_a_context_parameter_still_run() -> None:
    assert NoContext.takes_context is False and RecordTarget.takes_context is True
    graph = small_cnn()
    result = PassManager([NoContext()], target=Target.resolve(devices="2xV100")).run(graph)
    assert result.modified is False
