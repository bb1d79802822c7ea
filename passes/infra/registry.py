"""Find passes by name: built-in ones register with `@register_pass`; third-party ones come in
through the entry-point group `compiler_opt.passes`.

An entry point may name a `Pass` subclass (registered for it) or a module (imported; it registers
its passes itself). Plugins load lazily, once, the first time a name is looked up or the list is
asked for; a broken plugin is logged and skipped so it cannot take the compiler down.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.metadata
import inspect
import logging
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from passes.infra.base import Pass, PassError

__all__ = [
    "ENTRY_POINT_GROUP",
    "PassOption",
    "PassRegistrationError",
    "UnknownPassError",
    "available_passes",
    "get_pass_class",
    "load_plugins",
    "pass_options",
    "register_pass",
    "unregister_pass",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "compiler_opt.passes"
_KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")

_registry: dict[str, type[Pass]] = {}
_plugins_loaded = False

P = TypeVar("P", bound=type[Pass])


class PassRegistrationError(PassError):
    """A pass class cannot be registered (bad name, duplicate, not a frozen dataclass)."""


class UnknownPassError(PassError, KeyError):
    """No pass is registered under the requested name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return PassError.__str__(self)


def register_pass(cls: P) -> P:
    """Class decorator: register `cls` under `cls.name`."""
    if not (inspect.isclass(cls) and issubclass(cls, Pass)):
        raise PassRegistrationError(f"{cls!r} is not a Pass subclass")
    name = cls.__dict__.get("name", "")
    if not isinstance(name, str) or not _KEBAB.match(name):
        raise PassRegistrationError(
            f"pass class {cls.__qualname__} needs a kebab-case `name` (like 'constant-folding'), got {name!r}"
        )
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen:
        raise PassRegistrationError(f"pass class {cls.__qualname__} must be decorated with @dataclass(frozen=True)")
    existing = _registry.get(name)
    if existing is not None and existing is not cls:
        raise PassRegistrationError(
            f"pass name {name!r} is already registered by {existing.__module__}.{existing.__qualname__}"
        )
    _registry[name] = cls
    return cls


def unregister_pass(name: str) -> None:
    """Remove a registration (for plugins replacing a pass, and for tests)."""
    _registry.pop(name, None)


def get_pass_class(name: str) -> type[Pass]:
    """The pass class registered under `name`; UnknownPassError lists the known names."""
    cls = _registry.get(name)
    if cls is None:
        load_plugins()
        cls = _registry.get(name)
    if cls is None:
        raise UnknownPassError(unknown_pass_message(name))
    return cls


def unknown_pass_message(name: str) -> str:
    known = sorted(available_passes())
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown pass '{name}'{hint} (known passes: {', '.join(known) or 'none'})"


def available_passes() -> dict[str, type[Pass]]:
    """Every registered pass by name, plugins included, sorted by name."""
    load_plugins()
    return dict(sorted(_registry.items()))


def load_plugins(*, reload: bool = False) -> None:
    """Load the `compiler_opt.passes` entry points (once, unless `reload`)."""
    global _plugins_loaded
    if _plugins_loaded and not reload:
        return
    _plugins_loaded = True
    try:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as err:  # a broken installed distribution's metadata
        logger.warning("could not list pass plugins (entry-point group %s): %s", ENTRY_POINT_GROUP, err)
        return
    for entry_point in entry_points:
        try:
            loaded = entry_point.load()
            if inspect.isclass(loaded) and issubclass(loaded, Pass):
                register_pass(loaded)
            elif not isinstance(loaded, types.ModuleType):
                raise TypeError(f"it loaded a {type(loaded).__name__}, not a Pass subclass or a module")
        except Exception as err:
            logger.warning("skipping pass plugin %r (%s): %s", entry_point.name, entry_point.value, err)


@dataclass(frozen=True)
class PassOption:
    """One option of a pass, as a pipeline string spells it."""

    name: str  # kebab-case, as written in a pipeline
    field_name: str
    type: Any
    default: Any
    doc: str

    @property
    def type_name(self) -> str:
        return type_name(self.type)


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type[Pass]) -> dict[str, Any]:
    # Resolving string annotations costs ~3 ms a class, paid by every pipeline parse otherwise.
    return typing.get_type_hints(cls)


def pass_options(cls: type[Pass]) -> list[PassOption]:
    """The options of a pass class in declaration order."""
    hints = _type_hints(cls)
    options = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = dataclasses.MISSING
        options.append(
            PassOption(
                name=field.name.replace("_", "-"),
                field_name=field.name,
                type=hints.get(field.name, Any),
                default=default,
                doc=field.metadata.get("doc", ""),
            )
        )
    return options


def type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")
