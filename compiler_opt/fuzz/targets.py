"""The fuzzed formats and what one input ends in."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Format", "FORMATS", "Outcome", "run_one"]


@dataclass(frozen=True)
class Format:
    name: str
    suffix: str


FORMATS: tuple[Format, ...] = (
    Format("onnx", ".onnx"),
    Format("tf_binary", ".pb"),
    Format("tf_text", ".pbtxt"),
    Format("hlo", ".hlo"),
    Format("stablehlo", ".mlir"),
    Format("placement_json", ".json"),
)
_BY_NAME = {f.name: f for f in FORMATS}
_OUR_CODE = ("graph_ir" + os.sep, "cost_model" + os.sep, "compiler_opt" + os.sep)


@dataclass(frozen=True)
class Outcome:
    kind: str  # "accepted", "refused" or "bug"
    detail: str  # the refusal's error class, or the bug's signature
    report: str = ""  # a bug's traceback, a refusal's message


def _load(fmt: Format, path: str) -> object:
    if fmt.name == "placement_json":
        from cost_model.profiled import load_profiled_workload

        return load_profiled_workload(path)
    from graph_ir.io.formats import load

    return load(path)


def _signature(err: BaseException) -> str:
    """Error class and the innermost frame in this project: one bug, however many inputs hit it."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if any(part in f.filename for part in _OUR_CODE) and os.sep + "fuzz" + os.sep not in f.filename]
    frame = (ours or frames or [None])[-1]
    where = f"{Path(frame.filename).name}:{frame.lineno}" if frame is not None else "?"
    return f"{type(err).__name__} at {where}"


def run_one(fmt: Format | str, data: bytes, workdir: str | os.PathLike[str]) -> Outcome:
    """Write `data` as a file of `fmt` in `workdir` and import it."""
    from graph_ir.errors import CompilerOptError
    from graph_ir.graph import Graph

    fmt = _BY_NAME[fmt] if isinstance(fmt, str) else fmt
    path = os.path.join(os.fspath(workdir), "input" + fmt.suffix)
    with open(path, "wb") as handle:
        handle.write(data)
    try:
        result = _load(fmt, path)
    except CompilerOptError as err:
        return Outcome("refused", type(err).__name__, str(err)[:500])
    except (Exception, RecursionError, MemoryError) as err:  # noqa: BLE001 - every other exception is a bug
        return Outcome("bug", _signature(err), "".join(traceback.format_exception(err))[-4000:])
    if isinstance(result, Graph):
        try:
            result.verify()  # an importer must not hand out a broken graph
        except Exception as err:  # noqa: BLE001
            return Outcome("bug", "accepted graph fails verify: " + _signature(err), "".join(traceback.format_exception(err))[-4000:])
    return Outcome("accepted", "")
