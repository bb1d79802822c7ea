"""ONNX -> IR, lossless: opsets, subgraphs, local functions, initializers (inline, external,
sparse), value types with symbolic dims, metadata, and our decisions from node metadata_props.

Every file is untrusted: bytes are parsed with protobuf directly (no external data is read at
load time; it is validated with onnx's own path checks and read lazily), and each problem raises
a specific `ModelFormatError` naming the file, node and field.
"""

from __future__ import annotations

import logging
import os
from functools import cache
from typing import Any, Iterable

import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.dtypes import DType
from graph_ir.errors import (
    CompilerOptError,
    CorruptModelError,
    DuplicateNameError,
    EmptyModelError,
    InvalidShapeError,
    UndefinedValueError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from graph_ir.verify import _check_constant_type
from graph_ir.graph import Function, Graph, ModelInfo
from graph_ir.io.decisions import read_decision
from graph_ir.io.onnx_tensor import tensor_from_proto
from graph_ir.op_kinds import OpKind, onnx_op_kind
from graph_ir.types import MapType, OptionalType, SequenceType, Shape, SparseTensorType, TensorType, Type

__all__ = ["load_onnx", "import_onnx", "STANDARD_DOMAINS", "MIN_OPSET"]

logger = logging.getLogger(__name__)

# Domains whose ops onnx's schema registry knows, so unknown op names there are errors.
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")
# onnx's own shipped test models use opset 6, so the range starts where the schemas start.
MIN_OPSET = 1


def load_onnx(path: str | os.PathLike[str]) -> Graph:
    """Read an ONNX file. External data is validated now and read when a tensor is used."""
    from graph_ir.io import limits

    path = os.fspath(path)
    limits.check_file_size(path, text=False)
    with open(path, "rb") as handle:
        data = handle.read()
    if not data:
        raise EmptyModelError("file is empty", file=path)
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as err:
        raise CorruptModelError(f"not a valid ONNX protobuf (truncated or corrupt bytes): {err}", file=path) from None
    try:
        graph = import_onnx(model, base_dir=os.path.dirname(os.path.abspath(path)), source_path=path)
    except CompilerOptError as err:
        raise err.with_context(file=path)
    limits.check_graph_size(graph, file=path)
    return graph


def import_onnx(
    model: ModelProto | str | os.PathLike[str], *, base_dir: str | None = None, source_path: str | None = None
) -> Graph:
    """Convert a ModelProto (or a file path) into a Graph."""
    if not isinstance(model, ModelProto):
        return load_onnx(model)
    if not model.HasField("graph"):
        if model.ir_version == 0 and not model.opset_import:
            raise CorruptModelError("no ONNX model found (no graph, no ir_version: wrong or corrupt file)")
        raise EmptyModelError("the model has no graph", field="graph")
    if model.ir_version <= 0:
        raise CorruptModelError(f"invalid ir_version {model.ir_version}", field="ir_version")
    from graph_ir.io import limits

    limits.check("max_nodes", len(model.graph.node), "the model's node count")
    opsets = _read_opsets(model.opset_import, "opset_import")
    for field in ("producer_name", "producer_version", "domain", "doc_string"):
        _require_text(getattr(model, field), field, field=field)
    with gc_paused():
        importer = _Importer(model, opsets, base_dir)
        try:
            graph = importer.run()
        except UnicodeDecodeError as err:  # protobuf decodes a string field lazily
            raise CorruptModelError(f"a string field is not valid UTF-8 ({err.reason} at byte {err.start})") from None
    graph.model = ModelInfo(
        source_format="onnx",
        source_path=source_path,
        ir_version=model.ir_version,
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        domain=model.domain,
        model_version=model.model_version,
        doc_string=model.doc_string,
        metadata_props=_props(model.metadata_props, "metadata_props"),
        extra={
            "training_info": [t.SerializeToString() for t in model.training_info],
            "configuration": [c.SerializeToString() for c in model.configuration],
        },
    )
    return graph


@cache
def _max_opset(domain: str) -> int:
    if domain in ("", "ai.onnx"):
        return onnx.defs.onnx_opset_version()
    versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain]
    return max(versions, default=0)


def _read_opsets(entries: Iterable[onnx.OperatorSetIdProto], where: str) -> dict[str, int]:
    opsets: dict[str, int] = {}
    for entry in entries:
        domain = _require_text(entry.domain, "opset domain", field=where)
        if domain in opsets:
            raise DuplicateNameError(f"domain '{domain}' is imported twice", field=where)
        if domain in STANDARD_DOMAINS:
            newest = _max_opset(domain)
            if not MIN_OPSET <= entry.version <= max(newest, 1):
                raise UnsupportedOpsetError(
                    f"opset {entry.version} of domain '{domain or 'ai.onnx'}' is outside the supported range "
                    f"{MIN_OPSET}..{newest} (installed onnx {onnx.__version__})",
                    field=where,
                )
        opsets[domain] = entry.version
    return opsets


