"""Signatures: what a measurement is keyed by, so equal work is timed once and reused.

A node's signature is its op (domain, op_type, overload), its attributes and its input and output
types; names never matter. Tensor attributes and constant inputs count by type only (time does
not depend on weight values). Subgraph bodies (HLO reducers and fusion bodies, ONNX If/Loop
bodies) count by their own signature, and the names in `called_computations` are dropped since
callees already count by body. A group's signature lists its members' signatures with operands
written as positions (external input i, or member j's output k), so two isomorphic groups in
different graphs share one measurement. Keys also carry the backend and a machine fingerprint.
"""

from __future__ import annotations

import hashlib
import os
import platform
from typing import TYPE_CHECKING, Any, Sequence

from graph_ir.attrs import AttrKind

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["node_signature", "group_signature", "signature_key", "machine_fingerprint"]

_NAME_ATTRS = frozenset({"called_computations"})


def _type_text(value: Value | None) -> str:
    if value is None:
        return "none"
    return str(value.type)


def _attr_text(attr: Any) -> str:
    if attr.kind is AttrKind.GRAPH:
        return "graph(" + graph_signature(attr.value) + ")"
    if attr.kind is AttrKind.GRAPHS:
        return "graphs(" + ";".join(graph_signature(g) for g in attr.value) + ")"
    if attr.kind is AttrKind.TENSOR:
        value = attr.value
        return f"tensor({getattr(value, 'dtype', '?')},{getattr(value, 'shape', '?')})"
    value = attr.value
    if hasattr(value, "SerializeToString"):  # protobuf messages (HLO dimension numbers, literals)
        return value.SerializeToString(deterministic=True).hex()
    return repr(value)


def node_signature(node: Node) -> str:
    """Op, attributes and input/output types of one node, without names."""
    attrs = ",".join(f"{name}={_attr_text(attr)}" for name, attr in sorted(node.attrs.items()) if name not in _NAME_ATTRS)
    inputs = ",".join(("const:" if v is not None and v.is_constant else "") + _type_text(v) for v in node.inputs)
    outputs = ",".join(_type_text(v) for v in node.outputs)
    return f"{node.domain}::{node.op_type}:{node.overload}[{attrs}]({inputs})->({outputs})"


def graph_signature(graph: Graph) -> str:
    """Signature of a whole (sub)graph: its inputs' types and its nodes as a group."""
    return group_signature(list(graph), list(graph.inputs))


def group_signature(members: Sequence[Node], inputs: Sequence[Value] | None = None) -> str:
    """Signature of a group (members in topological order); `inputs` fixes the external input order."""
    inside = {node: index for index, node in enumerate(members)}
    external: dict[Value, int] = {} if inputs is None else {v: i for i, v in enumerate(inputs)}
    lines = []
    for node in members:
        refs = []
        for value in node.inputs:
            if value is None:
                refs.append("_")
            elif value.producer in inside:
                refs.append(f"n{inside[value.producer]}.{value.index}")  # type: ignore[index]
            elif value.is_constant:
                refs.append("c")
            else:
                refs.append(f"i{external.setdefault(value, len(external))}")
        lines.append(node_signature(node) + "<" + ",".join(refs) + ">")
    return "\n".join(lines)


def signature_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def machine_fingerprint() -> str:
    """CPU model, visible cores and library versions: a measurement is only valid where it was made."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = []
    for module in ("jaxlib", "onnxruntime"):
        try:
            versions.append(f"{module}={__import__(module).__version__}")
        except ImportError:
            continue
    return f"{model}|{cores} cores|" + ",".join(versions)
