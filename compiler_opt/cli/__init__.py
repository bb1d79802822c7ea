"""The `compiler-opt` command line: a thin `main` over one library module per subcommand."""

from __future__ import annotations

__all__: list[str] = []