@cache
def _schema_exists(op_type: str, domain: str, version: int) -> bool:
    try:
        onnx.defs.get_schema(op_type, version, domain)
        return True
    except onnx.defs.SchemaError:
        return False


def _opset_for(domain: str, opsets: dict[str, int]) -> int | None:
    if domain in ("", "ai.onnx"):
        return opsets.get("", opsets.get("ai.onnx"))
    return opsets.get(domain)


def _element_type(code: int, where: str) -> DType:
    try:
        return DType.from_onnx(code)
    except ValueError:
        raise CorruptModelError(f"unknown element type code {code}", field=where) from None


def read_type(proto: TypeProto, where: str) -> Type | None:
    """TypeProto -> IR type (None when the proto leaves the type unset)."""
    which = proto.WhichOneof("value")
    if which == "tensor_type" or which == "sparse_tensor_type":
        tensor = getattr(proto, which)
        dtype = _element_type(tensor.elem_type, where) if tensor.elem_type else None
        shape = None
        if tensor.HasField("shape"):
            dims: list[int | str | None] = []
            for dim in tensor.shape.dim:
                kind = dim.WhichOneof("value")
                dims.append(dim.dim_value if kind == "dim_value" else dim.dim_param if kind == "dim_param" else None)
            try:
                shape = Shape(dims)
            except InvalidShapeError as err:
                raise InvalidShapeError(err.message, field=where) from None
        if which == "sparse_tensor_type":
            return SparseTensorType(dtype, shape)
        return TensorType(dtype, shape)
    if which == "sequence_type":
        return SequenceType(read_type(proto.sequence_type.elem_type, where))
    if which == "optional_type":
        return OptionalType(read_type(proto.optional_type.elem_type, where))
    if which == "map_type":
        return MapType(_element_type(proto.map_type.key_type, where), read_type(proto.map_type.value_type, where))
    return None


