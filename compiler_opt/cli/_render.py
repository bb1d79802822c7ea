"""Tables for the CLI: rich when stdout is a terminal, aligned plain text otherwise.

Plain text keeps pipes, logs and tests free of box-drawing characters and ANSI codes, and
avoids importing rich (about 50 ms) when nobody sees the colours.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["Table", "render_tables", "human_count", "human_bytes"]


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    # Columns to right-align (numbers).
    numeric: frozenset[int] = frozenset()


def human_count(value: int) -> str:
    """1234567 -> '1.23 M' (and the exact integer stays available in --json)."""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return str(value)


def human_bytes(value: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def render_tables(tables: list[Table], stream: TextIO | None = None) -> None:
    stream = stream if stream is not None else sys.stdout
    if stream.isatty():
        _render_rich(tables, stream)
    else:
        stream.write(_render_plain(tables))


def _render_plain(tables: list[Table]) -> str:
    chunks = []
    for table in tables:
        widths = [len(h) for h in table.headers]
        for row in table.rows:
            for index, cell in enumerate(row):
                widths[index] = max(widths[index], len(cell))

        def line(cells: list[str]) -> str:
            parts = [
                cell.rjust(widths[i]) if i in table.numeric else cell.ljust(widths[i]) for i, cell in enumerate(cells)
            ]
            return "  ".join(parts).rstrip()

        chunks.append(table.title)
        chunks.append(line(table.headers))
        chunks.append("  ".join("-" * w for w in widths))
        chunks.extend(line(row) for row in table.rows)
        chunks.append("")
    return "\n".join(chunks)


def _render_rich(tables: list[Table], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=stream)
    for table in tables:
        rich_table = RichTable(title=table.title, title_justify="left")
        for index, header in enumerate(table.headers):
            rich_table.add_column(header, justify="right" if index in table.numeric else "left")
        for row in table.rows:
            rich_table.add_row(*row)
        console.print(rich_table)
