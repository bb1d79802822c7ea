"""IR -> ONNX: the inverse of onnx_import, plus our decisions in node metadata_props.

Fused groups (`node.fusion_group`, two or more nodes at one graph level) can be written as ONNX
local functions (`fused_groups_as_functions=True`): each group becomes a FunctionProto
`compiler_opt.fused::fused_<group>` and one call node in its place, which carries the group's
device (and priority) in metadata_props; the rules are in `graph_ir.io.apply_decisions`.
- Everything the group reads from outside is a function input: graph inputs, other nodes'
  outputs, values of enclosing graphs, values that members' If/Loop bodies capture (ONNX
  function bodies cannot see outer names), and initializers. Initializers stay initializers of
  the graph rather than becoming Constant nodes inside the body: weights are stored once, keep
  their external-data and 2 GB handling, and the call looks like the ops it replaces.
- Outputs are the members' values used outside the group or returned by the graph; the call's
  outputs keep their names, so the rest of the graph reads the same.
- Importing such a file gives call nodes (kind CALL) and `graph.functions`;
  `graph_ir.io.apply_decisions.inline_fused_functions(graph)` turns them back into the groups.
Default: `export_onnx` mirrors the IR one node for one node (shape-infer and profiling pair
nodes with their protos), so it writes functions only when asked; `save_onnx` writes what a
user keeps, so it writes them whenever a fused group exists (`None`: auto).

`save_onnx` writes atomically and switches to external data when the model would pass the 2 GB
protobuf limit (a single-file model that large cannot be read back).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import onnx
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto, helper

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.errors import ExportError
from graph_ir.graph import Function, Graph
from graph_ir.io.apply_decisions import FUSED_DOMAIN, has_fusion_groups, level_order, materialize_fusion_groups, outline_group
from graph_ir.io.decisions import decision_items
from graph_ir.io.domains import reject_domains
from graph_ir.io.onnx_tensor import tensor_to_proto
from graph_ir.op_kinds import OpKind
from graph_ir.types import MapType, OptionalType, SequenceType, SparseTensorType, TensorType, Type

__all__ = ["export_onnx", "save_onnx", "write_type", "PROTOBUF_LIMIT", "DEFAULT_OPSET"]

# protobuf refuses to serialise messages of 2 GiB or more; keep a margin for the graph itself.
PROTOBUF_LIMIT = 2**31 - 2**20
# Opset for graphs that were not imported from ONNX and name none (onnxruntime runs it).
DEFAULT_OPSET = 21
_DECISIONS_IR_VERSION = 10  # node metadata_props appeared in IR version 10


def export_onnx(
    graph: Graph,
    *,
    ir_version: int | None = None,
    fused_groups_as_functions: bool = False,
    weights_as_inputs_above: int | None = None,
    metadata: bool = True,
) -> ModelProto:
    """Build a ModelProto for `graph` (a root graph); with `fused_groups_as_functions`, each
    fused group becomes a local function and a call (module docstring). `graph` is not changed.

    `weights_as_inputs_above` is for analyses that read no weight data (shape inference): the
    root graph's initializers with more elements are written as typed graph inputs without
    their data, which saves copying every weight into the proto; `metadata=False` leaves out
    the nodes' and values' metadata_props (an exporter's stack traces, decisions)."""
    if graph.parent is not None:
        raise ExportError(f"graph {graph.name!r} is a subgraph; export its root graph")
    reject_domains(graph, "ONNX")
    fused: list[Function] = []
    if fused_groups_as_functions and has_fusion_groups(graph):
        graph, fused = _groups_to_functions(graph)
    info = graph.model
    opsets = dict(graph.opset_imports)
    if not opsets or ("" not in opsets and "ai.onnx" not in opsets and any(n.domain in ("", "ai.onnx") for n in graph.all_nodes())):
        opsets.setdefault("", DEFAULT_OPSET)
    for function in fused:
        function.opset_imports = dict(opsets)  # the model's: a function body must agree with it
    exporter = _Exporter(metadata)
    model = ModelProto()
    exporter.graph(graph, model.graph, weights_as_inputs_above)  # filled in place: no second copy of the tensors
    opset_protos = [helper.make_opsetid(d, v) for d, v in opsets.items()]
    model.opset_import.extend(opset_protos)
    model.functions.extend(exporter.function(f) for f in graph.functions.values())
    if info is not None:
        for key, text in _present(
            producer_name=info.producer_name, producer_version=info.producer_version, domain=info.domain, doc_string=info.doc_string
        ).items():
            setattr(model, key, text)
        if info.model_version:
            model.model_version = info.model_version
        for key, value in info.metadata_props.items():
            model.metadata_props.add(key=key, value=value)
        for raw in info.extra.get("training_info", []):
            model.training_info.add().ParseFromString(raw)
        for raw in info.extra.get("configuration", []):
            model.configuration.add().ParseFromString(raw)
    version = ir_version or (info.ir_version if info is not None and info.ir_version else None)
    if version is None:
        version = helper.find_min_ir_version_for(opset_protos, ignore_unknown=True)
        version = max(version, 7)
    if exporter.wrote_node_metadata:
        version = max(version, _DECISIONS_IR_VERSION)
    model.ir_version = version
    return model


def save_onnx(
    graph: Graph,
    path: str | os.PathLike[str],
    *,
    external_data_threshold: int = PROTOBUF_LIMIT,
    fused_groups_as_functions: bool | None = None,
) -> None:
    """Write `graph` to `path` atomically; above `external_data_threshold` bytes the tensors of
    1 KiB or more go to `<name>.data` beside it. Fused groups become local functions unless
    `fused_groups_as_functions` is False (None: whenever the graph has a fused group).

    Both files are written in a staging folder first, then renamed into place: the data, then
    the model. If the model's rename fails, the previous data file is put back, so an existing
    model and its data are either both old or both new.
    """
    target = Path(path)
    model = export_onnx(graph, fused_groups_as_functions=fused_groups_as_functions is not False)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        staged = staging / target.name
        data_name = f"{target.name}.data"
        # The tensors' sizes come from dtypes and shapes; model.ByteSize() would serialise the
        # whole model to count it (upb), costing several times its size in memory.
        serialized = None
        if _constant_bytes(graph) < external_data_threshold:
            serialized = model.SerializeToString()  # what an inline save writes anyway
            if len(serialized) >= external_data_threshold:  # the graph itself is that large
                serialized = None
        if serialized is None:
            onnx.save_model(
                model, staged, save_as_external_data=True, all_tensors_to_one_file=True, location=data_name, size_threshold=1024
            )
        else:
            with open(staged, "wb") as handle:
                handle.write(serialized)
        if not (staging / data_name).exists():  # inline, or every tensor under 1 KiB
            os.replace(staged, target)
            return
        data_target = target.parent / data_name
        backup = staging / f"{data_name}.previous"
        had_previous = _keep_previous(data_target, backup)
        os.replace(staging / data_name, data_target)
        try:
            os.replace(staged, target)
        except BaseException:
            if had_previous:
                os.replace(backup, data_target)
            else:
                data_target.unlink(missing_ok=True)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _groups_to_functions(graph: Graph) -> tuple[Graph, list[Function]]:
    """A copy of `graph` whose fused groups are calls to new local functions."""
    graph = graph.clone()
    groups = materialize_fusion_groups(graph)
    graph.opset_imports.setdefault(FUSED_DOMAIN, 1)  # a call's domain must be imported
    made: list[Function] = []
    by_level: dict[Graph, list] = {}
    for group in groups:
        by_level.setdefault(group.graph, []).append(group)
    for level, level_groups in by_level.items():
        order = level_order(level, level_groups)
        owners = [n for n in level if any(True for _ in n.subgraphs())]  # scanned once per level
        calls = {}
        for group in level_groups:
            name = group.label
            while (FUSED_DOMAIN, name, "") in graph.functions:
                name += "_"
            for node in group.nodes:
                if any(a.kind is AttrKind.REF for a in node.attrs.values()):
                    raise ExportError("a node with attribute references cannot be outlined into a function", node=node.name)
            outlined = outline_group(group, name, owners=owners)
            call = Node(name, outlined.inputs, outputs=outlined.outputs, domain=FUSED_DOMAIN, kind=OpKind.CALL)
            call.name = level.unique_name(name)
            for stand_in, inner in zip(outlined.outputs, outlined.inner_outputs):
                stand_in.name = inner.name  # the names the rest of the graph used; the body is its own scope
                stand_in.meta = {k: v for k, v in inner.meta.items() if k == "onnx.metadata_props"}
            call.device, call.priority, call.fusion_group = group.device, group.priority, group.group_id
            level.append(call)
            calls[group] = call
            doc = f"fusion group {group.group_id}: {len(group.nodes)} nodes" + (f" on {group.device}" if group.device else "")
            function = Function(FUSED_DOMAIN, name, outlined.body, doc_string=doc)
            graph.functions[function.id] = function
            made.append(function)
        level.reorder([calls[u] if u in calls else u for u in order])
    return graph, made


def _constant_bytes(graph: Graph) -> int:
    """Bytes of every constant tensor (initializers and tensor attributes, at every depth)."""
    total = 0
    for root in (graph, *(f.graph for f in graph.functions.values())):
        for each in (root, *root.subgraphs()):
            total += sum(v.const.nbytes for v in each._initializers.values() if v.const is not None)
            for node in each:
                for attr in node.attrs.values():
                    if attr.kind is AttrKind.TENSOR:
                        total += attr.value.nbytes
                    elif attr.kind is AttrKind.TENSORS:
                        total += sum(t.nbytes for t in attr.value)
    return total


def _keep_previous(path: Path, backup: Path) -> bool:
    """Hard-link an existing file to `backup` (so it can be restored); False when there is none."""
    try:
        os.link(path, backup)
    except FileNotFoundError:
        return False
    except OSError:  # no hard links on this file system: keep a copy instead
        shutil.copy2(path, backup)
    return True


def write_type(value_type: Type | None, where: str) -> TypeProto:
    proto = TypeProto()
    if value_type is None:
        return proto
    if isinstance(value_type, (TensorType, SparseTensorType)):
        tensor = proto.sparse_tensor_type if isinstance(value_type, SparseTensorType) else proto.tensor_type
        if value_type.dtype is not None:
            if value_type.dtype.onnx_code is None:
                raise ExportError(f"element type {value_type.dtype} has no ONNX equivalent", field=where)
            tensor.elem_type = value_type.dtype.onnx_code
        if value_type.shape is not None:
            shape = tensor.shape
            shape.SetInParent()  # a rank-0 shape must still be present
            for dim in value_type.shape:
                entry = shape.dim.add()
                if isinstance(dim, int):
                    entry.dim_value = dim
                elif isinstance(dim, str):
                    entry.dim_param = dim
        return proto
    if isinstance(value_type, SequenceType):
        proto.sequence_type.elem_type.CopyFrom(write_type(value_type.element, where))
        return proto
    if isinstance(value_type, OptionalType):
        proto.optional_type.elem_type.CopyFrom(write_type(value_type.element, where))
        return proto
    if isinstance(value_type, MapType):
        if value_type.key.onnx_code is None:
            raise ExportError(f"map key type {value_type.key} has no ONNX equivalent", field=where)
        proto.map_type.key_type = value_type.key.onnx_code
        proto.map_type.value_type.CopyFrom(write_type(value_type.value, where))
        return proto
    raise ExportError(f"type {value_type} has no ONNX equivalent", field=where)


class _Exporter:
    def __init__(self, metadata: bool = True) -> None:
        self.wrote_node_metadata = False
        self.metadata = metadata

    def value_info(self, value: Value) -> onnx.ValueInfoProto:
        info = onnx.ValueInfoProto(**_present(name=value.name, doc_string=value.doc_string))
        info.type.CopyFrom(write_type(value.type, value.name))
        if self.metadata:
            for key, text in value.meta.get("onnx.metadata_props", {}).items():
                info.metadata_props.add(key=key, value=text)
        return info

    def graph(self, graph: Graph, proto: GraphProto | None = None, weights_as_inputs_above: int | None = None) -> GraphProto:
        proto = proto if proto is not None else GraphProto()
        if graph.name:
            proto.name = graph.name
        if graph.doc_string:
            proto.doc_string = graph.doc_string
        weights_as_inputs = []
        for value in graph._initializers.values():
            sparse = value.meta.get("onnx.sparse")
            if sparse is not None:
                entry = proto.sparse_initializer.add()
                entry.CopyFrom(sparse)
                entry.values.name = value.name
            elif weights_as_inputs_above is not None and value.const.size > weights_as_inputs_above:
                weights_as_inputs.append(value)
            else:
                tensor_to_proto(value.const, value.name, proto.initializer.add())
        proto.input.extend(self.value_info(v) for v in graph._inputs)
        listed = set(graph._inputs)
        for value in weights_as_inputs:
            if value not in listed:
                info = proto.input.add(name=value.name)
                info.type.CopyFrom(write_type(TensorType(value.const.dtype, value.const.shape), value.name))
        outputs = set()
        for value in graph._outputs:
            proto.output.append(self.value_info(value))
            outputs.add(id(value))
        for node in graph._nodes:
            proto.node.append(self.node(node))
            for value in node.outputs:
                if value.type is not None and id(value) not in outputs and not value.meta.get("onnx.unnamed"):
                    proto.value_info.append(self.value_info(value))
        for key, text in graph.metadata_props.items():
            proto.metadata_props.add(key=key, value=text)
        for raw in graph.meta.get("onnx.quantization_annotation", []):
            proto.quantization_annotation.add().ParseFromString(raw)
        return proto

    def node(self, node: Node) -> NodeProto:
        proto = NodeProto(
            **_present(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload, doc_string=node.doc_string)
        )
        proto.input.extend("" if v is None else v.name for v in node.inputs)
        proto.output.extend("" if v.meta.get("onnx.unnamed") else v.name for v in node.outputs)
        for attr in node.attrs.values():
            proto.attribute.append(self.attr(attr, node.name))
        if not self.metadata:
            return proto
        for key, text in node.metadata_props.items():
            proto.metadata_props.add(key=key, value=text)
        decisions = decision_items(node)
        for key, text in decisions:
            proto.metadata_props.add(key=key, value=text)
        if node.metadata_props or decisions:
            self.wrote_node_metadata = True
        for raw in node.meta.get("onnx.device_configurations", []):
            proto.device_configurations.add().ParseFromString(raw)
        return proto

    def attr(self, attr: Attr, where: str) -> AttributeProto:
        proto = AttributeProto(**_present(name=attr.name, doc_string=attr.doc_string))
        value: Any = attr.value
        kind = attr.kind
        if kind is AttrKind.REF:
            ref_name, ref_kind = value
            proto.ref_attr_name = ref_name
            proto.type = _attr_type(ref_kind, attr.name, where)
            return proto
        proto.type = _attr_type(kind, attr.name, where)
        if kind is AttrKind.FLOAT:
            proto.f = value
        elif kind is AttrKind.INT:
            proto.i = value
        elif kind is AttrKind.STRING:
            proto.s = _bytes(value)
        elif kind is AttrKind.TENSOR:
            tensor_to_proto(value, value.proto.name if hasattr(value, "proto") else "", proto.t)
        elif kind is AttrKind.GRAPH:
            self.graph(value, proto.g)
        elif kind is AttrKind.SPARSE_TENSOR:
            proto.sparse_tensor.CopyFrom(value)
        elif kind is AttrKind.TYPE:
            proto.tp.CopyFrom(write_type(value, f"{where}.{attr.name}"))
        elif kind is AttrKind.FLOATS:
            proto.floats.extend(value)
        elif kind is AttrKind.INTS:
            proto.ints.extend(value)
        elif kind is AttrKind.STRINGS:
            proto.strings.extend(_bytes(v) for v in value)
        elif kind is AttrKind.TENSORS:
            for tensor in value:
                tensor_to_proto(tensor, tensor.proto.name if hasattr(tensor, "proto") else "", proto.tensors.add())
        elif kind is AttrKind.GRAPHS:
            for subgraph in value:
                self.graph(subgraph, proto.graphs.add())
        elif kind is AttrKind.SPARSE_TENSORS:
            proto.sparse_tensors.extend(value)
        elif kind is AttrKind.TYPES:
            proto.type_protos.extend(write_type(t, f"{where}.{attr.name}") for t in value)
        return proto

    def function(self, function: Function) -> FunctionProto:
        body = self.graph(function.graph)
        proto = FunctionProto(
            **_present(name=function.name, domain=function.domain, overload=function.overload, doc_string=function.doc_string)
        )
        proto.input.extend(v.name for v in function.graph._inputs)
        proto.output.extend(v.name for v in function.graph._outputs)
        proto.attribute.extend(function.attributes)
        proto.attribute_proto.extend(self.attr(a, function.name) for a in function.attribute_defaults.values())
        proto.node.extend(body.node)
        proto.value_info.extend(body.value_info)
        proto.opset_import.extend(helper.make_opsetid(d, v) for d, v in function.opset_imports.items())
        for key, text in function.metadata_props.items():
            proto.metadata_props.add(key=key, value=text)
        return proto


def _present(**fields: str) -> dict[str, str]:
    """The non-empty string fields: an empty one would still be marked present (proto2) and
    make the export differ byte-wise from the original that never set it."""
    return {key: text for key, text in fields.items() if text}


def _attr_type(kind: AttrKind, name: str, where: str) -> int:
    from graph_ir.io.onnx_import import _ONNX_ATTR_TYPES

    code = _ONNX_ATTR_TYPES.get(kind)
    if code is None:
        raise ExportError(f"attribute '{name}' of kind {kind.value} has no ONNX equivalent", node=where, field=name)
    return code


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")
