"""StableHLO (MLIR text or bytecode) -> IR, through the MLIR Python bindings shipped in jaxlib.

Mapping:
- the public `main` function (else the first function) -> the root Graph; every other
  `func.func` -> a Function (domain "stablehlo") that `func.call` nodes name in `callee`;
- each op -> a node (op_type = full op name such as "stablehlo.add", domain "stablehlo"); block
  arguments -> graph inputs; the terminator's operands -> graph outputs;
- ops with regions (while, if, case, reduce, sort, scatter, reduce_window...) -> one owned
  subgraph per region in the GRAPHS attribute `regions`; region bodies may use outer values;
- attributes: integers, floats, strings, symbol refs, i64 arrays and dense constants become
  typed Attrs; anything else keeps its MLIR text (kind OPAQUE). Each attribute's MLIR text stays
  in `node.meta["stablehlo.attrs"]` so that `stablehlo_export` writes unchanged ones verbatim;
- quantized element types (`!quant.uniform`, see `stablehlo_quant`): the storage dtype (QINT8...)
  with `QuantParams` in `value.meta["stablehlo.quant"]`;
- a file of several modules (`// -----`, as StableHLO's interpreter tests hold): the functions of
  all of them (clashing names get an `m<k>.` prefix); ops of StableHLO's test dialect `check`
  are kept as side-effect nodes.
Parsing goes through MLIR, which verifies the module: other unknown dialects and malformed text
are reported with file:line:column.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Any

import numpy as np

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.dtypes import DType
from graph_ir.errors import CompilerOptError, ModelFormatError, UnsupportedOpError
from graph_ir.graph import Function, Graph, ModelInfo
from graph_ir.io.decisions import read_decision
from graph_ir.io.files import read_nonempty
from graph_ir.io.hlo_ops import HLO_OP_KINDS
from graph_ir.io.stablehlo_quant import QuantTable, hide_quant_types
from graph_ir.io._isolate import call_isolated, register
from graph_ir.io.xla_bridge import HloSyntaxError, mlir_context, native_timeout
from graph_ir.op_kinds import OpKind, register_op_kinds
from graph_ir.tensors import NumpyTensor
from graph_ir.types import OpaqueType, Shape, TensorType, TokenType, TupleType, Type

__all__ = ["load_stablehlo", "load_stablehlo_as_hlo", "import_stablehlo_text", "STABLEHLO_DOMAIN"]

STABLEHLO_DOMAIN = "stablehlo"
_TERMINATORS = {"func.return", "stablehlo.return", "chlo.return", "mhlo.return", "sdy.return"}

_ELEMENT_TYPES = {
    "i1": DType.BOOL, "i2": DType.INT2, "i4": DType.INT4, "i8": DType.INT8, "i16": DType.INT16, "i32": DType.INT32,
    "i64": DType.INT64, "ui2": DType.UINT2, "ui4": DType.UINT4, "ui8": DType.UINT8, "ui16": DType.UINT16,
    "ui32": DType.UINT32, "ui64": DType.UINT64, "f16": DType.FLOAT16, "bf16": DType.BFLOAT16, "f32": DType.FLOAT32,
    "f64": DType.FLOAT64, "complex<f32>": DType.COMPLEX64, "complex<f64>": DType.COMPLEX128,
    "f8E4M3FN": DType.FLOAT8E4M3FN, "f8E4M3FNUZ": DType.FLOAT8E4M3FNUZ, "f8E5M2": DType.FLOAT8E5M2,
    "f8E5M2FNUZ": DType.FLOAT8E5M2FNUZ, "f8E4M3": DType.FLOAT8E4M3, "f8E3M4": DType.FLOAT8E3M4,
    "f8E4M3B11FNUZ": DType.FLOAT8E4M3B11FNUZ, "f8E8M0FNU": DType.FLOAT8E8M0, "f4E2M1FN": DType.FLOAT4E2M1,
    "index": DType.INT64,
}
_BUFFER_TYPES = {
    DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16, DType.UINT32,
    DType.UINT64, DType.FLOAT16, DType.FLOAT32, DType.FLOAT64,
}
_QUANT_STORAGE = re.compile(r"!quant\.uniform<(u?i\d+)")


def _stablehlo_kinds() -> dict[str, OpKind]:
    table = {f"stablehlo.{op.replace('-', '_')}": kind for op, kind in HLO_OP_KINDS.items()}
    table.update(
        {
            "stablehlo.broadcast_in_dim": OpKind.BROADCAST,
            "stablehlo.dynamic_broadcast_in_dim": OpKind.BROADCAST,
            "stablehlo.dot_general": OpKind.MATMUL,
            "stablehlo.reduce_window": OpKind.POOL,
            "stablehlo.exponential": OpKind.UNARY,
            "stablehlo.log_plus_one": OpKind.UNARY,
            "stablehlo.real_dynamic_slice": OpKind.DYNAMIC_SLICE,
            "stablehlo.dynamic_pad": OpKind.PAD,
            "stablehlo.dynamic_gather": OpKind.GATHER,
            "stablehlo.dynamic_conv": OpKind.CONV,
            "stablehlo.dynamic_iota": OpKind.IOTA,
            "stablehlo.uniform_quantize": OpKind.QUANTIZE,
            "stablehlo.uniform_dequantize": OpKind.DEQUANTIZE,
            "stablehlo.case": OpKind.IF,
            "stablehlo.if": OpKind.IF,
            "stablehlo.composite": OpKind.CALL,
            "func.call": OpKind.CALL,
        }
    )
    return table


STABLEHLO_OP_KINDS = _stablehlo_kinds()
register_op_kinds(STABLEHLO_DOMAIN, STABLEHLO_OP_KINDS)


def load_stablehlo(path: str | os.PathLike[str]) -> Graph:
    from graph_ir.io import limits

    path = os.fspath(path)
    with open(path, "rb") as handle:
        is_bytecode = handle.read(4) == _BYTECODE_MAGIC
    raw = read_nonempty(path, text=not is_bytecode)
    if not is_bytecode:
        limits.check_nesting(raw, file=path, angle=True)
    try:
        graph = import_stablehlo_text(raw, file=path)
    except CompilerOptError as err:
        raise err.with_context(file=path)
    limits.check_graph_size(graph, file=path)
    return graph


def _stablehlo_to_hlo_bytes(source: bytes) -> bytes:
    from jaxlib import _jax

    computation = _jax.mlir.mlir_module_to_xla_computation(source, use_tuple_args=False, return_tuple=False)
    return computation.as_serialized_hlo_module_proto()


register("stablehlo_to_hlo", _stablehlo_to_hlo_bytes)


def load_stablehlo_as_hlo(path: str | os.PathLike[str]) -> Graph:
    """A StableHLO file lowered to XLA HLO by XLA itself (`mlir_module_to_xla_computation`), then
    imported as HLO: the graph can be written as HLO text or StableHLO again."""
    from graph_ir.io.hlo_import import import_hlo_module
    from graph_ir.io.xla_bridge import hlo_module_proto_class

    path = os.fspath(path)
    load_stablehlo(path)  # the same checks and file:line:col errors as a plain import
    with open(path, "rb") as handle:
        source = handle.read()
    try:
        # XLA's lowering is native code that may abort: in the helper. From the serialized proto, not text: XLA's text
        # printer elides large constants.
        serialized = call_isolated("stablehlo_to_hlo", source, what="XLA's StableHLO -> HLO lowering",
                                   timeout_s=native_timeout(len(source)), file=path)
    except RuntimeError as err:
        raise ModelFormatError(f"XLA could not lower the module to HLO: {str(err).splitlines()[0]}", file=path) from None
    proto = hlo_module_proto_class().FromString(serialized)
    graph = import_hlo_module(proto, file=path)
    graph.model.source_format = "stablehlo"
    return graph


_MLIR_ERROR = re.compile(r'error: "[^"]*":(\d+):(\d+): (.*)')
# Convolution dim_numbers, e.g. `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`: the spatial entries are
# dimension indices.
_DIM_NUMBERS = re.compile(r"dim_numbers\s*=\s*((?:\[[^\]\n]*\]\s*(?:x|->)?\s*){1,3})")
_INDEX = re.compile(r"\d+")


_BYTECODE_MAGIC = b"ML\xefR"
# StableHLO's reference-interpreter test dialect: ops such as `check.expect_eq_const` in testdata.
_ALLOWED_UNREGISTERED = frozenset({"check"})
_LOCATION = re.compile(r'loc\("[^"]*":(\d+):(\d+)\)')


def import_stablehlo_text(source: str | bytes, *, file: str | None = None) -> Graph:
    """Parse StableHLO text (or MLIR bytecode) and convert it."""
    from jaxlib.mlir import ir

    quant = QuantTable()
    if isinstance(source, bytes) and not source.startswith(_BYTECODE_MAGIC):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as err:
            raise HloSyntaxError(f"invalid MLIR: byte {err.start} is not UTF-8 and the file is not MLIR bytecode", file=file) from None
    if isinstance(source, str):
        try:
            source, quant = hide_quant_types(source)
        except CompilerOptError as err:
            raise err.with_context(file=file)
        _check_dimension_indices(source, file)
    _parse_in_helper(source, file)
    context = _parse_context()
    with context:
        try:
            module = ir.Module.parse(source)
        except Exception as err:
            message = str(err)
            match = _MLIR_ERROR.search(message)
            detail = match.group(3) if match else message.splitlines()[-1]
            line, column = (int(match.group(1)), int(match.group(2))) if match else (None, None)
            if "unregistered dialect" in message or "is unknown" in message:
                raise UnsupportedOpError(f"unknown MLIR dialect or op: {detail}", file=file, line=line, column=column) from None
            raise HloSyntaxError(f"invalid MLIR: {quant.restore(detail)}", line=line, column=column, file=file) from None
        _refuse_unregistered_ops(module.operation, context, file)
        with gc_paused():
            graph = _Importer(file, quant).run(module)
    return graph


def _parse_context() -> Any:
    """The MLIR context both parses use: unregistered dialects allowed for `check`; other unknown
    ops are refused after the parse (`_refuse_unregistered_ops`)."""
    context = mlir_context()
    context.allow_unregistered_dialects = True
    return context


def _parse_in_helper(source: str | bytes, file: str | None) -> None:
    """Parse (and verify) the module once in the forked helper (`graph_ir.io._isolate`) before the
    importer parses it here and walks it: an op verifier that aborts on input nobody foresaw costs
    a `CorruptModelError`, not the process. A parse error is left to the parse here, which reports
    it with its line and column. Costs a second parse (about 6 ms a MB)."""
    payload = source.encode("utf-8") if isinstance(source, str) else source
    try:
        call_isolated("stablehlo_parse", payload, what="MLIR's StableHLO parser", timeout_s=native_timeout(len(payload)), file=file)
    except RuntimeError:
        pass


def _parse_stablehlo_bytes(payload: bytes) -> bytes:
    from jaxlib.mlir import ir

    with _parse_context():
        ir.Module.parse(payload if payload.startswith(_BYTECODE_MAGIC) else payload.decode("utf-8"))
    return b""


register("stablehlo_parse", _parse_stablehlo_bytes)


def _check_dimension_indices(source: str, file: str | None) -> None:
    """Refuse a dimension index in dim_numbers above the limit before MLIR's parser allocates by it."""
    from graph_ir.io import limits

    for match in _DIM_NUMBERS.finditer(source):
        largest = max((int(i) for i in _INDEX.findall(match.group(1))), default=0)
        line = source.count("\n", 0, match.start()) + 1
        limits.check("max_dimension_index", largest, f"a dimension index in dim_numbers (line {line})", file=file)