class _Importer:
    def __init__(self, model: ModelProto, opsets: dict[str, int], base_dir: str | None) -> None:
        self.model = model
        self.opsets = opsets
        self.base_dir = base_dir
        self.local_functions = {(f.domain, f.name) for f in model.functions}
        self._taken: set[str] | None = None  # every name in the model, built on first need

    def fresh_name(self, base: str) -> str:
        """A name for an unnamed node or output that no name anywhere in the model uses.

        Graph.unique_name only knows the names claimed so far; a node further down (or in a
        subgraph) may still carry the same name explicitly, which must not become a clash.
        """
        if self._taken is None:
            self._taken = _model_names(self.model)
        candidate, counter = base, 0
        while candidate in self._taken:
            candidate = f"{base}__{counter}"
            counter += 1
        self._taken.add(candidate)
        return candidate

    def run(self) -> Graph:
        graph = self.graph(self.model.graph, outer=None, opsets=self.opsets)
        graph.opset_imports = dict(self.opsets)
        for proto in self.model.functions:
            function = self.function(proto)
            if function.id in graph.functions:
                raise DuplicateNameError(f"local function {function.domain}::{function.name} is defined twice")
            graph.functions[function.id] = function
        return graph

    # -- graphs ---------------------------------------------------------------------------------
    def graph(self, proto: GraphProto, outer: Graph | None, opsets: dict[str, int], name: str | None = None) -> Graph:
        _require_text(proto.name, "graph name", field="name")
        _require_text(proto.doc_string, f"graph {proto.name!r} doc_string", field="doc_string")
        graph = Graph(name if name is not None else proto.name or "main", doc_string=proto.doc_string)
        if outer is not None:
            # A subgraph must know its enclosing scope while its nodes are built; `parent` is
            # set properly when the owning node takes the attribute.
            graph.meta["_outer"] = outer
        value_types = {vi.name: vi for vi in proto.value_info}
        for tensor_proto in proto.initializer:
            name_ = _require_text(tensor_proto.name, "initializer name", field="initializer")
            if not name_:
                raise DuplicateNameError("an initializer has an empty name", field="initializer")
            if name_ in graph._value_names:
                raise DuplicateNameError(f"initializer '{name_}' is defined twice", field=name_)
            graph.add_initializer(Value(name_, const=tensor_from_proto(tensor_proto, self.base_dir)))
        for sparse in proto.sparse_initializer:
            value = Value(_require_text(sparse.values.name, "sparse initializer name", field="sparse_initializer"), const=tensor_from_proto(sparse.values, self.base_dir))
            value.type = SparseTensorType(value.const.dtype, Shape(sparse.dims))
            value.meta["onnx.sparse"] = sparse
            graph.add_initializer(value)
        for info in proto.input:
            _require_text(info.name, "graph input name", field="input")
            existing = graph._value_names.get(info.name)
            value = existing if existing is not None else Value(info.name)
            if existing is None and self._lookup_outer(outer, info.name) is not None:
                raise DuplicateNameError(f"graph input '{info.name}' shadows a value of an enclosing graph", field=info.name)
            declared = read_type(info.type, info.name)
            if declared is not None:
                value.type = declared
                if value.const is not None:
                    # An initializer listed as an input/output: its declared type must fit its
                    # data (found by fuzzing: a graph that verify() refuses was handed out).
                    _check_constant_type(value)
            self._value_info_extras(value, info)
            if graph.has_input(value):
                raise DuplicateNameError(f"graph input '{info.name}' is listed twice", field=info.name)
            graph.add_input(value)

        # Outputs of all nodes first, so nodes listed out of order still resolve (sorted below).
        nodes: list[tuple[NodeProto, Node]] = []
        for index, node_proto in enumerate(proto.node):
            nodes.append((node_proto, self.node_shell(node_proto, index, graph, value_types, outer, opsets)))
        for node_proto, node in nodes:
            node.replace_inputs(self.resolve(graph, outer, name, node, i) for i, name in enumerate(node_proto.input))
        # Attributes (with subgraphs) last: their bodies may capture any value of this graph.
        for node_proto, node in nodes:
            for attr_proto in node_proto.attribute:
                node.set_attr(self.attr(attr_proto, graph, opsets, node.name))

        for info in proto.output:
            value = graph.lookup(info.name) or self._lookup_outer(outer, info.name)
            if value is None:
                raise UndefinedValueError(f"graph output '{info.name}' is not produced by any node", field=info.name)
            declared = read_type(info.type, info.name)
            if declared is not None:
                value.type = declared
                if value.const is not None:
                    # An initializer listed as an input/output: its declared type must fit its
                    # data (found by fuzzing: a graph that verify() refuses was handed out).
                    _check_constant_type(value)
            self._value_info_extras(value, info)
            graph.add_output(value)
        graph.metadata_props = _props(proto.metadata_props, "metadata_props")
        if proto.quantization_annotation:
            graph.meta["onnx.quantization_annotation"] = [q.SerializeToString() for q in proto.quantization_annotation]
        graph.meta.pop("_outer", None)
        self._ensure_order(graph)
        return graph

    @staticmethod
    def _value_info_extras(value: Value, info: onnx.ValueInfoProto) -> None:
        if info.doc_string:
            value.doc_string = _require_text(info.doc_string, f"doc_string of '{info.name}'", field=str(info.name))
        if info.metadata_props:
            value.meta["onnx.metadata_props"] = _props(info.metadata_props, str(info.name))

    @staticmethod
    def _lookup_outer(outer: Graph | None, name: str) -> Value | None:
        while outer is not None:
            value = outer._value_names.get(name)
            if value is not None:
                return value
            outer = outer.meta.get("_outer") or (outer.parent.graph if outer.parent is not None else None)
        return None

    def _ensure_order(self, graph: Graph) -> None:
        position = {node: i for i, node in enumerate(graph)}
        for node in graph:
            for value in node.inputs:
                producer = value.producer if value is not None else None
                if producer is not None and producer.graph is graph and position[producer] >= position[node]:
                    graph.sort()  # raises CycleError naming the cycle when there is one
                    logger.warning("graph %r was not topologically sorted; sorted it", graph.name)
                    return

    def resolve(self, graph: Graph, outer: Graph | None, name: str, node: Node, index: int) -> Value | None:
        if not name:
            return None
        value = graph._value_names.get(name) or self._lookup_outer(outer, name)
        if value is None:
            raise UndefinedValueError(
                f"input {index} '{name}' is not a graph input, initializer or output of any node", node=node.name,
                field=f"input[{index}]",
            )
        return value

    # -- nodes ----------------------------------------------------------------------------------
    def node_shell(
        self,
        proto: NodeProto,
        index: int,
        graph: Graph,
        value_types: dict[str, onnx.ValueInfoProto],
        outer: Graph | None,
        opsets: dict[str, int],
    ) -> Node:
        """The node with its outputs and metadata; inputs and attributes are attached later."""
        label = proto.name or f"{proto.op_type}_{index}"
        # protobuf (upb) hands back invalid UTF-8 in a string field as bytes, not str
        if not (
            proto.op_type.__class__ is str and proto.domain.__class__ is str and proto.name.__class__ is str
            and proto.overload.__class__ is str and proto.doc_string.__class__ is str
        ):  # the common case costs five class checks; the slow path names the bad field
            for field in ("op_type", "domain", "name", "overload", "doc_string"):
                _require_text(getattr(proto, field), field, node=str(label), field=field)
        for position, text in enumerate(proto.output):
            if not isinstance(text, str):
                raise CorruptModelError(f"output {position} name is not valid UTF-8: {text!r}", node=label, field="output")
        domain = proto.domain
        key = (domain, proto.op_type)
        if key in self.local_functions:
            kind = OpKind.CALL
        else:
            kind = onnx_op_kind(proto.op_type, domain)
            if domain in STANDARD_DOMAINS:
                version = _opset_for(domain, opsets)
                if version is None:
                    raise UnsupportedOpsetError(f"domain '{domain or 'ai.onnx'}' is used but not imported", node=label)
                if not _schema_exists(proto.op_type, domain, version):
                    raise UnsupportedOpError(
                        f"op '{proto.op_type}' does not exist in opset {version} of domain '{domain or 'ai.onnx'}'",
                        node=label,
                        field="op_type",
                    )
        outputs: list[Value] = []
        for name in proto.output:
            value = Value(name)
            if name:
                info = value_types.get(name)
                if info is not None:
                    value.type = read_type(info.type, name)
                    self._value_info_extras(value, info)
                if name in graph._value_names or self._lookup_outer(outer, name) is not None:
                    raise DuplicateNameError(f"output '{name}' is already defined", node=label, field="output")
            outputs.append(value)
        node = Node(proto.op_type, (), outputs=outputs, domain=domain, name=proto.name, kind=kind,
                    overload=proto.overload, doc_string=proto.doc_string)
        if not proto.name:
            node.name = self.fresh_name(f"{proto.op_type}_{index}")
        elif proto.name in graph._node_names:
            raise DuplicateNameError(f"node name '{proto.name}' is used twice", node=proto.name, field="name")
        # Empty output names are optional outputs that are not produced: the importer names them
        # (IR values need names) and the exporter writes them back as empty.
        for position, value in enumerate(outputs):
            if not value.name:
                value.name = self.fresh_name(f"{node.name}_{position}")
                value.meta["onnx.unnamed"] = True
        graph.append(node)
        self.read_metadata(proto, node)
        return node

    @staticmethod
    def read_metadata(proto: NodeProto, node: Node) -> None:
        if proto.metadata_props:
            # Read once, validated (invalid UTF-8 is rejected before use).
            for key, text in _props(proto.metadata_props, "metadata_props").items():
                if not read_decision(node, key, text):
                    node.metadata_props[key] = text
        if proto.device_configurations:
            node.meta["onnx.device_configurations"] = [c.SerializeToString() for c in proto.device_configurations]

    # -- attributes -----------------------------------------------------------------------------
    def attr(self, proto: AttributeProto, graph: Graph, opsets: dict[str, int], node_name: str) -> Attr:
        for field in ("name", "ref_attr_name", "doc_string"):
            _require_text(getattr(proto, field), f"attribute {field}", node=node_name, field=str(proto.name))
        kind = _ATTR_KINDS.get(proto.type)
        if kind is None:
            raise CorruptModelError(f"attribute '{proto.name}' has unknown type {proto.type}", node=node_name, field=proto.name)
        if proto.ref_attr_name:
            return Attr(proto.name, AttrKind.REF, (proto.ref_attr_name, kind), proto.doc_string)
        where = f"{node_name}.{proto.name}"
        value: Any
        if kind is AttrKind.FLOAT:
            value = proto.f
        elif kind is AttrKind.INT:
            value = proto.i
        elif kind is AttrKind.STRING:
            value = _text(proto.s)
        elif kind is AttrKind.TENSOR:
            value = tensor_from_proto(proto.t, self.base_dir)
        elif kind is AttrKind.GRAPH:
            value = self.graph(proto.g, graph, opsets)
        elif kind is AttrKind.SPARSE_TENSOR:
            value = proto.sparse_tensor
        elif kind is AttrKind.TYPE:
            value = read_type(proto.tp, where)
        elif kind is AttrKind.FLOATS:
            value = tuple(proto.floats)
        elif kind is AttrKind.INTS:
            value = tuple(proto.ints)
        elif kind is AttrKind.STRINGS:
            value = tuple(_text(s) for s in proto.strings)
        elif kind is AttrKind.TENSORS:
            value = tuple(tensor_from_proto(t, self.base_dir) for t in proto.tensors)
        elif kind is AttrKind.GRAPHS:
            value = tuple(self.graph(g, graph, opsets) for g in proto.graphs)
        elif kind is AttrKind.SPARSE_TENSORS:
            value = tuple(proto.sparse_tensors)
        else:  # TYPES
            value = tuple(read_type(t, where) for t in proto.type_protos)
        return Attr(proto.name, kind, value, proto.doc_string)

    # -- functions ------------------------------------------------------------------------------
    def function(self, proto: FunctionProto) -> Function:
        label = f"{proto.domain}::{proto.name}"
        for field in ("domain", "name", "overload", "doc_string"):
            _require_text(getattr(proto, field), f"function {field}", field=f"function {label}")
        for field in ("input", "output", "attribute"):
            for text in getattr(proto, field):
                _require_text(text, f"function {field} name", field=f"function {label}")
        opsets = _read_opsets(proto.opset_import, f"function {label} opset_import")
        body = GraphProto(name=proto.name, node=proto.node, value_info=proto.value_info, doc_string="")
        body.input.extend(onnx.ValueInfoProto(name=n) for n in proto.input)
        body.output.extend(onnx.ValueInfoProto(name=n) for n in proto.output)
        graph = self.graph(body, outer=None, opsets=opsets or self.opsets)
        graph.opset_imports = dict(opsets)
        defaults = {a.name: self.attr(a, graph, opsets, label) for a in proto.attribute_proto}
        return Function(
            domain=proto.domain,
            name=proto.name,
            graph=graph,
            overload=proto.overload,
            attributes=list(proto.attribute),
            attribute_defaults=defaults,
            opset_imports=opsets,
            doc_string=proto.doc_string,
            metadata_props=_props(proto.metadata_props, f"function {label}"),
        )


