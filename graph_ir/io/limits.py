"""Resource limits for reading untrusted model files, with clear errors and an override.

Every importer checks, before it hands bytes to a native parser or builds the graph:

| limit                      | default  | what                                                    |
|----------------------------|----------|---------------------------------------------------------|
| `max_file_bytes`           | 8 GiB    | size of a binary model file (.onnx, .pb, .mlirbc)       |
| `max_text_bytes`           | 512 MiB  | size of a text model file (.pbtxt, .hlo, .mlir, .json)  |
| `max_nesting_depth`        | 256      | bracket nesting of a text file (native parsers recurse) |
| `max_nodes`                | 10 M     | nodes of a graph, counted in the file and after import  |
| `max_tensor_elements`      | 2**40    | elements of one constant tensor or declared value       |
| `max_external_data_bytes`  | 64 GiB   | bytes of ONNX external data one tensor may name         |
| `max_node_arity`           | 100 000  | inputs or outputs of one node that a count attr declares|
| `max_sharding_devices`     | 2**20    | devices one HLO sharding's tile assignment names        |

Override for one process with the environment, e.g.
`COMPILER_OPT_LIMITS="max_nodes=50000000,max_text_bytes=2e9"`, or in code with
`with limits.override(max_nodes=50_000_000): load(path)`. Over a limit: `LimitExceededError`
(a `ModelFormatError`) whose `field` names the limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from dataclasses import dataclass, fields, replace
from typing import Iterator

from graph_ir.errors import CompilerOptError, LimitExceededError

__all__ = ["Limits", "current", "override", "check", "check_nesting", "check_graph_size", "ENV_VAR"]

ENV_VAR = "COMPILER_OPT_LIMITS"


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 8 * 2**30
    max_text_bytes: int = 512 * 2**20
    max_nesting_depth: int = 256
    max_nodes: int = 10_000_000
    max_tensor_elements: int = 2**40
    max_external_data_bytes: int = 64 * 2**30
    max_node_arity: int = 100_000
    max_sharding_devices: int = 1 << 20
    # A dimension index in MLIR dim_numbers: MLIR's parser sizes a vector by it (2**31 -> 6 GB).
    max_dimension_index: int = 4096


_OVERRIDE: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("graph_ir_io_limits", default=None)
_NAMES = {f.name for f in fields(Limits)}


def _from_env() -> Limits:
    text = os.environ.get(ENV_VAR, "").strip()
    if not text:
        return Limits()
    values = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, raw = item.partition("=")
        name = name.strip()
        if name not in _NAMES:
            raise CompilerOptError(f"{ENV_VAR}: unknown limit {name!r} (known: {', '.join(sorted(_NAMES))})", field=name)
        try:
            values[name] = int(float(raw))
        except ValueError:
            raise CompilerOptError(f"{ENV_VAR}: {name}={raw!r} is not a number", field=name) from None
    return replace(Limits(), **values)


def current() -> Limits:
    """The limits in force: an `override` block's, else the environment's, else the defaults."""
    return _OVERRIDE.get() or _from_env()


@contextlib.contextmanager
def override(**values: int) -> Iterator[Limits]:
    """Raise (or lower) limits for the block: `with override(max_nodes=10**8): ...`."""
    unknown = set(values) - _NAMES
    if unknown:
        raise TypeError(f"unknown limits: {', '.join(sorted(unknown))}")
    limits = replace(current(), **values)
    token = _OVERRIDE.set(limits)
    try:
        yield limits
    finally:
        _OVERRIDE.reset(token)


def check(name: str, amount: int, what: str, *, file: str | None = None, node: str | None = None) -> None:
    """LimitExceededError when `amount` is over the limit `name`."""
    limit = getattr(current(), name)
    if amount > limit:
        raise LimitExceededError(
            f"{what} is {amount}, over the limit of {limit} (raise it with {ENV_VAR}={name}=N or "
            f"graph_ir.io.limits.override({name}=N) if the file is trusted)",
            file=file, node=node, field=name,
        )


def check_file_size(path: str, *, text: bool) -> int:
    size = os.stat(path).st_size
    check("max_text_bytes" if text else "max_file_bytes", size, "the file's size in bytes", file=path)
    return size


_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_CHUNK = 1 << 24


def check_nesting(data: bytes | str, *, file: str | None = None, angle: bool = False) -> None:
    """Bracket nesting ((, [, { and with `angle` <) of a text, string literals and `->` left out:
    native parsers (MLIR, XLA, protobuf text, json) recurse per level and can overflow the C
    stack. `<` counts only for MLIR, whose types nest with it (HLO writes `<=[8]` unbalanced)."""
    import numpy as np

    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    limit = current().max_nesting_depth
    # Cheap exit: a text with fewer opening brackets than the limit cannot nest deeper.
    openers = (b"(", b"[", b"{", b"<") if angle else (b"(", b"[", b"{")
    if sum(raw.count(c) for c in openers) <= limit:
        return
    raw = _STRING.sub(b'""', raw).replace(b"->", b"  ")
    table = np.zeros(256, dtype=np.int8)
    table[[ord(c) for c in "([{"]] = 1
    table[[ord(c) for c in ")]}"]] = -1
    if angle:
        table[ord("<")], table[ord(">")] = 1, -1
    depth = 0
    for start in range(0, len(raw), _CHUNK):
        steps = table[np.frombuffer(raw, dtype=np.uint8, count=min(_CHUNK, len(raw) - start), offset=start)]
        running = np.cumsum(steps, dtype=np.int64) + depth
        if running.size:
            deepest = int(running.max())
            if deepest > limit:
                line = raw.count(b"\n", 0, start + int(np.argmax(running > limit))) + 1
                raise LimitExceededError(
                    f"line {line}: brackets nest deeper than {limit} levels (raise it with "
                    f"{ENV_VAR}=max_nesting_depth=N if the file is trusted)",
                    file=file, field="max_nesting_depth",
                )
            depth = max(0, int(running[-1]))


def check_graph_size(graph: object, *, file: str | None = None) -> None:
    """Nodes of an imported graph (subgraphs and functions included) against `max_nodes`."""
    count = sum(1 for _ in graph.all_nodes())  # type: ignore[attr-defined]
    for function in getattr(graph, "functions", {}).values():
        count += sum(1 for _ in function.graph.all_nodes())
    check("max_nodes", count, "the graph's node count", file=file)