def _refuse_unregistered_ops(operation: Any, context: Any, file: str | None) -> None:
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                name = op.name
                if name.split(".", 1)[0] not in _ALLOWED_UNREGISTERED and not context.is_registered_operation(name):
                    match = _LOCATION.search(str(op.location))
                    line, column = (int(match.group(1)), int(match.group(2))) if match else (None, None)
                    raise UnsupportedOpError(
                        f"unknown MLIR dialect or op: {name!r} is not registered", file=file, line=line, column=column
                    )
                if len(op.regions):
                    _refuse_unregistered_ops(op, context, file)


def mlir_type(mlir_type_: Any) -> Type | None:
    """An MLIR type -> IR type."""
    from jaxlib.mlir import ir

    text = str(mlir_type_)
    if isinstance(mlir_type_, ir.RankedTensorType):
        ranked = ir.RankedTensorType(mlir_type_)
        dims: list[int | str | None] = [None if ranked.is_dynamic_dim(i) else ranked.get_dim_size(i) for i in range(ranked.rank)]
        return TensorType(_element(str(ranked.element_type)), Shape(dims))
    if isinstance(mlir_type_, ir.UnrankedTensorType):
        return TensorType(_element(str(ir.UnrankedTensorType(mlir_type_).element_type)), None)
    if isinstance(mlir_type_, ir.TupleType):
        tuple_type = ir.TupleType(mlir_type_)
        return TupleType(tuple(mlir_type(tuple_type.get_type(i)) for i in range(tuple_type.num_types)))
    if "token" in text:
        return TokenType()
    return OpaqueType(text)