def _require_text(text: Any, what: str, *, node: str | None = None, field: str | None = None) -> str:
    """`text` itself; protobuf (upb) returns a string field holding invalid UTF-8 as bytes."""
    if text.__class__ is not str:
        raise CorruptModelError(f"{what} is not valid UTF-8: {text!r}", node=node, field=field)
    return text


def _props(entries: Iterable[onnx.StringStringEntryProto], where: str) -> dict[str, str]:
    return {
        _require_text(p.key, "metadata key", field=where): _require_text(p.value, f"metadata '{p.key}'", field=where)
        for p in entries
    }


def _model_names(model: ModelProto) -> set[str]:
    """Every node and value name in the model's graphs, subgraphs and functions."""
    names: set[str] = set()
    pending: list[Any] = [model.graph]
    for function in model.functions:
        names.update(function.input)
        names.update(function.output)
        pending.append(function)
    while pending:
        proto = pending.pop()
        if isinstance(proto, GraphProto):
            names.update(v.name for v in proto.input)
            names.update(t.name for t in proto.initializer)
            names.update(s.values.name for s in proto.sparse_initializer)
        for node in proto.node:
            names.add(node.name)
            names.update(node.output)
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    pending.append(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    pending.extend(attr.graphs)
    names.discard("")
    return names


def _text(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


_ATTR_KINDS = {
    AttributeProto.FLOAT: AttrKind.FLOAT,
    AttributeProto.INT: AttrKind.INT,
    AttributeProto.STRING: AttrKind.STRING,
    AttributeProto.TENSOR: AttrKind.TENSOR,
    AttributeProto.GRAPH: AttrKind.GRAPH,
    AttributeProto.SPARSE_TENSOR: AttrKind.SPARSE_TENSOR,
    AttributeProto.TYPE_PROTO: AttrKind.TYPE,
    AttributeProto.FLOATS: AttrKind.FLOATS,
    AttributeProto.INTS: AttrKind.INTS,
    AttributeProto.STRINGS: AttrKind.STRINGS,
    AttributeProto.TENSORS: AttrKind.TENSORS,
    AttributeProto.GRAPHS: AttrKind.GRAPHS,
    AttributeProto.SPARSE_TENSORS: AttrKind.SPARSE_TENSORS,
    AttributeProto.TYPE_PROTOS: AttrKind.TYPES,
}
_ONNX_ATTR_TYPES = {kind: code for code, kind in _ATTR_KINDS.items()}
