"""XLA HLO text -> IR, through XLA's own parser (see xla_bridge).

Mapping:
- a module -> a root Graph (its ENTRY computation); a file of several modules separated by
  `// -----` lines -> one Graph per module (`load_hlo_modules`);
- `parameter` instructions -> graph inputs (by parameter number); every other instruction -> a
  node (domain "hlo", op_type = opcode); the ROOT -> the graph output;
- a computation called from exactly one instruction (a fusion body, a while body, a reducer used
  once) -> a subgraph owned by that node (attribute `calls`); one called from several places
  (a shared reducer) -> a Function in `root.functions`; every node that calls computations also
  has `called_computations` (their names, in XLA's order: while = body, condition);
- tuples and tokens keep their types (TupleType, TokenType); layouts, dynamic dims (`<=N`),
  sharding, frontend attributes, metadata and the original instruction proto are kept, so the
  exporter (hlo_export) writes back what was read; a scheduled module keeps its order.
"""

from __future__ import annotations

import collections
import logging
import os
import re
from typing import Any

import numpy as np

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import UNKNOWN_VALUE, Node, Value
from graph_ir.dtypes import DType
from graph_ir.errors import CompilerOptError, CorruptModelError, EmptyModelError, ModelFormatError, UndefinedValueError
from graph_ir.graph import Function, Graph, ModelInfo
from graph_ir.io.decisions import read_decision
from graph_ir.io.files import read_nonempty
from graph_ir.io.hlo_ops import HLO_DOMAIN, HLO_OP_KINDS
from graph_ir.io.xla_bridge import HloSyntaxError, parse_hlo_text, primitive_type_name, verify_with_stablehlo
from graph_ir.op_kinds import OpKind
from graph_ir.tensors import NumpyTensor
from graph_ir.types import OpaqueType, Shape, TensorType, TokenType, TupleType, Type

__all__ = ["load_hlo", "load_hlo_modules", "import_hlo_text", "import_hlo_module", "split_modules", "shape_to_type"]

logger = logging.getLogger(__name__)

_SEPARATOR = re.compile(r"^\s*//\s*-{5,}\s*$")
_COMMENT_OR_BLANK = re.compile(r"^\s*(//.*)?$")
# Instruction fields the IR models directly; the rest become attributes.
_STRUCTURAL_FIELDS = {
    "name", "opcode", "shape", "id", "operand_ids", "called_computation_ids", "control_predecessor_ids",
    "metadata", "frontend_attributes", "literal", "statistics_viz", "original_value", "parameter_number",
}


# Fields whose zero/empty value is meaningful for an opcode, so they are set even when proto3
# leaves them out (get-tuple-element index 0, a reduce over no dimensions, ...).
_ALWAYS_PRESENT = {
    "get-tuple-element": ("tuple_index",),
    "broadcast": ("dimensions",),
    "concatenate": ("dimensions",),
    "iota": ("dimensions",),
    "reduce": ("dimensions",),
    "reverse": ("dimensions",),
    "transpose": ("dimensions",),
}


def split_modules(text: str) -> list[tuple[int, str]]:
    """Split a file on `// -----` lines; returns (first line number - 1, module text) pairs."""
    chunks: list[tuple[int, str]] = []
    start, lines = 0, text.splitlines(keepends=True)
    current: list[str] = []
    for number, line in enumerate(lines):
        if _SEPARATOR.match(line):
            chunks.append((start, "".join(current)))
            start, current = number + 1, []
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return [(offset, chunk) for offset, chunk in chunks if any(not _COMMENT_OR_BLANK.match(l) for l in chunk.splitlines())]


from graph_ir.io import limits  # noqa: E402