def _element(text: str) -> DType | None:
    dtype = _ELEMENT_TYPES.get(text)
    if dtype is not None:
        return dtype
    quant = _QUANT_STORAGE.match(text)
    if quant:
        return _ELEMENT_TYPES.get(quant.group(1))
    return None


class _Importer:
    def __init__(self, file: str | None, quant: QuantTable | None = None) -> None:
        self.file = file
        self.quant = quant or QuantTable()
        self.counter = itertools.count()

    def run(self, module: Any) -> Graph:
        top = [op.operation for op in module.body.operations]
        functions = [op for op in top if op.name == "func.func"]
        nested = [op for op in top if op.name == "builtin.module"]
        names = [op.attributes["sym_name"].value for op in functions]
        for index, inner in enumerate(nested):  # several modules in one file (`// -----`)
            for op in inner.regions[0].blocks[0].operations:
                if op.operation.name == "func.func":
                    name = op.operation.attributes["sym_name"].value
                    functions.append(op.operation)
                    names.append(name if name not in names else f"m{index}.{name}")
        if not functions:
            raise ModelFormatError("the module has no func.func", file=self.file)
        entry_index = names.index("main") if "main" in names else 0
        root = self.function_body(functions[entry_index], names[entry_index])
        for op, name in zip(functions, names):
            if op is not functions[entry_index]:
                body = self.function_body(op, name)
                root.functions[(STABLEHLO_DOMAIN, name, "")] = Function(STABLEHLO_DOMAIN, name, body)
        attributes = module.operation.attributes
        module_name = attributes["sym_name"].value if "sym_name" in attributes else "module"
        root.name = module_name
        root.meta["stablehlo.entry_name"] = names[entry_index]
        root.meta["stablehlo.module_attrs"] = {
            attributes[i].name: self.quant.restore(str(attributes[i].attr)) for i in range(len(attributes))
            if attributes[i].name != "sym_name"
        }
        if nested:
            root.meta["stablehlo.module_count"] = len(nested)
        root.opset_imports = {STABLEHLO_DOMAIN: 1}
        root.model = ModelInfo(source_format="stablehlo", source_path=self.file)
        return root

    def function_body(self, op: Any, name: str) -> Graph:
        region = op.regions[0]
        if len(region.blocks) == 0:  # an external declaration
            graph = Graph(name)
            graph.meta["stablehlo.declaration"] = True
            graph.meta["stablehlo.function_type"] = self.quant.restore(str(op.attributes["function_type"]))
        else:
            graph = self.block(region.blocks[0], name, outer={})
        attributes = op.attributes
        # visibility, arg/result attributes...: written back verbatim by the exporter
        graph.meta["stablehlo.func_attrs"] = {
            attributes[i].name: self.quant.restore(str(attributes[i].attr)) for i in range(len(attributes))
            if attributes[i].name not in ("sym_name", "function_type")
        }
        return graph

    def value(self, name: str, mlir_type_: Any) -> Value:
        """A Value of an MLIR type, with the quantized element type or tensor encoding it hides."""
        from jaxlib.mlir import ir

        type_ = mlir_type(mlir_type_)
        value = Value(name, type_)
        if isinstance(mlir_type_, ir.RankedTensorType):
            encoding = ir.RankedTensorType(mlir_type_).encoding
            if encoding is not None:
                tag = ir.StringAttr(encoding).value if isinstance(encoding, ir.StringAttr) else ""
                params = self.quant.lookup(tag)
                if params is not None:
                    value.type = TensorType(params.dtype, type_.shape)
                    value.meta["stablehlo.quant"] = params
                else:  # bounds of a dynamic dimension and the like
                    value.meta["stablehlo.encoding"] = str(encoding)
        return value

    def block(self, block: Any, name: str, outer: dict[Any, Value]) -> Graph:
        graph = Graph(name)
        values = dict(outer)  # MLIR values visible here: outer scope plus this block's
        for index, argument in enumerate(block.arguments):
            value = self.value(argument.get_name().lstrip("%") or f"arg{index}", argument.type)
            graph.add_input(value)
            values[argument] = value
        for op in block.operations:
            op = op.operation
            if op.name in _TERMINATORS:
                for operand in op.operands:
                    graph.add_output(self.lookup(values, operand, op))
                graph.meta["stablehlo.terminator"] = op.name
                continue
            node = self.node(op, values)
            graph.append(node)
            for result, value in zip(op.results, node.outputs):
                values[result] = value
            if len(op.regions):
                bodies = tuple(
                    self.block(region.blocks[0], f"{node.name}.region{index}", values)
                    for index, region in enumerate(op.regions)
                    if len(region.blocks)
                )
                node.set_attr(Attr("regions", AttrKind.GRAPHS, bodies))
        return graph

    def lookup(self, values: dict[Any, Value], operand: Any, op: Any) -> Value:
        value = values.get(operand)
        if value is None:
            raise ModelFormatError(f"operand {operand.get_name()} of {op.name} is not in scope", file=self.file)
        return value

    def node(self, op: Any, values: dict[Any, Value]) -> Node:
        from jaxlib.mlir import ir

        op_name = op.name
        outputs = [self.value(r.get_name().lstrip("%") if r.get_name() else "", r.type) for r in op.results]
        inputs = [self.lookup(values, operand, op) for operand in op.operands]
        if op_name == "stablehlo.convert":  # hide_quant_types spells the quantize ops `convert`
            if any("stablehlo.quant" in v.meta for v in outputs):
                op_name = "stablehlo.uniform_quantize"
            elif any("stablehlo.quant" in v.meta for v in inputs):
                op_name = "stablehlo.uniform_dequantize"
        short = op_name.split(".", 1)[-1]
        name = f"{short}_{next(self.counter)}"
        kind = STABLEHLO_OP_KINDS.get(op_name)
        if kind is None:  # `check.*` asserts have effects; any other unmapped op is OTHER
            kind = OpKind.IO if op_name.split(".", 1)[0] in _ALLOWED_UNREGISTERED else OpKind.OTHER
        node = Node(op_name, inputs, outputs=outputs, domain=STABLEHLO_DOMAIN, name=name, kind=kind)
        texts: dict[str, tuple[Attr, str]] = {}
        for index in range(len(op.attributes)):
            # Look attributes up by name: `NamedAttribute.attr` aborts the process (in C++) on
            # element types the bindings cannot cast (complex dense constants), lookup raises.
            attr_name = op.attributes[index].name
            try:
                attr = op.attributes[attr_name]
            except TypeError:
                opaque = Attr(attr_name, AttrKind.OPAQUE, op.get_asm(large_elements_limit=16))
                node.set_attr(opaque)
                text = _attr_text_from_asm(op.get_asm(print_generic_op_form=True), attr_name)
                if text is not None:
                    texts[attr_name] = (opaque, self.quant.restore(text))
                continue
            if attr_name.startswith("compiler_opt.") and isinstance(attr, ir.StringAttr):
                if read_decision(node, attr_name, ir.StringAttr(attr).value):
                    continue
            converted = _attr(attr_name, attr)
            node.set_attr(converted)
            texts[attr_name] = (converted, self.quant.restore(str(attr)))
        node.meta["stablehlo.attrs"] = texts
        location = str(op.location)
        if location:
            node.meta["stablehlo.location"] = location
        return node


