"""Reading model files: the checks every text importer makes before parsing."""

from __future__ import annotations

import os

from graph_ir.errors import EmptyModelError

__all__ = ["read_nonempty"]


def read_nonempty(path: str | os.PathLike[str], *, text: bool = True) -> bytes:
    """The file's bytes; EmptyModelError naming the file when it holds nothing but whitespace.

    The size is checked against `graph_ir.io.limits` before reading, and a text file's bracket
    nesting before any parser sees it."""
    from graph_ir.io import limits

    file = os.fspath(path)
    limits.check_file_size(file, text=text)
    with open(path, "rb") as handle:
        raw = handle.read()
    if not raw.strip():
        raise EmptyModelError("file is empty", file=file)
    if text:
        limits.check_nesting(raw, file=file)
    return raw
