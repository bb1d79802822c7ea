"""The pass base class, its result type and its error type.

A pass is a frozen dataclass: its fields are its options (so a pipeline string can build it and
`format_pipeline` can print it back), `name` is a kebab-case class variable, and `call(graph)`
does the work. Passes work in place and return the graph they were given; `PassResult.graph` is
there so a pass may also return a new graph.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from graph_ir.errors import CompilerOptError

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["Pass", "PassResult", "PassError", "option"]


class PassError(CompilerOptError):
    """A pass failed; `pass_name` names it and `__cause__` holds the original exception."""

    def __init__(self, message: str, *, pass_name: str | None = None, **location: Any) -> None:
        super().__init__(message, **location)
        self.pass_name = pass_name


@dataclass(frozen=True, slots=True)
class PassResult:
    graph: Graph
    modified: bool


def option(default: Any, doc: str = "") -> Any:
    """A pass option with a default and a one-line description (shown by the CLI listing)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("pass options must be immutable (use a tuple, not a list)")
    return dataclasses.field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Pass:
    """Base of every pass. Subclasses are `@dataclass(frozen=True)` and set `name`."""

    name: ClassVar[str] = ""

    def call(self, graph: Graph) -> PassResult:
        raise NotImplementedError(f"{type(self).__name__} does not implement call()")

    def __call__(self, graph: Graph) -> PassResult:
        """Run the pass; errors come out naming the pass (see `PassError`)."""
        try:
            result = self.call(graph)
        except CompilerOptError as err:
            # Keep the specific class (callers catch e.g. VerificationError) but say which pass.
            add_pass_context(err, self.name)
            raise
        except Exception as err:
            raise PassError(
                f"pass '{self.name}' failed: {type(err).__name__}: {err}", pass_name=self.name
            ) from err
        if not isinstance(result, PassResult):
            raise PassError(
                f"pass '{self.name}' returned {type(result).__name__}, not a PassResult", pass_name=self.name
            )
        return result

    def __str__(self) -> str:
        from passes.infra.pipeline import format_pass

        return format_pass(self)


def add_pass_context(err: CompilerOptError, pass_name: str) -> CompilerOptError:
    """Prefix the error's message with the pass name (once) and record it as `pass_name`."""
    if getattr(err, "pass_name", None) is None:
        err.pass_name = pass_name  # type: ignore[attr-defined]
        message = getattr(err, "message", str(err))
        err.message = f"in pass '{pass_name}': {message}"
        err.args = (err.message,)
    return err
