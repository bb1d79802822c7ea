"""Device and link specifications, and the unit-aware numbers that presets are written in.

A `DeviceSpec` is one compute device (a CPU host, a GPU, a chip of a multi-chip module) with its
peak FLOP/s per dtype family, memory bandwidth and capacity, and kernel launch overhead. A `Link`
is one *direction* of a physical connection: it has its own copy engine, so the simulator can run
one transfer at a time on each direction of each link.

Preset files write quantities with units ("900 GB/s", "32 GiB", "5 us", "15.7 TFLOPS"), because
plain YAML 1.1 reads `15.7e12` as a string; `parse_quantity` turns them into SI base units.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from graph_ir.errors import CompilerOptError

__all__ = [
    "DeviceSpecError",
    "DeviceSpec",
    "Link",
    "LinkSpec",
    "DEVICE_KINDS",
    "DTYPE_FAMILIES",
    "parse_quantity",
]

DEVICE_KINDS = ("cpu", "gpu", "chip")
# fp16 covers bf16 and the 8-bit floats; fp64 is optional and falls back to fp32.
DTYPE_FAMILIES = ("fp32", "fp16", "int8", "fp64")


class DeviceSpecError(CompilerOptError):
    """A device or topology description is unknown, malformed or inconsistent."""


# -- units ----------------------------------------------------------------------------------------
_PREFIXES = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
# Divisors, not factors: 10 / 1e6 is exactly the double nearest 1e-5, 10 * 1e-6 is not.
_TIME_DIVISORS = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}
_BASE_UNITS = {
    "bytes": ("B",),
    "bandwidth": ("B/s", "Bps"),
    "flops": ("FLOPS", "FLOP/s", "OPS", "OP/s"),
}
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$")


def parse_quantity(value: Any, kind: str, *, file: str | None = None, field: str | None = None) -> float:
    """A number in SI base units from a bare number or a string with a unit.

    `kind` is one of "bytes" (B, KB, GB, GiB...), "bandwidth" (B/s, GB/s, GiB/s...), "time" (s, ms,
    us, ns) or "flops" (FLOPS, TFLOPS, TOPS...). Bare numbers are taken as base units already.
    """
    if isinstance(value, bool):
        raise DeviceSpecError(f"expected a {kind} quantity, got {value!r}", file=file, field=field)
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if match is None:
            raise DeviceSpecError(f"cannot read {value!r} as a {kind} quantity", file=file, field=field)
        number = float(match.group(1))
        unit = match.group(2)
        if unit:
            if kind == "time" and unit in _TIME_DIVISORS:
                number /= _TIME_DIVISORS[unit]
            else:
                scale = _unit_scale(unit, kind)
                if scale is None:
                    raise DeviceSpecError(f"unit {unit!r} in {value!r} is not a {kind} unit", file=file, field=field)
                number *= scale
    else:
        raise DeviceSpecError(f"expected a {kind} quantity, got {type(value).__name__} {value!r}", file=file, field=field)
    if not math.isfinite(number):
        raise DeviceSpecError(f"{kind} quantity {value!r} is not finite", file=file, field=field)
    return number


def _unit_scale(unit: str, kind: str) -> float | None:
    for base in _BASE_UNITS.get(kind, ()):
        if unit.endswith(base):
            prefix = unit[: -len(base)]
            if prefix in _PREFIXES:
                return _PREFIXES[prefix]
    return None


# -- specs ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkSpec:
    """Bandwidth and latency of one kind of connection (used to build boxes of N GPUs)."""

    bandwidth: float  # bytes/s, per direction
    latency_s: float
    kind: str = ""  # "pcie", "nvlink", "d2d", ... (documentation only)


@dataclass(frozen=True)
class DeviceSpec:
    """One device. `name` is the instance name in a topology ("gpu0"); `model` the preset ("V100")."""

    name: str
    kind: str
    peak_flops: Mapping[str, float]
    mem_bandwidth: float  # bytes/s
    memory_bytes: float
    launch_overhead_s: float
    model: str = ""
    # How this device attaches in an N-GPU box: to the host, and to its peers (NVLink when present).
    host_link: LinkSpec | None = field(default=None, compare=False)
    peer_link: LinkSpec | None = field(default=None, compare=False)
    # "pcie" or "nvlink": what `NxGPU` uses when not told (default: nvlink when peer_link exists).
    box_interconnect: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        where = self.name or self.model or "device"
        if self.kind not in DEVICE_KINDS:
            raise DeviceSpecError(f"kind must be one of {DEVICE_KINDS}, got {self.kind!r}", node=where, field="kind")
        peaks = dict(self.peak_flops)
        if "fp32" not in peaks:
            raise DeviceSpecError("peak_flops needs at least an 'fp32' entry", node=where, field="peak_flops")
        for family, peak in peaks.items():
            if family not in DTYPE_FAMILIES:
                raise DeviceSpecError(
                    f"unknown dtype family {family!r} (expected one of {DTYPE_FAMILIES})", node=where, field="peak_flops"
                )
            if not peak > 0:
                raise DeviceSpecError(f"peak_flops[{family}] must be positive, got {peak}", node=where, field="peak_flops")
        object.__setattr__(self, "peak_flops", MappingProxyType(peaks))
        for name in ("mem_bandwidth", "memory_bytes"):
            if not getattr(self, name) > 0:
                raise DeviceSpecError(f"{name} must be positive, got {getattr(self, name)}", node=where, field=name)
        if not self.launch_overhead_s >= 0:
            raise DeviceSpecError(
                f"launch_overhead_s must be non-negative, got {self.launch_overhead_s}", node=where, field="launch_overhead_s"
            )

    def peak(self, family: str) -> float:
        """Peak FLOP/s for a dtype family; families the preset does not list run at the fp32 rate."""
        peak = self.peak_flops.get(family)
        return self.peak_flops["fp32"] if peak is None else peak

    def type_key(self) -> tuple:
        """Identity of the hardware, ignoring the instance name: equal keys share one cost column."""
        peaks = tuple(self.peak(f) for f in DTYPE_FAMILIES)
        return (self.kind, peaks, self.mem_bandwidth, self.memory_bytes, self.launch_overhead_s)

    def renamed(self, name: str) -> DeviceSpec:
        return replace(self, name=name)


@dataclass(frozen=True)
class Link:
    """One direction of a connection, with its own copy engine."""

    src: str
    dst: str
    bandwidth: float  # bytes/s
    latency_s: float
    kind: str = ""

    def __post_init__(self) -> None:
        where = f"{self.src}->{self.dst}"
        if self.src == self.dst:
            raise DeviceSpecError("a link must join two different devices", node=where, field="link")
        if not self.bandwidth > 0:
            raise DeviceSpecError(f"bandwidth must be positive, got {self.bandwidth}", node=where, field="bandwidth")
        if not self.latency_s >= 0:
            raise DeviceSpecError(f"latency must be non-negative, got {self.latency_s}", node=where, field="latency")

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"

    def transfer_time(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth
