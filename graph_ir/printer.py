"""A readable text form of graphs, and structural equality built on its canonical variant.

    graph main(%x: f32[2,3]) {
      %w: f32[3] = const [1.0, 2.0, 3.0]
      %y = Add(%x, %w)  # add_0  {device=gpu:0}
      return %y
    }

In canonical form values are numbered in definition order and node names are left out, so two
graphs that differ only in names print the same (the Before/Expected tests of passes use this).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.attrs import Attr, AttrKind

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["format_graph", "structural_equal", "assert_structurally_equal"]

_SMALL_TENSOR = 16


class _Namer:
    def __init__(self, canonical: bool) -> None:
        self.canonical = canonical
        self.names: dict[int, str] = {}

    def define(self, value: Value) -> str:
        if self.canonical:
            self.names[id(value)] = str(len(self.names))
        else:
            self.names[id(value)] = value.name
        return "%" + self.names[id(value)]

    def use(self, value: Value | None) -> str:
        if value is None:
            return "_"
        return "%" + self.names.get(id(value), f"<outer {value.name}>" if not self.canonical else "<outer>")


def format_graph(graph: Graph, *, canonical: bool = False) -> str:
    namer = _Namer(canonical)
    lines: list[str] = []
    _format(graph, namer, lines, indent="")
    if graph.parent is None:
        for function in graph.functions.values():
            fnamer = _Namer(canonical)
            qual = f"{function.domain}::{function.name}" if function.domain else function.name
            params = f" <{', '.join(function.attributes)}>" if function.attributes else ""
            lines.append(f"function {qual}{params}")
            _format(function.graph, fnamer, lines, indent="")
    return "\n".join(lines) + "\n"


def _format(graph: Graph, namer: _Namer, lines: list[str], indent: str) -> None:
    for value in graph._initializers.values():
        namer.define(value)
    params = []
    for value in graph._inputs:
        name = namer.use(value) if id(value) in namer.names else namer.define(value)
        params.append(f"{name}: {value.type}")
    name = "" if namer.canonical else f" {graph.name}"
    lines.append(f"{indent}graph{name}({', '.join(params)}) {{")
    inner = indent + "  "
    for value in graph._initializers.values():
        lines.append(f"{inner}{namer.use(value)}: {value.type} = const {_tensor_text(value)}")
    for node in graph._nodes:
        _format_node(node, namer, lines, inner)
    lines.append(f"{inner}return {', '.join(namer.use(v) for v in graph._outputs)}")
    lines.append(f"{indent}}}")


def _format_node(node: Node, namer: _Namer, lines: list[str], indent: str) -> None:
    args = ", ".join(namer.use(v) for v in node.inputs)
    outs = ", ".join(f"{namer.define(v)}" for v in node.outputs)
    types = ", ".join(str(v.type) for v in node.outputs)
    qual = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
    plain = [a for a in node.attrs.values() if a.kind not in (AttrKind.GRAPH, AttrKind.GRAPHS)]
    attr_text = " {" + ", ".join(_attr_text(a) for a in sorted(plain, key=lambda a: a.name)) + "}" if plain else ""
    decisions = _decision_text(node)
    lhs = f"{outs} = " if outs else ""
    comment = "" if namer.canonical else f"  # {node.name}"
    lines.append(f"{indent}{lhs}{qual}({args}){attr_text} : ({types}){decisions}{comment}")
    for attr in node.attrs.values():
        for graph in attr.graphs():
            lines.append(f"{indent}  {attr.name} =")
            _format(graph, namer, lines, indent + "    ")


def _decision_text(node: Node) -> str:
    parts = []
    if node.device is not None:
        parts.append(f"device={node.device}")
    if node.fusion_group is not None:
        parts.append(f"group={node.fusion_group}")
    if node.priority is not None:
        parts.append(f"priority={node.priority:g}")
    if node.tile is not None:
        parts.append(f"tile={list(node.tile)}")
    return "  @{" + ", ".join(parts) + "}" if parts else ""


def _attr_text(attr: Attr) -> str:
    if attr.kind is AttrKind.TENSOR:
        return f"{attr.name}={_tensor_summary(attr.value)}"
    if attr.kind is AttrKind.TENSORS:
        return f"{attr.name}=[{', '.join(_tensor_summary(t) for t in attr.value)}]"
    return str(attr)


def _tensor_summary(tensor) -> str:  # type: ignore[no-untyped-def]
    if tensor.size <= _SMALL_TENSOR:
        try:
            return f"tensor<{tensor.type}>{np.asarray(tensor.numpy()).ravel().tolist()}"
        except Exception:  # data that cannot be read (e.g. missing external file) prints by type only
            return f"tensor<{tensor.type}>"
    return f"tensor<{tensor.type}>#{tensor.digest()[:12]}"


def _tensor_text(value: Value) -> str:
    return _tensor_summary(value.const)


def structural_equal(a: Graph, b: Graph) -> bool:
    return format_graph(a, canonical=True) == format_graph(b, canonical=True)


def assert_structurally_equal(actual: Graph, expected: Graph) -> None:
    """Raise AssertionError with a unified diff of the canonical texts when the graphs differ."""
    left = format_graph(actual, canonical=True)
    right = format_graph(expected, canonical=True)
    if left != right:
        diff = "\n".join(
            difflib.unified_diff(right.splitlines(), left.splitlines(), "expected", "actual", lineterm="")
        )
        raise AssertionError(f"graphs differ structurally:\n{diff}")
