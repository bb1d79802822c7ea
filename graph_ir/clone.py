"""Deep copies of graphs: structure copied, constant tensors shared (they are immutable)."""

from __future__ import annotations

import copy

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.graph import Function, Graph

__all__ = ["clone_graph", "clone_function"]


def _copy_value(value: Value) -> Value:
    new = Value(value.name, value.type, const=value.const)
    new.meta = dict(value.meta)
    new.doc_string = value.doc_string
    return new


def clone_graph(graph: Graph, value_map: dict[Value, Value] | None = None) -> Graph:
    """Copy `graph`; values of enclosing graphs that are not in `value_map` are referenced as-is."""
    with gc_paused():
        return _clone_graph(graph, value_map)


def _clone_graph(graph: Graph, value_map: dict[Value, Value] | None = None) -> Graph:
    vmap: dict[Value, Value] = {} if value_map is None else value_map
    new = Graph(graph.name, opset_imports=graph.opset_imports, doc_string=graph.doc_string)
    new.meta = dict(graph.meta)
    new.metadata_props = dict(graph.metadata_props)
    for value in graph._initializers.values():
        vmap[value] = new.add_initializer(_copy_value(value))
    for value in graph._inputs:
        mapped = vmap.get(value)
        if mapped is None:
            mapped = vmap[value] = _copy_value(value)
        new.add_input(mapped)
    for node in graph._nodes:
        attrs = [_clone_attr(attr, vmap) for attr in node.attrs.values()]
        outputs = [_copy_value(v) for v in node.outputs]
        twin = Node(
            node.op_type,
            [None if v is None else vmap.get(v, v) for v in node.inputs],
            outputs=outputs,
            attrs=attrs,
            domain=node.domain,
            name=node.name,
            kind=node.kind,
            overload=node.overload,
            doc_string=node.doc_string,
        )
        twin.device, twin.fusion_group, twin.priority, twin.tile = node.device, node.fusion_group, node.priority, node.tile
        twin.meta = dict(node.meta)
        twin.metadata_props = dict(node.metadata_props)
        for old, fresh in zip(node.outputs, outputs):
            vmap[old] = fresh
        new.append(twin)
    new.set_outputs([vmap.get(v, v) for v in graph._outputs])
    if graph.parent is None:
        new.model = copy.deepcopy(graph.model)
        for key, function in graph.functions.items():
            new.functions[key] = _clone_function(function)
    return new


def clone_function(function: Function) -> Function:
    """A deep copy of a function (its body cloned, its metadata copied)."""
    with gc_paused():
        return _clone_function(function)


def _clone_function(function: Function) -> Function:
    return Function(
        domain=function.domain,
        name=function.name,
        graph=_clone_graph(function.graph),
        overload=function.overload,
        attributes=list(function.attributes),
        attribute_defaults=dict(function.attribute_defaults),
        opset_imports=dict(function.opset_imports),
        doc_string=function.doc_string,
        metadata_props=dict(function.metadata_props),
    )


def _clone_attr(attr: Attr, vmap: dict[Value, Value]) -> Attr:
    if attr.kind is AttrKind.GRAPH:
        return Attr(attr.name, attr.kind, _clone_graph(attr.value, vmap), attr.doc_string)
    if attr.kind is AttrKind.GRAPHS:
        return Attr(attr.name, attr.kind, tuple(_clone_graph(g, vmap) for g in attr.value), attr.doc_string)
    return attr
