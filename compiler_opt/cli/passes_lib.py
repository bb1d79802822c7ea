"""`compiler-opt passes`: the registered passes (plugins included) and their options."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from compiler_opt.cli._render import Table

__all__ = ["describe_passes", "passes_tables"]


def _summary(text: str | None) -> str:
    """The docstring's first paragraph on one line."""
    paragraph = inspect.cleandoc(text or "").split("\n\n")[0]
    return " ".join(paragraph.split())


def _jsonable(value: Any) -> Any:
    if value is dataclasses.MISSING:
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return str(value)


def describe_passes() -> list[dict[str, Any]]:
    """One entry per registered pass: name, class, summary and options (name/type/default/doc)."""
    import passes
    from passes.infra.registry import pass_options

    described = []
    for name, cls in passes.available_passes().items():
        # Dataclasses generate a signature-like __doc__ when a class has none; treat that as empty.
        doc = cls.__doc__ if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}(") else ""
        options = [
            {
                "name": opt.name,
                "type": opt.type_name,
                "default": _jsonable(opt.default),
                "required": opt.default is dataclasses.MISSING,
                "doc": opt.doc,
            }
            for opt in pass_options(cls)
        ]
        described.append(
            {
                "name": name,
                "class": f"{cls.__module__}.{cls.__qualname__}",
                "summary": _summary(doc),
                "options": options,
            }
        )
    return described


def passes_tables(described: list[dict[str, Any]]) -> list[Table]:
    overview = Table("Passes", ["name", "summary"])
    options = Table("Options", ["pass", "option", "type", "default", "doc"])
    for entry in described:
        overview.rows.append([entry["name"], entry["summary"]])
        for opt in entry["options"]:
            default = "(required)" if opt["required"] else repr(opt["default"])
            options.rows.append([entry["name"], opt["name"], opt["type"], default, opt["doc"]])
    return [overview, options] if options.rows else [overview]
