"""IR -> XLA HLO: an `HloModuleProto` rebuilt from the graph, printed by XLA's own printer.

Each node starts from the instruction proto it was imported from (so attributes the IR does not
model survive) and gets its name, opcode, shape, operands and called computations from the IR;
nodes made by passes are built from their attributes (names of instruction proto fields).
Decisions go into frontend attributes (`compiler_opt.device`, ...), and the node order becomes
the module's schedule when the source was scheduled.

`materialize_fusions=True` writes the fused groups that our passes chose (`node.fusion_group`,
two or more nodes of one computation; rules in `graph_ir.io.apply_decisions`) as XLA fusions:
per group a fused computation (one parameter per outside operand, the group's instructions, ROOT
= the group's one result, or a tuple of several that get-tuple-elements unpack outside) called
by a `fusion` instruction that takes the group's place. Its kind follows the XLA backend named
by `fusion_kinds`, because the backends' emitters disagree and reject each other's kinds:
"cpu" (default; what this machine compiles and the tests run): kLoop for every group, since
XLA:CPU emits reductions, dots and convolutions inside loop fusions and rejects kInput (its
kOutput is only the dot + addend library kernel, which we do not build); XLA:CPU also compiles
no multi-output fusion (it aborts), so a group with several results is written as
single-result fusions (`apply_decisions.single_result_parts`); "gpu": kInput when a
reduction is fused (XLA:GPU's reduction emitter), kOutput when a dot or convolution is (the
output-fusion meaning of the kind), kLoop otherwise (parsed and verified here, not compiled);
"call": each group outlined exactly as for "cpu" (single-result parts, the same parameters and
roots) but called by a `call` instruction, which XLA inlines before its own passes; fusions the
module already had are written as calls too. That is the
form our numerical checks execute: jaxlib compiles only MLIR, and its HLO -> MHLO conversion
drops the layouts of fused computations, so XLA:CPU aborts the process (`has_layout()` CHECKs
in its fusion emitter) on a pre-made fusion holding a reshape or a select; no jaxlib entry point
compiles an `HloModuleProto` with its layouts. XLA's own hook path (`integrations.xla_transform`)
hands the proto over with layouts and compiles real fusions.

`schedule` (default: the same as `materialize_fusions`) writes the module as
scheduled when priorities are set: each computation that is not a fusion body runs its
instructions as a list schedule by `node.priority` (higher first, ties by the current order,
dependencies respected; a fusion ranks by its members' highest priority). Both work on a copy;
the graph is not changed, and both are off by default so that the proto mirrors the IR (the
profiler and the StableHLO exporter rely on that).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import UNKNOWN_VALUE, Node, Value
from graph_ir.errors import ExportError
from graph_ir.graph import Graph
from graph_ir.io.apply_decisions import (
    FusionGroup,
    has_fusion_groups,
    level_order,
    materialize_fusion_groups,
    outline_group,
    single_result_parts,
)
from graph_ir.io.atomic import atomic_path
from graph_ir.io.decisions import decision_items
from graph_ir.io.domains import require_domains
from graph_ir.io.hlo_ops import HLO_DOMAIN
from graph_ir.io.xla_bridge import hlo_module_proto_class, hlo_proto_to_text
from graph_ir.op_kinds import SIDE_EFFECT_KINDS, OpKind
from graph_ir.types import OpaqueType, TensorType, TokenType, TupleType, Type

__all__ = ["FUSED_GROUP_KEY", "export_hlo_proto", "export_hlo_text", "save_hlo"]


# Instructions that XLA never puts inside a fusion: control flow, calls, fusions themselves.
_NOT_FUSIBLE = frozenset({"while", "conditional", "call", "fusion", "custom-call", "async-start", "async-update", "async-done"})


def save_hlo(
    graph: Graph, path: str | os.PathLike[str], *, materialize_fusions: bool | None = None, schedule: bool | None = None
) -> None:
    """Write HLO text with the decisions applied: fused groups become fusions and priorities a
    schedule, unless told False (None: whenever the graph has fused groups / priorities)."""
    fuse = materialize_fusions is not False and has_fusion_groups(graph)
    by_priority = schedule is not False and any(n.priority is not None for n in graph.all_nodes())
    text = export_hlo_text(graph, materialize_fusions=fuse, schedule=by_priority)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def export_hlo_text(
    graph: Graph, *, materialize_fusions: bool = False, schedule: bool | None = None, fusion_kinds: str = "cpu"
) -> str:
    elided = {n.name for n in _all_nodes(graph) if n.meta.get(UNKNOWN_VALUE)}
    proto = export_hlo_proto(graph, materialize_fusions=materialize_fusions, schedule=schedule, fusion_kinds=fusion_kinds)
    return hlo_proto_to_text(proto, elided=elided)


def _all_nodes(graph: Graph) -> Iterator[Node]:
    yield from graph.all_nodes()
    for function in graph.functions.values():
        yield from function.graph.all_nodes()


def export_hlo_proto(
    graph: Graph, *, materialize_fusions: bool = False, schedule: bool | None = None, fusion_kinds: str = "cpu"
) -> Any:
    """An `HloModuleProto` for `graph`; fused groups and priorities applied on request (module docstring)."""
    if graph.parent is not None:
        raise ExportError(f"graph {graph.name!r} is a subgraph; export its root graph")
    if fusion_kinds not in _FUSION_KINDS:
        raise ExportError(f"fusion_kinds must be one of {', '.join(_FUSION_KINDS)}, got {fusion_kinds!r}")
    require_domains(graph, {HLO_DOMAIN}, "HLO")
    schedule = materialize_fusions if schedule is None else schedule
    fuse = materialize_fusions and has_fusion_groups(graph)
    by_priority = schedule and any(n.priority is not None for n in graph.all_nodes())
    if fuse or by_priority:
        graph = _apply_decisions(graph, fuse=fuse, by_priority=by_priority, fusion_kinds=fusion_kinds)
    module_cls = hlo_module_proto_class()
    module = module_cls()
    shell = graph.model.extra.get("hlo.module") if graph.model is not None else None
    if shell is not None:
        module.CopyFrom(shell)
    module.name = graph.name
    return _Exporter(module, graph, fusions_as_calls=fusion_kinds == "call").run()


class _Exporter:
    def __init__(self, module: Any, root: Graph, *, fusions_as_calls: bool = False) -> None:
        self.module = module
        self.fusions_as_calls = fusions_as_calls  # the "call" kind: the module's own fusions too
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
            inst.control_predecessor_ids.extend(by_name[n] for n in node.meta.get("control_predecessors", []) if n in by_name)
        if len(graph.outputs) != 1:
            raise ExportError(f"computation {name!r} must have exactly one output (HLO has one ROOT)")
        root = graph.outputs[0]
        if id(root) not in ids:
            raise ExportError(f"computation {name!r} returns %{root.name}, which it does not define")
        proto.root_id = ids[id(root)]
        # XLA schedules non-fusion computations only; a fusion body written as a call's callee is one
        if self.scheduled and (self.fusions_as_calls or not _is_fusion_body(graph)):
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
        if self.fusions_as_calls and inst.opcode == "fusion":
            inst.opcode = "call"
            inst.ClearField("fusion_kind")
            inst.ClearField("backend_config")
        if self.fusions_as_calls and inst.opcode == "bitcast" and _row_major(node.inputs[0]) and _row_major(node.outputs[0]):
            # Between row-major layouts a bitcast is a reshape; jaxlib's MLIR path, which the
            # "call" form is for, loses the layouts a bitcast's meaning depends on.
            inst.opcode = "reshape"
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


def _row_major(value: Value | None) -> bool:
    value_type = None if value is None else value.type
    if not isinstance(value_type, TensorType) or value_type.shape is None:
        return False
    return value_type.layout is None or tuple(value_type.layout) == tuple(range(len(value_type.shape) - 1, -1, -1))


def _is_fusion_body(graph: Graph) -> bool:
    return graph.parent is not None and graph.parent.op_type == "fusion"


def _apply_decisions(graph: Graph, *, fuse: bool, by_priority: bool, fusion_kinds: str) -> Graph:
    """A copy of `graph` with fused groups as fusions and, with `by_priority`, scheduled."""
    graph = graph.clone()
    groups = materialize_fusion_groups(graph) if fuse else []
    if fusion_kinds in ("cpu", "call"):
        groups = [part for group in groups for part in single_result_parts(group)]
    names = _NameSource(graph)
    by_level: dict[Graph, list[FusionGroup]] = {}
    for group in groups:
        by_level.setdefault(group.graph, []).append(group)
    levels = [graph, *(g for g in graph.subgraphs() if not _is_fusion_body(g))] if by_priority else list(by_level)
    for level in levels:
        level_groups = by_level.get(level, [])
        order = level_order(level, level_groups, by_priority=by_priority)
        made: dict[FusionGroup, list[Node]] = {}
        owners = [n for n in level if "calls" in n.attrs]  # scanned once per level
        for group in level_groups:
            made[group] = _fusion(group, names, fusion_kinds, owners)
        level.reorder([node for unit in order for node in (made[unit] if isinstance(unit, FusionGroup) else (unit,))])
    if by_priority:
        graph.meta["hlo.is_scheduled"] = True
    return graph


class _NameSource:
    """Fresh instruction and computation names: XLA wants them unique in the whole module."""

    def __init__(self, graph: Graph) -> None:
        self.taken: set[str] = set()
        for top in (graph, *(f.graph for f in graph.functions.values())):
            for level in (top, *top.subgraphs()):
                self.taken.add(level.name)
                self.taken.update(v.name for v in level.inputs)
                self.taken.update(n.name for n in level)
                self.taken.update(v.name for n in level for v in n.outputs)

    def __call__(self, base: str) -> str:
        name, count = base, 0
        while name in self.taken:
            count += 1
            name = f"{base}.{count}"
        self.taken.add(name)
        return name


_FUSION_KINDS = ("cpu", "gpu", "call")
FUSED_GROUP_KEY = "compiler_opt.fused_group"  # frontend attribute of a fusion made from a group


def _fusion_kind(group: FusionGroup, target: str) -> str:
    if target in ("cpu", "call"):
        return "kLoop"
    if any(n.kind is OpKind.REDUCE or n.op_type in ("reduce", "reduce-window") for n in group.nodes):
        return "kInput"
    if any(n.op_type in ("dot", "convolution") for n in group.nodes):
        return "kOutput"
    return "kLoop"


def _fusion(group: FusionGroup, names: _NameSource, fusion_kinds: str, owners: list[Node]) -> list[Node]:
    """Replace `group` by a fusion instruction (and get-tuple-elements); the new nodes, in order."""
    level, gid = group.graph, group.group_id
    if _is_fusion_body(level):
        raise ExportError(
            f"fusion group {gid} lies inside the fusion computation {level.name!r}; XLA fusions do not nest",
            node=group.nodes[0].name,
        )
    for node in group.nodes:
        if node.op_type in _NOT_FUSIBLE or node.kind in SIDE_EFFECT_KINDS:
            message = f"fusion group {gid}: XLA does not fuse a {node.op_type!r} instruction"
            raise ExportError(message, node=node.name, field="fusion_group")
    kind = _fusion_kind(group, fusion_kinds)  # before outlining: it reads the members
    for node in group.nodes:
        node.fusion_group = None  # the fusion instruction is the group now (a re-export must not fuse again)
    outlined = outline_group(
        group, names(f"fused_computation.{gid}"), param_name=lambda v, i: names(f"param_{i}.{gid}"), owners=owners
    )
    body, results = outlined.body, outlined.inner_outputs
    if len(results) > 1:
        root = Value(names(f"tuple.{gid}"), TupleType(tuple(v.type for v in results)))
        body.append(Node("tuple", results, outputs=[root], domain=HLO_DOMAIN, name=root.name, kind=OpKind.TUPLE))
        body.set_outputs([root])
    root_type = body.outputs[0].type
    attrs = [
        *([] if fusion_kinds == "call" else [Attr("fusion_kind", AttrKind.STRING, kind)]),
        Attr("called_computations", AttrKind.STRINGS, (body.name,)),
        Attr("calls", AttrKind.GRAPHS, (body,)),
    ]
    opcode, op_kind = ("call", OpKind.CALL) if fusion_kinds == "call" else ("fusion", OpKind.FUSION)
    single = len(results) == 1
    fused_value = outlined.outputs[0] if single else Value("", root_type)
    fused_value.name, fused_value.type = names(f"{opcode}.{gid}"), root_type
    fusion = Node(
        opcode, outlined.inputs, outputs=[fused_value], attrs=attrs, domain=HLO_DOMAIN, name=fused_value.name, kind=op_kind
    )
    made = [fusion]
    if not single:
        for index, stand_in in enumerate(outlined.outputs):
            stand_in.name = names(f"get-tuple-element.{gid}.{index}")
            made.append(
                Node("get-tuple-element", [fused_value], outputs=[stand_in], attrs=[Attr("tuple_index", AttrKind.INT, index)],
                     domain=HLO_DOMAIN, name=stand_in.name, kind=OpKind.GET_TUPLE_ELEMENT)
            )
    for node in made:
        node.device, node.priority = group.device, group.priority
        level.append(node)
    # The group id as a plain frontend attribute: as `fusion_group` it would make a re-export
    # fuse the fusions (a split group leaves several with one id).
    fusion.metadata_props[FUSED_GROUP_KEY] = str(gid)
    return made


def _owned_subgraphs(node: Node) -> Iterator[Graph]:
    attr = node.attrs.get("calls")
    if attr is not None:
        yield from attr.graphs()