_CLOSE = {"<": ">", "[": "]", "{": "}", "(": ")"}


def _attr_text_from_asm(asm: str, name: str) -> str | None:
    """The text of attribute `name` in an op's generic form (for attributes the bindings cannot
    hand to Python, such as complex dense constants)."""
    start = asm.find(f"{name} = ")
    if start < 0:
        return None
    index = start + len(name) + 3
    stack: list[str] = []
    in_string = False
    for position in range(index, len(asm)):
        char = asm[position]
        if in_string:
            if char == "\\":
                continue
            if char == '"' and asm[position - 1] != "\\":
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSE:
            stack.append(_CLOSE[char])
        elif stack and char == stack[-1]:
            stack.pop()
        elif not stack and char in ",}>":
            return asm[index:position].strip()
    return None


def _attr(name: str, attr: Any) -> Attr:
    from jaxlib.mlir import ir

    if isinstance(attr, ir.BoolAttr):
        return Attr(name, AttrKind.INT, int(ir.BoolAttr(attr).value))
    if isinstance(attr, ir.IntegerAttr):
        return Attr(name, AttrKind.INT, ir.IntegerAttr(attr).value)
    if isinstance(attr, ir.FloatAttr):
        return Attr(name, AttrKind.FLOAT, ir.FloatAttr(attr).value)
    if isinstance(attr, ir.StringAttr):
        return Attr(name, AttrKind.STRING, ir.StringAttr(attr).value)
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return Attr(name, AttrKind.STRING, ir.FlatSymbolRefAttr(attr).value)
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return Attr(name, AttrKind.INTS, tuple(ir.DenseI64ArrayAttr(attr)))
    if isinstance(attr, ir.DenseElementsAttr):
        tensor = _dense_tensor(attr)
        if tensor is not None:
            return Attr(name, AttrKind.TENSOR, tensor)
    return Attr(name, AttrKind.OPAQUE, str(attr))


def _dense_tensor(attr: Any) -> NumpyTensor | None:
    """A dense constant as a numpy-backed tensor, when numpy can hold its element type."""
    from jaxlib.mlir import ir

    shaped = ir.ShapedType(attr.type)
    dtype = _element(str(shaped.element_type))
    # Only element types the bindings export as a buffer: others (complex, bf16, f8) can abort
    # the process from C++ instead of raising, so their constants keep their MLIR text.
    if dtype not in _BUFFER_TYPES or not shaped.has_static_shape:
        return None
    try:
        array = np.array(attr)
    except Exception:  # element types the bindings cannot export as a buffer
        return None
    if array.dtype != dtype.numpy:
        try:
            array = array.astype(dtype.numpy)
        except (TypeError, ValueError):
            return None
    return NumpyTensor(np.broadcast_to(array, tuple(shaped.shape)) if array.size == 1 else array.reshape(shaped.shape), dtype)
