"""Run a list of passes in order, once or until none of them changes the graph."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Sequence

from passes.infra.base import Pass, PassError, PassResult
from passes.infra.context import PassContext, resolve_pipeline_target
from passes.infra.instruments import PassInstrument, verify_after

if TYPE_CHECKING:
    from cost_model.costs import Target
    from graph_ir.graph import Graph

__all__ = ["PassManager", "FixpointError"]

logger = logging.getLogger(__name__)


class FixpointError(PassError):
    """The passes still changed the graph after `max_iterations` rounds."""


class PassManager:
    """Runs `passes` (instances, or a pipeline string) over a graph.

    With `fixpoint` the whole list repeats until a round in which no pass reports a change;
    a FixpointError names the passes still changing the graph after `max_iterations` rounds.
    With `verify_each` the graph is verified after every pass. Every failure comes out as an
    error naming the failing pass (see `Pass.__call__`).

    `target` (a `cost_model.costs.Target`, default: 4xV100, roofline, latency) is resolved with
    the passes' own target options when the manager is built (`passes.infra.context`), so a
    pipeline whose passes disagree on devices fails before it touches the graph; every pass then
    receives it in its `PassContext`.
    """

    def __init__(
        self,
        passes: Sequence[Pass] | str,
        *,
        fixpoint: bool = False,
        max_iterations: int = 20,
        verify_each: bool = False,
        instruments: Iterable[PassInstrument] = (),
        target: Target | None = None,
    ) -> None:
        if isinstance(passes, str):
            from passes.infra.pipeline import parse_pipeline

            passes = parse_pipeline(passes)
        for pass_ in passes:
            if not isinstance(pass_, Pass):
                raise TypeError(f"PassManager takes Pass instances, got {type(pass_).__name__}")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        self.passes: tuple[Pass, ...] = tuple(passes)
        self.fixpoint = fixpoint
        self.max_iterations = max_iterations
        self.verify_each = verify_each
        self.instruments: tuple[PassInstrument, ...] = tuple(instruments)
        self.context = PassContext(resolve_pipeline_target(self.passes, target))
        self.iterations = 0  # rounds taken by the last run

    def run(self, graph: Graph) -> PassResult:
        modified = False
        rounds = self.max_iterations if self.fixpoint else 1
        for iteration in range(rounds):
            changed_by: list[str] = []
            for pass_ in self.passes:
                result = self._run_one(pass_, graph)
                graph = result.graph
                if result.modified:
                    changed_by.append(pass_.name)
            self.iterations = iteration + 1
            modified = modified or bool(changed_by)
            if not changed_by or not self.fixpoint:
                return PassResult(graph, modified)
            logger.debug("round %d changed the graph: %s", iteration + 1, ", ".join(changed_by))
        raise FixpointError(
            f"no fixpoint after {self.max_iterations} iterations; still changing the graph: "
            f"{', '.join(dict.fromkeys(changed_by))}",
            pass_name=changed_by[0],
        )

    __call__ = run

    def _run_one(self, pass_: Pass, graph: Graph) -> PassResult:
        for instrument in self.instruments:
            instrument.before_pass(pass_, graph)
        logger.debug("running pass %s", pass_)
        result = pass_(graph, self.context)
        if self.verify_each:
            verify_after(pass_, result.graph)
        for instrument in self.instruments:
            instrument.after_pass(pass_, result.graph, result)
        return result

    def __repr__(self) -> str:
        from passes.infra.pipeline import format_pipeline

        return f"PassManager({format_pipeline(self.passes)!r}, fixpoint={self.fixpoint})"
