"""IR graphs of StableHLO ops (domain "stablehlo", as `stablehlo_import` builds them) -> MLIR
text in the generic op form, without a detour through XLA HLO (which has no form for dynamic
ops such as `stablehlo.dynamic_iota`, nor for quantized types).

Attributes that a pass did not replace are written from the MLIR text kept at import; new or
changed ones are written from the Attr (ints as i64, floats as f32, i64 arrays, dense tensors).
Types come from the IR type, with the quantized element type (`value.meta["stablehlo.quant"]`)
or tensor encoding (dynamic-dimension bounds) kept at import. Decisions (device, fusion group...)
are written as discardable `compiler_opt.*` string attributes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.dtypes import DType
from graph_ir.errors import ExportError
from graph_ir.io.decisions import decision_items
from graph_ir.graph import Graph
from graph_ir.types import OpaqueType, TensorType, TokenType, TupleType

__all__ = ["print_stablehlo_module", "mlir_type_text"]

_ELEMENT_TEXT = {
    DType.BOOL: "i1", DType.INT2: "i2", DType.INT4: "i4", DType.INT8: "i8", DType.INT16: "i16", DType.INT32: "i32",
    DType.INT64: "i64", DType.UINT2: "ui2", DType.UINT4: "ui4", DType.UINT8: "ui8", DType.UINT16: "ui16",
    DType.UINT32: "ui32", DType.UINT64: "ui64", DType.FLOAT16: "f16", DType.BFLOAT16: "bf16", DType.FLOAT32: "f32",
    DType.FLOAT64: "f64", DType.COMPLEX64: "complex<f32>", DType.COMPLEX128: "complex<f64>",
    DType.FLOAT8E4M3FN: "f8E4M3FN", DType.FLOAT8E4M3FNUZ: "f8E4M3FNUZ", DType.FLOAT8E5M2: "f8E5M2",
    DType.FLOAT8E5M2FNUZ: "f8E5M2FNUZ", DType.FLOAT8E4M3: "f8E4M3", DType.FLOAT8E3M4: "f8E3M4",
    DType.FLOAT8E4M3B11FNUZ: "f8E4M3B11FNUZ", DType.FLOAT8E8M0: "f8E8M0FNU", DType.FLOAT4E2M1: "f4E2M1FN",
}


def mlir_type_text(value: Value) -> str:
    type_ = value.type
    quant = value.meta.get("stablehlo.quant")
    if isinstance(type_, TensorType):
        if quant is not None:
            element = quant.text
        elif type_.dtype in _ELEMENT_TEXT:
            element = _ELEMENT_TEXT[type_.dtype]
        else:
            raise ExportError(f"%{value.name}: element type {type_.dtype} has no StableHLO spelling")
        encoding = value.meta.get("stablehlo.encoding")
        suffix = f", {encoding}" if encoding else ""
        if type_.shape is None:
            return f"tensor<*x{element}>"
        dims = "".join(f"{'?' if not isinstance(d, int) else d}x" for d in type_.shape)
        return f"tensor<{dims}{element}{suffix}>"
    if isinstance(type_, TupleType):
        return "tuple<" + ", ".join(_type_text(t, value) for t in type_.types) + ">"
    if isinstance(type_, TokenType):
        return "!stablehlo.token"
    if isinstance(type_, OpaqueType):
        return type_.name
    raise ExportError(f"%{value.name}: type {type_} has no StableHLO spelling")


def _type_text(type_: Any, where: Value) -> str:
    return mlir_type_text(Value(where.name, type_))


def _attr_text(attr: Attr, node: Node) -> str:
    kind, value = attr.kind, attr.value
    if kind is AttrKind.OPAQUE and isinstance(value, str):
        return value
    if kind is AttrKind.INT:
        return f"{int(value)} : i64"
    if kind is AttrKind.FLOAT:
        return f"{float(value)!r} : f32"
    if kind is AttrKind.STRING:
        text = json.dumps(value if isinstance(value, str) else value.decode("latin-1"))
        return "@" + text if attr.name in ("callee", "call_target_name_ref") else text
    if kind is AttrKind.INTS:
        return "array<i64" + (": " + ", ".join(str(int(v)) for v in value) if value else "") + ">"
    if kind is AttrKind.TENSOR:
        dtype = value.dtype
        if dtype not in _ELEMENT_TEXT:
            raise ExportError(f"tensor attribute of element type {dtype} has no StableHLO spelling", node=node.name, field=attr.name)
        array = np.asarray(value.numpy())
        literal = json.dumps(array.astype(bool).tolist() if dtype is DType.BOOL else array.tolist())
        dims = "".join(f"{d}x" for d in array.shape)
        return f"dense<{literal}> : tensor<{dims}{_ELEMENT_TEXT[dtype]}>"
    raise ExportError(f"{kind.value} attribute has no StableHLO form", node=node.name, field=attr.name)


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.counter = 0

    def name(self, value: Value, where: str) -> str:
        name = self.names.get(id(value))
        if name is None:
            raise ExportError(f"%{value.name} is used but not defined in scope", node=where)
        return name

    def define(self, value: Value, prefix: str = "v") -> str:
        name = f"%{prefix}{self.counter}"
        self.counter += 1
        self.names[id(value)] = name
        return name

    def block(self, graph: Graph, indent: str, terminator: str) -> None:
        args = [f"{self.define(v, 'arg')}: {mlir_type_text(v)}" for v in graph.inputs]
        self.lines.append(f"{indent}^bb0({', '.join(args)}):" if args else f"{indent}^bb0:")
        for node in graph:
            self.node(node, indent + "  ")
        operands = ", ".join(self.name(v, graph.name) for v in graph.outputs)
        types = ", ".join(mlir_type_text(v) for v in graph.outputs)
        term = graph.meta.get("stablehlo.terminator", terminator)
        self.lines.append(f'{indent}  "{term}"({operands}) : ({types}) -> ()')

    def node(self, node: Node, indent: str) -> None:
        if node.domain != "stablehlo":
            raise ExportError(f"op {node.domain}::{node.op_type} is not a StableHLO op", node=node.name)
        operands = []
        for index, value in enumerate(node.inputs):
            if value is None:
                raise ExportError(f"input {index} is missing; MLIR ops have no optional operands", node=node.name)
            operands.append(self.name(value, node.name))
        kept = node.meta.get("stablehlo.attrs", {})
        attrs = []
        regions: tuple[Graph, ...] = ()
        for name, attr in node.attrs.items():
            if attr.kind is AttrKind.GRAPHS and name == "regions":
                regions = attr.value
                continue
            original = kept.get(name)
            text = original[1] if original is not None and original[0] is attr else _attr_text(attr, node)
            attrs.append(f"{_attr_name(name)} = {text}")
        # Decisions travel as discardable string attributes, read back by stablehlo_import.
        attrs += [f"{json.dumps(key)} = {json.dumps(text)}" for key, text in decision_items(node)]
        results = [self.define(v) for v in node.outputs]
        head = f"{indent}{', '.join(results)} = " if results else indent
        attr_dict = " {" + ", ".join(attrs) + "}" if attrs else ""
        in_types = ", ".join(mlir_type_text(v) for v in node.inputs)
        out_types = ", ".join(mlir_type_text(v) for v in node.outputs)
        signature = f"({in_types}) -> ({out_types})" if len(node.outputs) != 1 else f"({in_types}) -> {out_types}"
        if not regions:
            self.lines.append(f'{head}"{node.op_type}"({", ".join(operands)}){attr_dict} : {signature}')
            return
        self.lines.append(f'{head}"{node.op_type}"({", ".join(operands)}) (')
        for index, region in enumerate(regions):
            self.lines.append(f"{indent}  {{")
            self.block(region, indent + "  ", "stablehlo.return")
            self.lines.append(f"{indent}  }}{',' if index + 1 < len(regions) else ''}")
        self.lines.append(f"{indent}){attr_dict} : {signature}")

    def function(self, graph: Graph, name: str) -> None:
        attrs = dict(graph.meta.get("stablehlo.func_attrs", {}))
        for key in ("arg_attrs", "res_attrs"):  # stale once a pass changed the signature
            count = len(graph.inputs) if key == "arg_attrs" else len(graph.outputs)
            if key in attrs and attrs[key].count("{") != count:
                del attrs[key]
        if graph.meta.get("stablehlo.declaration"):
            function_type = graph.meta["stablehlo.function_type"]
        else:
            ins = ", ".join(mlir_type_text(v) for v in graph.inputs)
            outs = ", ".join(mlir_type_text(v) for v in graph.outputs)
            function_type = f"({ins}) -> ({outs})"
        props = [f"function_type = {function_type}", f"sym_name = {json.dumps(name)}"]
        props += [f"{_attr_name(k)} = {v}" for k, v in attrs.items()]
        if graph.meta.get("stablehlo.declaration"):
            self.lines.append(f'  "func.func"() ({{}}) {{{", ".join(props)}}} : () -> ()')
            return
        self.names = {}
        self.lines.append('  "func.func"() ({')
        self.block(graph, "  ", "func.return")
        self.lines.append(f'  }}) {{{", ".join(props)}}} : () -> ()')


def _attr_name(name: str) -> str:
    bare = name.replace("_", "a").replace(".", "a").replace("$", "a")
    return name if bare.isalnum() and not name[0].isdigit() else json.dumps(name)


def print_stablehlo_module(graph: Graph) -> str:
    """The module as MLIR text (generic op form): the root graph is the entry function."""
    printer = _Printer()
    module_attrs = graph.meta.get("stablehlo.module_attrs", {})
    attrs = ", ".join(f"{_attr_name(k)} = {v}" for k, v in module_attrs.items())
    name = graph.name if graph.name and graph.name != "module" else None
    header = "module" + (f" @{json.dumps(name)}" if name else "") + (f" attributes {{{attrs}}}" if attrs else "")
    printer.lines.append(header + " {")
    printer.function(graph, graph.meta.get("stablehlo.entry_name", "main"))
    for function in graph.functions.values():
        if function.domain != "stablehlo":
            raise ExportError(f"function {function.domain}::{function.name} is not a StableHLO function")
        printer.function(function.graph, function.name)
    printer.lines.append("}")
    return "\n".join(printer.lines) + "\n"
