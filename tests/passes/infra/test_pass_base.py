from __future__ import annotations

from dataclasses import dataclass

import pytest

from graph_ir import Graph, GraphIRError, VerificationError
from graph_ir.errors import CompilerOptError
from passes.infra import Pass, PassError, PassResult, option


@dataclass(frozen=True)
class Exploding(Pass):
    name = "exploding"
    error: Exception = option(ValueError("boom"))

    def call(self, graph: Graph) -> PassResult:
        raise self.error


@dataclass(frozen=True)
class WrongReturn(Pass):
    name = "wrong-return"

    def call(self, graph: Graph) -> PassResult:
        return graph  # type: ignore[return-value]


@dataclass(frozen=True)
class Noop(Pass):
    name = "noop"
    level: int = option(1, "how hard to do nothing")
    label: str = "x"

    def call(self, graph: Graph) -> PassResult:
        return PassResult(graph, False)


def test_plain_exception_is_wrapped_naming_the_pass() -> None:
    original = ValueError("boom")
    with pytest.raises(PassError) as info:
        Exploding(original)(Graph())
    assert info.value.pass_name == "exploding"
    assert "pass 'exploding' failed: ValueError: boom" in str(info.value)
    assert info.value.__cause__ is original


def test_project_errors_keep_their_class_and_gain_the_pass_name() -> None:
    original = VerificationError("broken thing", node="n1")
    with pytest.raises(VerificationError) as info:
        Exploding(original)(Graph())
    assert info.value is original
    assert info.value.pass_name == "exploding"
    assert str(info.value) == "node 'n1': in pass 'exploding': broken thing"


def test_pass_name_is_added_once() -> None:
    original = GraphIRError("bad")
    for _ in range(2):
        with pytest.raises(GraphIRError):
            Exploding(original)(Graph())
    assert str(original) == "in pass 'exploding': bad"


def test_pass_error_is_a_compiler_opt_error() -> None:
    assert issubclass(PassError, CompilerOptError)


def test_non_result_return_is_an_error() -> None:
    with pytest.raises(PassError, match="returned Graph, not a PassResult"):
        WrongReturn()(Graph())


def test_pass_is_frozen_and_prints_as_pipeline_text() -> None:
    noop = Noop(level=3)
    with pytest.raises(AttributeError):
        noop.level = 4  # type: ignore[misc]
    assert str(noop) == "noop{level=3}"
    assert str(Noop()) == "noop"
    assert Noop(level=3) == Noop(level=3) and Noop(level=3) != Noop()


def test_option_rejects_mutable_defaults() -> None:
    with pytest.raises(TypeError, match="immutable"):
        option([1, 2])


def test_result_is_immutable() -> None:
    result = PassResult(Graph(), True)
    with pytest.raises(AttributeError):
        result.modified = False  # type: ignore[misc]
