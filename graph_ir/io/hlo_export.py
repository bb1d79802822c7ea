"""IR -> XLA HLO: an `HloModuleProto` rebuilt from the graph, printed by XLA's own printer.

Each node starts from the instruction proto it was imported from (so attributes the IR does not
model survive) and gets its name, opcode, shape, operands and called computations from the IR;
nodes made by passes are built from their attributes (names of instruction proto fields).
Decisions go into frontend attributes (`compiler_opt.device`, ...), and the node order becomes
the module's schedule when the source was scheduled.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from graph_ir.attrs import AttrKind
from graph_ir.core import Node, Value
from graph_ir.errors import ExportError
from graph_ir.graph import Graph
from graph_ir.io.atomic import atomic_path
from graph_ir.io.decisions import decision_items
from graph_ir.io.domains import require_domains
from graph_ir.io.hlo_ops import HLO_DOMAIN
from graph_ir.io.xla_bridge import hlo_module_proto_class, hlo_proto_to_text
from graph_ir.types import OpaqueType, TensorType, TokenType, TupleType, Type

__all__ = ["export_hlo_proto", "export_hlo_text", "save_hlo"]


def save_hlo(graph: Graph, path: str | os.PathLike[str]) -> None:
    text = export_hlo_text(graph)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def export_hlo_text(graph: Graph) -> str:
    elided = {n.name for n in _all_nodes(graph) if n.meta.get("unknown_value")}
    return hlo_proto_to_text(export_hlo_proto(graph), elided=elided)


def _all_nodes(graph: Graph) -> Iterator[Node]:
    yield from graph.all_nodes()
    for function in graph.functions.values():
        yield from function.graph.all_nodes()


def export_hlo_proto(graph: Graph) -> Any:
    if graph.parent is not None:
        raise ExportError(f"graph {graph.name!r} is a subgraph; export its root graph")
    require_domains(graph, {HLO_DOMAIN}, "HLO")
    module_cls = hlo_module_proto_class()
    module = module_cls()
    shell = graph.model.extra.get("hlo.module") if graph.model is not None else None
    if shell is not None:
        module.CopyFrom(shell)
    module.name = graph.name
    return _Exporter(module, graph).run()


class _Exporter:
    def __init__(self, module: Any, root: Graph) -> None:
        self.module = module
        self.root = root
        self.next_id = 1
        self.computation_ids: dict[str, int] = {}
        descriptor = module.DESCRIPTOR.file.pool
        self.primitive = {v.name: v.number for v in descriptor.FindEnumTypeByName("xla.PrimitiveType").values}
        self.scheduled = bool(root.meta.get("hlo.is_scheduled"))

    def fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def run(self) -> Any:
        # Callees first (XLA wants post order): functions, then the entry with its subgraphs.
        for function in self.root.functions.values():
            self.computation(function.graph, function.name)
        entry_name = self.root.meta.get("hlo.entry_name", self.root.name)
        entry_id = self.computation(self.root, entry_name)
        self.module.entry_computation_id = entry_id
        self.module.entry_computation_name = entry_name
        return self.module

    def computation(self, graph: Graph, name: str) -> int:
        for node in graph:
            for subgraph in _owned_subgraphs(node):
                self.computation(subgraph, subgraph.name)
        proto = self.module.computations.add()
        shell = graph.meta.get("hlo.computation")
        if shell is not None:
            proto.CopyFrom(shell)
        proto.name = name
        proto.id = self.fresh_id()
        self.computation_ids[name] = proto.id
        ids: dict[int, int] = {}
        order: list[int] = []
        for number, value in enumerate(graph.inputs):
            inst = proto.instructions.add()
            source = value.meta.get("hlo.instruction")
            if source is not None:
                inst.CopyFrom(source)
            inst.name = value.name
            inst.opcode = "parameter"
            inst.parameter_number = number
            self.write_value_shape(inst.shape, value)
            inst.id = self.fresh_id()
            ids[id(value)] = inst.id
            order.append(inst.id)
        by_name: dict[str, int] = {}
        for node in graph:
            inst = proto.instructions.add()
            self.instruction(inst, node, ids)
            ids[id(node.outputs[0])] = inst.id
            by_name[node.name] = inst.id
            order.append(inst.id)
        for node, inst in zip(graph, list(proto.instructions)[len(graph.inputs) :]):
            del inst.control_predecessor_ids[:]
            inst.control_predecessor_ids.extend(by_name[n] for n in node.meta.get("hlo.control_predecessors", []) if n in by_name)
        if len(graph.outputs) != 1:
            raise ExportError(f"computation {name!r} must have exactly one output (HLO has one ROOT)")
        root = graph.outputs[0]
        if id(root) not in ids:
            raise ExportError(f"computation {name!r} returns %{root.name}, which it does not define")
        proto.root_id = ids[id(root)]
        if self.scheduled:
            self.module.schedule.sequences[proto.id].instruction_ids.extend(order)
        return proto.id

    def instruction(self, inst: Any, node: Node, ids: dict[int, int]) -> None:
        source = node.meta.get("hlo.instruction")
        if source is not None:
            inst.CopyFrom(source)
        else:
            self.fields_from_attrs(inst, node)
        if len(node.outputs) != 1:
            raise ExportError("HLO instructions have exactly one result", node=node.name)
        inst.name = node.name
        inst.opcode = node.op_type
        self.write_value_shape(inst.shape, node.outputs[0])
        inst.id = self.fresh_id()
        del inst.operand_ids[:]
        for index, value in enumerate(node.inputs):
            if value is None or id(value) not in ids:
                raise ExportError(f"operand {index} is not defined in this computation", node=node.name)
            inst.operand_ids.append(ids[id(value)])
        del inst.called_computation_ids[:]
        for callee in node.attr("called_computations", ()):
            if callee not in self.computation_ids:
                raise ExportError(f"calls computation {callee!r}, which the module does not define", node=node.name)
            inst.called_computation_ids.append(self.computation_ids[callee])
        attributes = inst.frontend_attributes.map
        attributes.clear()
        attributes.update(node.metadata_props)
        for key, text in decision_items(node):
            attributes[key] = text

    def fields_from_attrs(self, inst: Any, node: Node) -> None:
        fields = inst.DESCRIPTOR.fields_by_name
        for attr in node.attrs.values():
            field = fields.get(attr.name)
            if field is None or attr.kind in (AttrKind.GRAPH, AttrKind.GRAPHS, AttrKind.TENSOR):
                continue
            if field.type == field.TYPE_MESSAGE:
                getattr(inst, attr.name).CopyFrom(attr.value) if field.label != field.LABEL_REPEATED else None
            elif field.label == field.LABEL_REPEATED:
                getattr(inst, attr.name).extend(attr.value)
            else:
                setattr(inst, attr.name, attr.value)

    def write_value_shape(self, shape: Any, value: Value) -> None:
        kept = value.meta.get("hlo.shape")
        if kept is not None and isinstance(value.type, OpaqueType):
            shape.CopyFrom(kept)
        else:
            self.write_shape(shape, value.type, value.name)

    def write_shape(self, shape: Any, value_type: Type | None, where: str) -> None:
        shape.Clear()
        if isinstance(value_type, TupleType):
            shape.element_type = self.primitive["TUPLE"]
            for element in value_type.elements:
                self.write_shape(shape.tuple_shapes.add(), element, where)
            return
        if isinstance(value_type, TokenType):
            shape.element_type = self.primitive["TOKEN"]
            return
        if isinstance(value_type, OpaqueType):
            shape.element_type = self.primitive.get(value_type.name.upper(), self.primitive["OPAQUE_TYPE"])
            return
        if not isinstance(value_type, TensorType) or value_type.dtype is None or value_type.shape is None:
            raise ExportError(f"%{where} needs a known element type and shape to be written as HLO")
        name = value_type.dtype.xla_name
        if name is None:
            raise ExportError(f"element type {value_type.dtype} has no XLA equivalent", field=where)
        shape.element_type = self.primitive[name]
        for dim in value_type.shape:
            if isinstance(dim, int):
                shape.dimensions.append(dim)
                shape.is_dynamic_dimension.append(False)
            elif isinstance(dim, str) and dim.startswith("<="):
                shape.dimensions.append(int(dim[2:]))
                shape.is_dynamic_dimension.append(True)
            else:
                raise ExportError(f"dim {dim!r} of %{where} is not static; HLO needs static or bounded dims")
        rank = len(value_type.shape)
        shape.layout.minor_to_major.extend(value_type.layout or range(rank - 1, -1, -1))


def _owned_subgraphs(node: Node) -> Iterator[Graph]:
    attr = node.attrs.get("calls")
    if attr is not None:
        yield from attr.graphs()