def load_hlo_modules(path: str | os.PathLike[str], *, verify_shapes: bool = True) -> list[Graph]:
    """Every module of an HLO text file, one Graph each."""
    path = os.fspath(path)
    raw = read_nonempty(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptModelError(f"not HLO text: byte {err.start} is not UTF-8", file=path) from None
    chunks = split_modules(text)
    if not chunks:
        raise EmptyModelError("file holds only comments", file=path)
    graphs = []
    for offset, chunk in chunks:
        try:
            graphs.append(import_hlo_text(chunk, file=path, line_offset=offset, verify_shapes=verify_shapes))
        except CompilerOptError as err:
            raise err.with_context(file=path)
        limits.check_graph_size(graphs[-1], file=path)
    return graphs


def load_hlo(path: str | os.PathLike[str], *, module: int | None = None, verify_shapes: bool = True) -> Graph:
    """One module of an HLO text file (`module` picks one when the file holds several)."""
    graphs = load_hlo_modules(path, verify_shapes=verify_shapes)
    if module is None:
        if len(graphs) > 1:
            names = ", ".join(f"{i}: {g.name}" for i, g in enumerate(graphs))
            raise ModelFormatError(
                f"file holds {len(graphs)} modules ({names}); pick one with module=N (CLI: --module N; in bench and train --workloads: FILE#N)",
                file=os.fspath(path),
            )
        return graphs[0]
    if not 0 <= module < len(graphs):
        raise ModelFormatError(f"module {module} requested, the file holds {len(graphs)}", file=os.fspath(path))
    return graphs[module]


# A computation header: `[ENTRY] name [(params) -> result] {` - unlike instructions, no '='.
_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?[\w.\-]+\s*(\(.*\))?\s*(->.*)?\{\s*$")
_ENTRY = re.compile(r"^\s*ENTRY\b")
# `name = type constant({...})`: the text left the data out; XLA's parser fills in a placeholder.
_ELIDED_CONSTANT = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*\bconstant\(\{\.\.\.\}\)", re.MULTILINE)
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?[\w.\-]+\s*=\s")


_PARAMETER = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*[^=]*?\bparameter\((-?\d+)\)")


def _check_module_text(text: str, file: str | None, line_offset: int) -> None:
    lines = [re.sub(r"//.*$", "", line) for line in text.splitlines()]
    first = next((i for i, l in enumerate(lines) if l.strip()), None)
    if first is None:
        raise EmptyModelError("no HLO module in the text", file=file)
    if not any(_HEADER.match(l) and not _INSTRUCTION.match(l) for l in lines):
        # XLA's parser wraps bare instructions in a computation named "_"; that is not a module.
        raise HloSyntaxError(
            "this is a fragment, not an HLO module: no computation ('name { ... }') found",
            line=first + 1 + line_offset, column=1, file=file,
        )
    _check_parameter_numbers(lines, file, line_offset)
    _check_sharding_sizes(lines, file, line_offset)


_TILE_DIMS = re.compile(r"(?:devices=|<=)\[([\d,\s]+)\]")


def _check_sharding_sizes(lines: list[str], file: str | None, line_offset: int) -> None:
    """A sharding's tile assignment (`devices=[1,2147483648]...`, `<=[N]`) is materialized by
    XLA's parser: 2**31 devices took 30 s and gigabytes (found by fuzzing)."""
    for index, line in enumerate(lines):
        if "devices=" not in line:
            continue
        for match in _TILE_DIMS.finditer(line):
            count = 1
            for dim in match.group(1).split(","):
                value = dim.strip()  # str.strip and `\s` take control characters such as \x1f for blanks; int() does not
                if not value:
                    continue
                if not (value.isascii() and value.isdigit()):  # "1000000 000" (found by fuzzing): not one number
                    raise HloSyntaxError(
                        f"a sharding's tile dimension {value!r} is not an integer",
                        line=index + 1 + line_offset, column=match.start() + 1, file=file,
                    )
                count *= int(value)
            try:
                limits.check("max_sharding_devices", count, "a sharding's device count", file=file)
            except CompilerOptError as err:
                err.line, err.column = index + 1 + line_offset, match.start() + 1
                raise


def _check_parameter_numbers(lines: list[str], file: str | None, line_offset: int) -> None:
    """Each computation's parameter numbers must be 0..n-1: XLA's parser CHECK-fails (aborts the
    process) on a gap such as parameter(9223372036854775807) (found by fuzzing). A `{` that ends a
    line opens a body (a computation, or an inline `to_apply={`); other braces are attributes."""
    stack: list[dict[int, int] | None] = []

    def finish(numbers: dict[int, int] | None) -> None:
        for number, index in sorted((numbers or {}).items()):
            if number >= len(numbers):
                raise HloSyntaxError(
                    f"parameter({number}) but the computation has {len(numbers)} parameters (numbers must be 0..n-1)",
                    line=index + 1 + line_offset, column=1, file=file,
                )

    for index, line in enumerate(lines):
        match = _PARAMETER.match(line)
        if match:
            body = next((numbers for numbers in reversed(stack) if numbers is not None), None)
            if body is not None:
                number = int(match.group(1))
                if number < 0 or number in body:
                    what = "negative" if number < 0 else "used twice"
                    raise HloSyntaxError(f"parameter({number}) is {what}", line=index + 1 + line_offset, column=1, file=file)
                body[number] = index
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line).rstrip()
        for position, char in enumerate(code):
            if char == "{":
                stack.append({} if position == len(code) - 1 else None)
            elif char == "}" and stack:
                finish(stack.pop())
    while stack:
        finish(stack.pop())


def _check_entry(text: str, proto: Any, file: str | None, line_offset: int) -> None:
    """Without an ENTRY keyword XLA takes the last computation; accept that only when it is the
    one computation nothing else calls (otherwise the choice would be arbitrary)."""
    if any(_ENTRY.match(l) for l in text.splitlines()):
        return
    called = {cid for c in proto.computations for inst in c.instructions for cid in inst.called_computation_ids}
    roots = [c.name for c in proto.computations if c.id not in called]
    if roots != [proto.entry_computation_name]:
        raise HloSyntaxError(
            f"the module has no ENTRY computation and {len(roots)} computations are called by none "
            f"({', '.join(roots)}): mark one ENTRY",
            line=1 + line_offset, column=1, file=file,
        )
    logger.info("%s: no ENTRY keyword; using %s, the only uncalled computation", file, proto.entry_computation_name)


def import_hlo_text(text: str, *, file: str | None = None, line_offset: int = 0, verify_shapes: bool = True) -> Graph:
    """Parse one module's text and convert it."""
    _check_module_text(text, file, line_offset)
    proto = parse_hlo_text(text, file=file, line_offset=line_offset)
    _check_entry(text, proto, file, line_offset)
    return import_hlo_module(proto, file=file, verify_shapes=verify_shapes, elided=set(_ELIDED_CONSTANT.findall(text)))


def import_hlo_module(
    proto: Any, *, file: str | None = None, verify_shapes: bool = True, elided: set[str] | None = None
) -> Graph:
    """Convert an `HloModuleProto` (from XLA's parser or a serialized computation).

    `elided` names constants whose data the source text left out (`{...}`).
    """
    if verify_shapes:
        verify_with_stablehlo(proto, file=file)
    with gc_paused():
        graph = _HloImporter(proto, elided or set()).run()
    graph.model.source_path = file
    return graph


def shape_to_type(shape: Any) -> Type:
    """An xla.ShapeProto -> IR type."""
    kind = primitive_type_name(shape.element_type)
    if kind == "TUPLE":
        return TupleType(tuple(shape_to_type(s) for s in shape.tuple_shapes))
    if kind == "TOKEN":
        return TokenType()
    if kind in ("OPAQUE_TYPE", "PRIMITIVE_TYPE_INVALID") or kind.startswith("UNKNOWN"):
        return OpaqueType(kind.lower())
    dims: list[int | str] = []
    dynamic = shape.is_dynamic_dimension
    for index, dim in enumerate(shape.dimensions):
        dims.append(f"<={dim}" if index < len(dynamic) and dynamic[index] else dim)
    layout = tuple(shape.layout.minor_to_major) if shape.HasField("layout") and shape.layout.minor_to_major else None
    try:
        dtype = DType.from_xla(kind)
    except ValueError:  # an XLA type the IR does not model as a tensor element (e.g. BUFFER)
        return OpaqueType(kind.lower())
    return TensorType(dtype, Shape(dims), layout)


# LiteralProto field per element type, and how to read it.
_LITERAL_FIELDS = {
    DType.BOOL: ("preds", None),
    DType.INT8: ("s8s", np.int8),
    DType.UINT8: ("u8s", np.uint8),
    DType.INT16: ("s16s", np.int16),
    DType.UINT16: ("u16s", np.uint16),
    DType.INT32: ("s32s", None),
    DType.INT64: ("s64s", None),
    DType.UINT32: ("u32s", None),
    DType.UINT64: ("u64s", None),
    DType.FLOAT16: ("f16s", np.float16),
    DType.BFLOAT16: ("bf16s", "bfloat16"),
    DType.FLOAT32: ("f32s", None),
    DType.FLOAT64: ("f64s", None),
}


def _literal_tensor(literal: Any, value_type: Type) -> NumpyTensor | None:
    """Decode a constant's literal; None when it is elided (`{...}`) or of an unhandled type."""
    if not isinstance(value_type, TensorType) or value_type.shape is None or not value_type.shape.is_static:
        return None
    entry = _LITERAL_FIELDS.get(value_type.dtype)
    if entry is None:
        return None
    field, raw_dtype = entry
    data = getattr(literal, field)
    numel = value_type.shape.numel() or 0
    if raw_dtype is None:
        array = np.asarray(list(data), dtype=value_type.dtype.numpy)
    else:
        dtype = value_type.dtype.numpy if raw_dtype == "bfloat16" else np.dtype(raw_dtype)
        array = np.frombuffer(bytes(data), dtype=dtype)
    if array.size != numel:
        return None  # elided or partial
    return NumpyTensor(array.reshape(tuple(value_type.shape)), value_type.dtype)


class _HloImporter:
    def __init__(self, proto: Any, elided: set[str] = frozenset()) -> None:
        self.proto = proto
        self.elided = elided
        self.computations = {c.id: c for c in proto.computations}
        callers: collections.Counter[int] = collections.Counter()
        for computation in proto.computations:
            for inst in computation.instructions:
                callers.update(inst.called_computation_ids)
        self.owned = {cid for cid, count in callers.items() if count == 1 and cid != proto.entry_computation_id}
        self.schedule = {cid: list(seq.instruction_ids) for cid, seq in proto.schedule.sequences.items()}
        self.types: dict[bytes, Type] = {}  # many instructions share a shape: convert each once

    def instruction_type(self, inst: Any) -> Type:
        try:
            return self.type_of(inst.shape)
        except CompilerOptError as err:
            raise err.with_context(node=inst.name, field="shape")

    def type_of(self, shape: Any) -> Type:
        key = shape.SerializeToString(deterministic=True)
        cached = self.types.get(key)
        if cached is None:
            cached = self.types[key] = shape_to_type(shape)
        return cached

    def run(self) -> Graph:
        proto = self.proto
        if proto.entry_computation_id not in self.computations:
            raise CorruptModelError("the module names no entry computation")
        root = self.computation(self.computations[proto.entry_computation_id])
        root.name = proto.name
        root.meta["hlo.entry_name"] = self.computations[proto.entry_computation_id].name
        for computation in proto.computations:
            if computation.id != proto.entry_computation_id and computation.id not in self.owned:
                body = self.computation(computation)
                root.functions[(HLO_DOMAIN, computation.name, "")] = Function(HLO_DOMAIN, computation.name, body)
        shell = type(proto)()
        shell.CopyFrom(proto)
        del shell.computations[:]
        shell.ClearField("schedule")
        root.opset_imports = {HLO_DOMAIN: 1}
        root.meta["hlo.is_scheduled"] = bool(proto.schedule.sequences)
        root.model = ModelInfo(source_format="hlo", extra={"hlo.module": shell})
        return root

    def computation(self, computation: Any) -> Graph:
        graph = Graph(computation.name)
        shell = type(computation)()
        shell.CopyFrom(computation)
        del shell.instructions[:]
        graph.meta["hlo.computation"] = shell
        values: dict[int, Value] = {}
        params = sorted((i for i in computation.instructions if i.opcode == "parameter"), key=lambda i: i.parameter_number)
        for inst in params:
            value = Value(inst.name, self.instruction_type(inst))
            value.meta["hlo.instruction"] = inst
            _keep_opaque_shape(value, inst.shape)
            graph.add_input(value)
            values[inst.id] = value
        nodes: list[tuple[Any, Node]] = []
        for inst in self._ordered(computation):
            if inst.opcode == "parameter":
                continue
            node = Node(
                inst.opcode,
                (),
                outputs=[Value(inst.name, self.instruction_type(inst))],
                domain=HLO_DOMAIN,
                name=inst.name,
                kind=HLO_OP_KINDS.get(inst.opcode, OpKind.OTHER),
            )
            graph.append(node)
            values[inst.id] = node.outputs[0]
            _keep_opaque_shape(node.outputs[0], inst.shape)
            nodes.append((inst, node))
        for inst, node in nodes:
            try:
                node.replace_inputs(values[i] for i in inst.operand_ids)
            except KeyError as err:
                raise UndefinedValueError(f"operand id {err.args[0]} is not an instruction of {computation.name}", node=inst.name) from None
            self.attributes(inst, node)
        ids = {inst.id: inst.name for inst, _ in nodes}
        for inst, node in nodes:
            if inst.control_predecessor_ids:
                node.meta["control_predecessors"] = [ids.get(i, str(i)) for i in inst.control_predecessor_ids]
        if computation.root_id not in values:
            raise CorruptModelError(f"computation {computation.name} has no ROOT instruction")
        graph.add_output(values[computation.root_id])
        if not _is_sorted(graph):
            graph.sort()  # XLA text may list users before producers
        return graph

    def _ordered(self, computation: Any) -> list[Any]:
        sequence = self.schedule.get(computation.id)
        if not sequence:
            return list(computation.instructions)
        by_id = {inst.id: inst for inst in computation.instructions}
        ordered = [by_id[i] for i in sequence if i in by_id]
        seen = set(sequence)
        return ordered + [inst for inst in computation.instructions if inst.id not in seen]

    def attributes(self, inst: Any, node: Node) -> None:
        node.meta["hlo.instruction"] = inst
        for field, value in inst.ListFields():
            if field.name in _STRUCTURAL_FIELDS:
                continue
            node.set_attr(_field_attr(field, value))
        fields = inst.DESCRIPTOR.fields_by_name
        for name in _ALWAYS_PRESENT.get(inst.opcode, ()):
            if name not in node.attrs:  # proto3 omits zero values; these carry meaning when zero
                node.set_attr(_field_attr(fields[name], getattr(inst, name)))
        if inst.opcode == "constant" and inst.name in self.elided:
            node.set_attr(Attr("elided_literal", AttrKind.INT, 1))
            node.meta[UNKNOWN_VALUE] = True  # passes must not merge or fold it
        elif inst.opcode == "constant":
            tensor = _literal_tensor(inst.literal, node.outputs[0].type)
            if tensor is not None:
                node.set_attr(Attr("literal", AttrKind.TENSOR, tensor))
        if inst.called_computation_ids:
            names = [self.computations[c].name for c in inst.called_computation_ids]
            node.set_attr(Attr("called_computations", AttrKind.STRINGS, names))
            owned = [self.computation(self.computations[c]) for c in inst.called_computation_ids if c in self.owned]
            if owned:
                node.set_attr(Attr("calls", AttrKind.GRAPHS, owned))
        for key, text in inst.frontend_attributes.map.items():
            if not read_decision(node, key, text):
                node.metadata_props[key] = text
        if inst.HasField("metadata"):
            meta = {f.name: v for f, v in inst.metadata.ListFields() if isinstance(v, (str, int))}
            if meta:
                node.meta["hlo.metadata"] = meta


def _is_sorted(graph: Graph) -> bool:
    seen: set[Node] = set()
    for node in graph:
        for value in node.inputs:
            producer = value.producer if value is not None else None
            if producer is not None and producer not in seen:
                return False
        seen.add(node)
    return True


def _keep_opaque_shape(value: Value, shape: Any) -> None:
    """Types the IR cannot describe (e.g. XLA's BUFFER) keep their ShapeProto for export."""
    if isinstance(value.type, OpaqueType):
        value.meta["hlo.shape"] = shape


def _field_attr(field: Any, value: Any) -> Attr:
    """An instruction proto field -> Attr (messages stay protos, as OPAQUE values)."""
    repeated = field.label == field.LABEL_REPEATED
    if field.type == field.TYPE_MESSAGE:
        return Attr(field.name, AttrKind.OPAQUE, tuple(value) if repeated else value)
    if field.type == field.TYPE_ENUM:
        names = field.enum_type.values_by_number
        if repeated:
            return Attr(field.name, AttrKind.STRINGS, tuple(names[v].name if v in names else str(v) for v in value))
        return Attr(field.name, AttrKind.STRING, names[value].name if value in names else str(value))
    if field.type in (field.TYPE_STRING, field.TYPE_BYTES):
        return Attr(field.name, AttrKind.STRINGS if repeated else AttrKind.STRING, tuple(value) if repeated else value)
    if field.type in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
        return Attr(field.name, AttrKind.FLOATS if repeated else AttrKind.FLOAT, tuple(value) if repeated else float(value))
    return Attr(field.name, AttrKind.INTS if repeated else AttrKind.INT, tuple(int(v) for v in value) if repeated else int(value))
