"""Reports of an `optimize()` run: one self-contained HTML file (html.py)."""

from __future__ import annotations

from compiler_opt.report.html import render_report, write_report

__all__ = ["render_report", "write_report"]
