"""Importers and exporters, chosen by file extension.

Each format registers a `FormatHandler` in `graph_ir.io.formats`; `load` and `save` dispatch on
the longest matching extension (so `.hlo.txt` wins over `.txt`).
"""

from __future__ import annotations

from graph_ir.io.formats import FormatHandler, check_readable, detect_format, load, load_with_format, register_format, save

__all__ = ["FormatHandler", "check_readable", "detect_format", "load", "load_with_format", "register_format", "save"]
