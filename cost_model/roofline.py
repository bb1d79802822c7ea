"""Roofline time of a node, or of a fused group of nodes, on one device.

    time = max(flops / peak[dtype family], bytes / memory bandwidth) + launch overhead

FLOPs and bytes come from `cost_model.flops` (`node_flops`, `node_bytes`). A fused group is one
kernel: one launch, its FLOPs are the sum of its nodes' (each at its own dtype family's peak), and
its bytes are only those crossing the group boundary: each distinct input produced outside the
group read once, and each output used outside the group (or a graph output, or unused) written
once. Intermediates stay on chip. Peak rates are never reached in practice; this is an optimistic
time, which is what a lower bound and a ranking need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from cost_model.flops import node_bytes, node_flops
from graph_ir.dtypes import DType

if TYPE_CHECKING:
    from cost_model.devices.spec import DeviceSpec
    from graph_ir.core import Node

__all__ = [
    "dtype_family",
    "node_dtype_family",
    "roofline_time",
    "node_time",
    "group_boundary_bytes",
    "group_time",
]

_FP16_LIKE = frozenset(
    {
        DType.FLOAT16,
        DType.BFLOAT16,
        DType.FLOAT8E4M3FN,
        DType.FLOAT8E4M3FNUZ,
        DType.FLOAT8E5M2,
        DType.FLOAT8E5M2FNUZ,
        DType.FLOAT8E4M3,
        DType.FLOAT8E3M4,
        DType.FLOAT8E4M3B11FNUZ,
        DType.FLOAT8E8M0,
        DType.FLOAT6E2M3,
        DType.FLOAT6E3M2,
        DType.FLOAT4E2M1,
    }
)


def dtype_family(dtype: DType | None) -> str:
    """The peak-rate family of an element type: "fp16" (16-bit and narrower floats), "int8"
    (integers of 8 bits or fewer), "fp64" (f64, c128), else "fp32" (f32, wider ints, unknown)."""
    family = _FAMILY_OF.get(dtype)
    return family if family is not None else _dtype_family(dtype)


def _dtype_family(dtype: DType | None) -> str:
    if dtype is None:
        return "fp32"
    if dtype in _FP16_LIKE:
        return "fp16"
    if dtype in (DType.FLOAT64, DType.COMPLEX128):
        return "fp64"
    if dtype.is_integer and 0 < dtype.bitwidth <= 8:
        return "int8"
    return "fp32"


_FAMILY_OF: dict[DType | None, str] = {d: _dtype_family(d) for d in DType}


def node_dtype_family(node: Node) -> str:
    """Family of the node's arithmetic: its first tensor input's dtype (a quantised matmul reads
    int8 and writes int32), else its first output's."""
    for value in node.inputs:
        if value is not None and value.dtype is not None:
            return dtype_family(value.dtype)
    for value in node.outputs:
        if value.dtype is not None:
            return dtype_family(value.dtype)
    return "fp32"


def roofline_time(flops: float, nbytes: float, device: DeviceSpec, family: str = "fp32") -> float:
    """max(flops / peak, bytes / bandwidth) + launch overhead, in seconds."""
    return max(flops / device.peak(family), nbytes / device.mem_bandwidth) + device.launch_overhead_s


def node_time(node: Node, device: DeviceSpec) -> float:
    """Roofline time of one node run as its own kernel."""
    return roofline_time(node_flops(node), node_bytes(node), device, node_dtype_family(node))


def group_boundary_bytes(nodes: Iterable[Node]) -> int:
    """Bytes a fused group moves to and from memory: distinct inputs from outside, read once, plus
    outputs that leave the group (used outside, graph outputs, or unused), written once.

    A single node gives exactly `node_bytes(node)`.
    """
    members = list(dict.fromkeys(nodes))
    if len(members) == 1:
        return node_bytes(members[0])
    inside = set(members)
    total = 0
    seen: set[int] = set()
    for node in members:
        for value in node.inputs:
            if value is None or id(value) in seen or value.producer in inside:
                continue
            seen.add(id(value))
            total += value.nbytes() or 0
        for value in node.outputs:
            uses = value.uses
            leaves = not uses or value.is_graph_output() or any(use.node not in inside for use in uses)
            if leaves:
                total += value.nbytes() or 0
    return total


def group_time(nodes: Iterable[Node], device: DeviceSpec) -> float:
    """Roofline time of a fused group run as one kernel on `device`."""
    members = list(dict.fromkeys(nodes))
    if not members:
        return 0.0
    compute = sum(node_flops(n) / device.peak(node_dtype_family(n)) for n in members)
    memory = group_boundary_bytes(members) / device.mem_bandwidth
    return max(compute, memory) + device.launch_overhead_s
