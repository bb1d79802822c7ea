"""Float options of every `compiler-opt` command refuse NaN and infinities at parse time."""

from __future__ import annotations

import argparse

import pytest

from compiler_opt.cli.arg_types import finite_float
from compiler_opt.cli.main import build_parser, main


def _actions(parser: argparse.ArgumentParser, path: str = "compiler-opt"):  # type: ignore[no-untyped-def]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}")
        else:
            yield path, action


def test_no_option_parses_a_bare_float() -> None:
    """A plain `type=float` takes 'nan' and 'inf'; every float option uses `finite_float` instead."""
    actions = list(_actions(build_parser()))
    bare = [f"{path} {'/'.join(a.option_strings)}" for path, a in actions if a.type is float]
    assert not bare, bare
    assert sum(a.type is finite_float for _, a in actions) >= 20  # the walk reached the subcommands' options


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_finite_float_refuses_non_finite_values(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a finite number"):
        finite_float(text)


def test_a_nan_option_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--mode", "go-one", "--workloads", "rnnlm-2", "--lr", "nan"]) == 2
    err = capsys.readouterr().err
    assert "argument --lr: expected a finite number, got 'nan'" in err
    assert finite_float("2.5e-3") == 2.5e-3 and finite_float("-1") == -1.0  # ranges stay each option's own check
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number"):
        finite_float("fast")
