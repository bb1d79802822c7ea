"""Reading model files: the checks every text importer makes before parsing."""

from __future__ import annotations

import os

from graph_ir.errors import EmptyModelError

__all__ = ["read_nonempty"]


def read_nonempty(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; EmptyModelError naming the file when it holds nothing but whitespace."""
    with open(path, "rb") as handle:
        raw = handle.read()
    if not raw.strip():
        raise EmptyModelError("file is empty", file=os.fspath(path))
    return raw
