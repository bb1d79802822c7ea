"""Pass instruments: hooks around each pass run, added without touching the passes.

An instrument has `before_pass(pass_, graph)` and `after_pass(pass_, graph, result)`; the
`PassManager` calls them in order around every pass it runs (each fixpoint iteration included).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from graph_ir.errors import VerificationError
from graph_ir.io.atomic import atomic_path
from passes.infra.base import Pass, PassError, PassResult

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = [
    "PassInstrument",
    "BasePassInstrument",
    "TimingInstrument",
    "TimingRow",
    "DumpAfterPassInstrument",
    "VerifyInstrument",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class PassInstrument(Protocol):
    def before_pass(self, pass_: Pass, graph: Graph) -> None: ...

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None: ...


class BasePassInstrument:
    """No-op hooks, so an instrument overrides only what it needs."""

    def before_pass(self, pass_: Pass, graph: Graph) -> None:
        pass

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
        pass


@dataclass
class TimingRow:
    pass_text: str  # the pass as pipeline text, options included
    runs: int = 0
    modified_runs: int = 0
    total_s: float = 0.0


class TimingInstrument(BasePassInstrument):
    """Wall time per pass, summed over repeated runs (fixpoint iterations, or equal passes)."""

    def __init__(self) -> None:
        self._rows: dict[str, TimingRow] = {}
        self._started: list[float] = []

    def before_pass(self, pass_: Pass, graph: Graph) -> None:
        self._started.append(time.perf_counter())

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
        elapsed = time.perf_counter() - self._started.pop()
        key = str(pass_)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = TimingRow(key)
        row.runs += 1
        row.modified_runs += int(result.modified)
        row.total_s += elapsed

    @property
    def rows(self) -> list[TimingRow]:
        """One row per distinct pass, in first-run order."""
        return list(self._rows.values())

    @property
    def total_s(self) -> float:
        return sum(row.total_s for row in self._rows.values())

    def report(self) -> str:
        """A text table: pass, runs, runs that modified the graph, total and mean milliseconds."""
        header = ("pass", "runs", "modified", "total ms", "mean ms")
        body = [
            (r.pass_text, str(r.runs), str(r.modified_runs), f"{r.total_s * 1e3:.3f}", f"{r.total_s * 1e3 / r.runs:.3f}")
            for r in self._rows.values()
        ]
        body.append(("total", "", "", f"{self.total_s * 1e3:.3f}", ""))
        widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in [header, *body]]
        return "\n".join(lines)


class DumpAfterPassInstrument(BasePassInstrument):
    """Write the printed IR after every pass to `directory/NN-passname.txt`, atomically.

    Files are numbered by run (01, 02, ...; `00-input.txt` holds the graph before the first pass
    when `dump_input` is set). Numbers widen past 99 rather than wrap.
    """

    def __init__(self, directory: str | os.PathLike[str], *, dump_input: bool = False) -> None:
        self.directory = Path(directory)
        self.dump_input = dump_input
        self.written: list[Path] = []
        self._count = 0

    def before_pass(self, pass_: Pass, graph: Graph) -> None:
        if self.dump_input and self._count == 0 and not self.written:
            self._write("00-input.txt", graph)

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
        self._count += 1
        self._write(f"{self._count:02d}-{pass_.name}.txt", result.graph)

    def _write(self, filename: str, graph: Graph) -> None:
        target = self.directory / filename
        with atomic_path(target) as tmp:
            tmp.write_text(str(graph), encoding="utf-8")
        self.written.append(target)
        logger.debug("wrote %s", target)


class VerifyInstrument(BasePassInstrument):
    """Verify the graph after every pass; a broken invariant becomes a PassError naming the pass."""

    def after_pass(self, pass_: Pass, graph: Graph, result: PassResult) -> None:
        verify_after(pass_, result.graph)


def verify_after(pass_: Pass, graph: Graph) -> None:
    try:
        graph.verify()
    except VerificationError as err:
        raise PassError(f"pass '{pass_.name}' left an invalid graph: {err}", pass_name=pass_.name) from err
