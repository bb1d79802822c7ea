from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import pytest

from graph_ir import Graph
from graph_ir.errors import CompilerOptError
from passes import PassError, PipelineSyntaxError, format_pipeline, parse_pipeline, register_pass
from passes.basic import CommonSubexpressionElimination, ConstantFolding, DeadCodeElimination, ShapeInference
from passes.infra import Pass, PassResult, option


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


@dataclass(frozen=True)
class AllTypes(Pass):
    name = "all-types"
    count: int = 1
    ratio: float = 0.5
    flag: bool = False
    label: str = "plain"
    tile: tuple[int, ...] = (8, 8)
    pair: tuple[int, float] = (1, 2.0)
    maybe: int | None = None
    maybe_text: str | None = None
    order: Literal["bfs", "dfs"] = "bfs"
    mode: Mode = Mode.FAST
    names: tuple[str, ...] = ()

    def call(self, graph: Graph) -> PassResult:
        return PassResult(graph, False)


@dataclass(frozen=True)
class Validated(Pass):
    name = "validated"
    limit: int = option(1, "must be positive")

    def __post_init__(self) -> None:
        if self.limit <= 0:
            raise ValueError(f"limit must be positive, got {self.limit}")


@pytest.fixture(autouse=True)
def _test_passes(isolated_registry: dict) -> None:
    register_pass(AllTypes)
    register_pass(Validated)


def test_basic_pipeline() -> None:
    passes = parse_pipeline("dce,cse,constant-folding{size-limit=1024,fold-shape-ops=false},shape-infer")
    assert passes == [
        DeadCodeElimination(),
        CommonSubexpressionElimination(),
        ConstantFolding(size_limit=1024, fold_shape_ops=False),
        ShapeInference(),
    ]


def test_whitespace_and_empty_braces() -> None:
    assert parse_pipeline("  dce ,  constant-folding { size-limit = 64 , fold-shape-ops=TRUE } , cse{} ") == [
        DeadCodeElimination(),
        ConstantFolding(size_limit=64),
        CommonSubexpressionElimination(),
    ]


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_pipeline(text: str) -> None:
    assert parse_pipeline(text) == []


def test_every_option_type_converts() -> None:
    (p,) = parse_pipeline(
        'all-types{count=0x10,ratio=1e-3,flag=true,label="a, b {c}",tile=4:8:16,pair=3:0.25,'
        "maybe=none,maybe-text=null,order=dfs,mode=safe,names=x:y}"
    )
    assert p == AllTypes(
        count=16,
        ratio=1e-3,
        flag=True,
        label="a, b {c}",
        tile=(4, 8, 16),
        pair=(3, 0.25),
        maybe=None,
        maybe_text=None,
        order="dfs",
        mode=Mode.SAFE,
        names=("x", "y"),
    )
    (q,) = parse_pipeline('all-types{maybe=-7,maybe-text="none",tile="",label=\'q\'}')
    assert (q.maybe, q.maybe_text, q.tile, q.label) == (-7, "none", (), "'q'")


@pytest.mark.parametrize(
    "instance",
    [
        AllTypes(),
        AllTypes(count=-3, ratio=float("inf"), flag=True, tile=(1,), pair=(0, -1.5)),
        AllTypes(label='with "quotes", commas, {braces} and \\ backslash', maybe_text="none"),
        AllTypes(label="", tile=(), names=("a", "b-c")),
        AllTypes(maybe=0, maybe_text="", order="dfs", mode=Mode.SAFE),
        ConstantFolding(size_limit=7, fold_shape_ops=False),
    ],
)
def test_format_round_trips(instance: Pass) -> None:
    text = format_pipeline([instance, DeadCodeElimination()])
    assert parse_pipeline(text) == [instance, DeadCodeElimination()]


def test_format_prints_only_changed_options() -> None:
    assert format_pipeline([ConstantFolding(), ConstantFolding(size_limit=64)]) == "constant-folding,constant-folding{size-limit=64}"
    assert format_pipeline([AllTypes(tile=(2, 4), flag=True)]) == "all-types{flag=true,tile=2:4}"


def test_unformattable_tuple_item_is_an_error() -> None:
    with pytest.raises(PassError, match="cannot be written"):
        format_pipeline([AllTypes(names=("a:b",))])


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("dce,,cse", "expected a pass name, found ','", 4),
        ("dce,", "expected a pass name, found end of text", 4),
        ("dce cse", "expected ',' or end of pipeline, found 'c'", 4),
        ("dce}", "expected ',' or end of pipeline, found '}'", 3),
        ("dcee", "unknown pass 'dcee'; did you mean 'dce'?", 0),
        ("cse,constant-foldng", "did you mean 'constant-folding'?", 4),
        ("constant-folding{size=3}", "pass 'constant-folding' has no option 'size' (its options: size-limit, fold-shape-ops, same-size)", 17),
        ("constant-folding{size_limit=3}", "has no option 'size_limit'", 17),
        ("constant-folding{size-limit=abc}", "bad value for option 'size-limit' of pass 'constant-folding': expected an integer, got 'abc'", 28),
        ("constant-folding{fold-shape-ops=yes}", "expected true or false, got 'yes'", 32),
        ("constant-folding{size-limit=1", "expected '}', found end of text", 29),
        ("constant-folding{size-limit}", "expected '=', found '}'", 27),
        ("constant-folding{size-limit=1,size-limit=2}", "option 'size-limit' of pass 'constant-folding' is given twice", 30),
        ("constant-folding{=1}", "expected an option name, found '='", 17),
        ('all-types{label="open', "unterminated quoted value", 16),
        ("all-types{label=a{b}}", "unexpected '{' in a value (quote the value)", 17),
        ("all-types{pair=1:2:3}", "expected 2 ':'-separated items, got 3", 15),
        ("all-types{tile=1:x}", "expected an integer, got 'x'", 15),
        ("all-types{order=random}", "expected one of bfs, dfs, got 'random'", 16),
        ("all-types{mode=turbo}", "expected one of fast, safe, got 'turbo'", 15),
        ("all-types{ratio=fast}", "expected a number, got 'fast'", 16),
        ("all-types{ratio=nan}", "expected a number, got 'nan'", 16),  # NaN passed every pass's range check
        ("validated{limit=0}", "cannot create pass 'validated': limit must be positive, got 0", 0),
        ("dce{remove-unused-constants=true}x", "expected ',' or end of pipeline, found 'x'", 33),
    ],
)
def test_syntax_errors_name_the_position(text: str, message: str, position: int) -> None:
    with pytest.raises(PipelineSyntaxError) as info:
        parse_pipeline(text)
    error = info.value
    assert message in str(error)
    assert error.position == position, str(error)
    assert f"at position {position}\n  {text}\n  {' ' * position}^" in str(error)


def test_syntax_error_is_a_pass_error() -> None:
    assert issubclass(PipelineSyntaxError, PassError) and issubclass(PipelineSyntaxError, CompilerOptError)


def test_unsupported_option_type_is_reported() -> None:
    @dataclass(frozen=True)
    class OddOption(Pass):
        name = "odd-option"
        table: dict = None  # type: ignore[assignment]

    register_pass(OddOption)
    with pytest.raises(PipelineSyntaxError, match="options of type dict are not supported"):
        parse_pipeline("odd-option{table=1}")
