"""The device target an integration optimizes for, and the pipeline it runs by default.

Passes take a `devices=` option today (a topology preset, an `NxGPU` short form or a file). The
integrations accept a `target` string and hand it to the passes as `devices=`: "host" and "cpu"
mean the process's CPU (the `cpu` device preset: one device), anything else goes through
unchanged (e.g. "4xV100"). When the `Target` of issue 8 lands, this module is the one place to
change.
"""

from __future__ import annotations

import logging
import re

from passes.infra.base import Pass, PassError
from passes.infra.pipeline import parse_pipeline

__all__ = ["DEFAULT_TARGET", "default_pipeline", "resolve_target", "build_pipeline"]

logger = logging.getLogger(__name__)

DEFAULT_TARGET = "host"
_HOST_ALIASES = {"host": "cpu", "1xcpu": "cpu", "cpu": "cpu"}


def resolve_target(target: str | None) -> str:
    """The `devices=` spec for `target` ("host"/"cpu"/"1xCPU" -> the `cpu` preset), validated
    by loading it once (a bad spec fails here, with the loader's message)."""
    from passes.placement.context import resolve_topology

    spec = _HOST_ALIASES.get((target or DEFAULT_TARGET).strip().lower(), (target or "").strip())
    resolve_topology(spec)  # raises DeviceSpecError naming the spec
    return spec


def default_pipeline(devices: str, *, fuse: bool = True, schedule: str = "critical-path") -> str:
    """Placement over the target's devices, then fusion, then scheduling priorities (nodes
    reordered into the schedule)."""
    steps = [f"m-etf{{devices={devices}}}"]
    if fuse:
        steps.append("fuse")
    if schedule:
        steps.append(f"schedule{{strategy={schedule},devices={devices},reorder=true}}")
    return ",".join(steps)


def build_pipeline(pipeline: str | None, devices: str) -> list[Pass]:
    """Pass instances for `pipeline` (None: `default_pipeline(devices)`); a pass with a `devices`
    option that its step in the pipeline string left unset gets the target's devices."""
    import dataclasses

    text = pipeline if pipeline is not None else default_pipeline(devices)
    passes = parse_pipeline(text)
    steps = _top_level_steps(text)
    if len(steps) != len(passes):  # the parser accepted a form we do not split; set nothing
        steps = ["devices="] * len(passes)
    out: list[Pass] = []
    for pass_, step in zip(passes, steps):
        has_devices = any(f.name == "devices" for f in dataclasses.fields(pass_))
        if has_devices and not re.search(r"[{,]\s*devices\s*=", step):
            pass_ = dataclasses.replace(pass_, devices=devices)
        out.append(pass_)
    if not out:
        raise PassError(f"the pipeline {text!r} names no pass")
    return out


def _top_level_steps(text: str) -> list[str]:
    """Split a pipeline string on the commas outside braces."""
    steps, depth, current = [], 0, []
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "," and depth == 0:
            steps.append("".join(current))
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        steps.append("".join(current))
    return [s for s in steps if s.strip()]
