"""The pass base class, its result type and its error type.

A pass is a frozen dataclass: its fields are its options (so a pipeline string can build it and
`format_pipeline` can print it back), `name` is a kebab-case class variable, and `call(graph)`
does the work. Passes work in place and return the graph they were given; `PassResult.graph` is
there so a pass may also return a new graph.

A pass that needs the target (devices, kernel cost source, objective) declares
`call(self, graph, context)` and reads `context.target` (`passes.infra.context.PassContext`);
passes that do not need it keep `call(self, graph)`. `PassManager` resolves the target once for
the whole pipeline; a pass called alone resolves it from its own options.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from graph_ir.errors import CompilerOptError

if TYPE_CHECKING:
    from graph_ir.graph import Graph
    from passes.infra.context import PassContext

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
    # Whether `call` takes the PassContext (set per class from call's signature).
    takes_context: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.takes_context = len(inspect.signature(cls.call).parameters) >= 3

    def call(self, graph: Graph) -> PassResult:
        raise NotImplementedError(f"{type(self).__name__} does not implement call()")

    def __call__(self, graph: Graph, context: PassContext | None = None) -> PassResult:
        """Run the pass; errors come out naming the pass (see `PassError`).

        `context` comes from the PassManager; called alone, a pass builds one from its own
        target options. Either way this pass's options are checked against the target."""
        try:
            if self.takes_context:
                from passes.infra.context import PassContext, resolve_pipeline_target

                target = resolve_pipeline_target([self], None if context is None else context.target)
                context = PassContext(target) if context is None or target is not context.target else context
                result = self.call(graph, context)  # type: ignore[call-arg]
            else:
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
