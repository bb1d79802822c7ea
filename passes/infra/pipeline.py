"""Pipeline strings: `dce,cse,constant-folding{size-limit=1024},shape-infer`.

Grammar (whitespace is allowed between tokens)::

    pipeline := [pass (',' pass)*]
    pass     := NAME ['{' [option (',' option)*] '}']
    option   := KEY '=' VALUE
    VALUE    := raw text up to ',' or '}'  |  '"' text with \\" and \\\\ escapes '"'

Option keys are the kebab-case field names. Values convert by the field's type:
`int` (decimal, or 0x/0o/0b), `float`, `bool` (`true`/`false`), `str`, `tuple[T, ...]` as
colon-separated items (`tile=8:16:32`; the empty tuple is `""`), `X | None` (`none`), `Literal`
and `Enum` (by name). `format_pipeline` prints only options that differ from their defaults, so
`parse_pipeline(format_pipeline(p)) == p`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import types
import typing
from typing import Any, Iterable, Sequence

from passes.infra.base import Pass, PassError
from passes.infra.registry import UnknownPassError, get_pass_class, pass_options, type_name, unknown_pass_message

__all__ = ["PipelineSyntaxError", "parse_pipeline", "format_pipeline", "format_pass"]

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_RAW_VALUE = re.compile(r"[^,{}\"]*")
_SAFE_TEXT = re.compile(r"^[A-Za-z0-9_.+\-/]+$")


class PipelineSyntaxError(PassError):
    """Malformed pipeline text, an unknown pass or option, or a bad option value."""

    def __init__(self, message: str, *, text: str, position: int) -> None:
        self.text = text
        self.position = position
        self.reason = message
        super().__init__(f"{message} at position {position}\n  {text}\n  {' ' * position}^")

    def one_line(self) -> str:
        """The error without the caret diagram (for one-line reports such as the CLI's)."""
        near = self.text[self.position : self.position + 16] or "the end"
        return f"{self.reason} at position {self.position} of pipeline {self.text!r} (at {near!r})"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str, position: int | None = None) -> PipelineSyntaxError:
        return PipelineSyntaxError(message, text=self.text, position=self.pos if position is None else position)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of text"
            raise self.error(f"expected '{char}', found {found}")
        self.pos += 1

    def name(self, what: str) -> tuple[str, int]:
        self.skip_space()
        match = _NAME.match(self.text, self.pos)
        if not match:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of text"
            raise self.error(f"expected {what}, found {found}")
        self.pos = match.end()
        return match.group(), match.start()

    def value(self) -> tuple[str, bool, int]:
        """(text, was_quoted, start position)."""
        self.skip_space()
        start = self.pos
        if self.peek() == '"':
            self.pos += 1
            chars = []
            while True:
                if self.pos >= len(self.text):
                    raise self.error("unterminated quoted value", start)
                char = self.text[self.pos]
                if char == "\\" and self.pos + 1 < len(self.text):
                    chars.append(self.text[self.pos + 1])
                    self.pos += 2
                elif char == '"':
                    self.pos += 1
                    return "".join(chars), True, start
                else:
                    chars.append(char)
                    self.pos += 1
        match = _RAW_VALUE.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        if self.pos < len(self.text) and self.text[self.pos] in '{"':
            raise self.error(f"unexpected {self.text[self.pos]!r} in a value (quote the value)")
        return match.group().strip(), False, start

    def pass_(self) -> Pass:
        name, start = self.name("a pass name")
        try:
            cls = get_pass_class(name)
        except UnknownPassError:
            raise self.error(unknown_pass_message(name), start) from None
        options = {opt.name: opt for opt in pass_options(cls)}
        kwargs: dict[str, Any] = {}
        if self.peek() == "{":
            self.pos += 1
            if self.peek() != "}":
                while True:
                    key, key_pos = self.name("an option name")
                    option = options.get(key)
                    if option is None:
                        known = ", ".join(options) or "none"
                        raise self.error(f"pass '{name}' has no option '{key}' (its options: {known})", key_pos)
                    if option.field_name in kwargs:
                        raise self.error(f"option '{key}' of pass '{name}' is given twice", key_pos)
                    self.expect("=")
                    text, quoted, value_pos = self.value()
                    try:
                        kwargs[option.field_name] = convert_value(text, option.type, quoted=quoted)
                    except ValueError as err:
                        raise self.error(f"bad value for option '{key}' of pass '{name}': {err}", value_pos) from None
                    if self.peek() != ",":
                        break
                    self.pos += 1
            self.expect("}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:
            raise self.error(f"cannot create pass '{name}': {err}", start) from None


def parse_pipeline(text: str) -> list[Pass]:
    """Parse a pipeline string into pass instances (see the module docstring for the grammar)."""
    parser = _Parser(text)
    passes: list[Pass] = []
    if parser.peek() == "":
        return passes
    while True:
        passes.append(parser.pass_())
        char = parser.peek()
        if char == "":
            return passes
        if char != ",":
            raise parser.error(f"expected ',' or end of pipeline, found {char!r}")
        parser.pos += 1


def convert_value(text: str, tp: Any, *, quoted: bool = False) -> Any:
    """Convert one option value by its declared type; ValueError says what was expected."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and not quoted and text.lower() in ("none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return convert_value(text, rest[0], quoted=quoted)
        raise ValueError(f"options of type {type_name(tp)} are not supported")
    if tp is bool:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"expected true or false, got {text!r}")
        return lowered == "true"
    if tp is int:
        try:
            return int(text, 0) if text[:2].lower() in ("0x", "0o", "0b") else int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
    if tp is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
        if math.isnan(value):  # NaN passes every range check a pass makes with `<` (infinities stay: 'no limit')
            raise ValueError(f"expected a number, got {text!r}")
        return value
    if tp is str or tp is Any:
        return text
    if origin is tuple:
        items = [] if text == "" else text.split(":")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert_value(item, args[0]) for item in items)
        if len(items) != len(args):
            raise ValueError(f"expected {len(args)} ':'-separated items, got {len(items)}")
        return tuple(convert_value(item, arg) for item, arg in zip(items, args))
    if origin is typing.Literal:
        for choice in args:
            if str(choice) == text:
                return choice
        raise ValueError(f"expected one of {', '.join(str(a) for a in args)}, got {text!r}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if text in (member.name, member.name.lower(), str(member.value)):
                return member
        raise ValueError(f"expected one of {', '.join(m.name.lower() for m in tp)}, got {text!r}")
    raise ValueError(f"options of type {type_name(tp)} are not supported")


def format_value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, tuple):
        if not value:
            return '""'
        items = [format_value(v) for v in value]
        if any(":" in item or item.startswith('"') for item in items):
            raise PassError(f"tuple option value {value!r} cannot be written in a pipeline (an item needs quoting)")
        return ":".join(items)
    text = str(value)
    if _SAFE_TEXT.match(text) and text.lower() not in ("none", "null"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_pass(pass_: Pass) -> str:
    """One pass as pipeline text, with only its non-default options."""
    parts = []
    for option in pass_options(type(pass_)):
        value = getattr(pass_, option.field_name)
        if option.default is dataclasses.MISSING or value != option.default:
            parts.append(f"{option.name}={format_value(value)}")
    return pass_.name + ("{" + ",".join(parts) + "}" if parts else "")


def format_pipeline(passes: Iterable[Pass] | Sequence[Pass]) -> str:
    """The pipeline string of `passes` (inverse of `parse_pipeline`)."""
    return ",".join(format_pass(p) for p in passes)
