"""Cut a group of nodes out of a graph as a standalone root graph that a backend can compile.

The group's external inputs (values produced outside it, graph inputs, values captured by its
subgraphs) become graph inputs, in first-use order; its outputs used outside the group (or graph
outputs) become graph outputs. Initializers stay initializers (ONNX weights are part of the op),
and the root's functions and model shell are copied, so the cut exports with the same exporter
as the whole graph. Only the members are copied: cutting one op out of a 10k-node graph costs
O(op), not O(graph).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Iterable, Sequence

from graph_ir.attrs import Attr, AttrKind
from graph_ir.clone import clone_function, clone_graph
from graph_ir.core import Node, Value
from graph_ir.errors import CompilerOptError
from graph_ir.graph import Graph

__all__ = ["GroupCut", "ProfilingError", "cut_group", "group_boundary"]


class ProfilingError(CompilerOptError):
    """A group cannot be cut out, compiled or timed."""


@dataclass(eq=False)
class GroupCut:
    """A group as its own graph; `inputs[i]` / `outputs[j]` are the original graph's values that
    feed `graph.inputs[i]` / come out of `graph.outputs[j]`."""

    graph: Graph
    members: tuple[Node, ...]
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]


def group_boundary(members: Sequence[Node]) -> tuple[list[Value], list[Value]]:
    """(external inputs in first-use order, outputs that leave the group) of a set of nodes."""
    inside = set(members)
    inputs: dict[Value, None] = {}
    for node in members:
        captured = node.implicit_inputs() if any(True for _ in node.subgraphs()) else ()
        for value in (*node.inputs, *captured):
            if value is None or value.producer in inside or value.is_constant:
                continue
            inputs.setdefault(value)
    outputs = [
        value
        for node in members
        for value in node.outputs
        if value.is_graph_output() or any(use.node not in inside for use in value.uses)
    ]
    if not outputs:  # a group nobody reads (dead code): keep its last result so it still runs
        outputs = [members[-1].outputs[0]]
    return list(inputs), outputs


def cut_group(graph: Graph, members: Iterable[Node], *, tuple_op: str | None = None) -> GroupCut:
    """Copy `members` (in graph order) into a new root graph with the group's boundary as its I/O.

    `tuple_op` names an op that packs several outputs into one (HLO: "tuple", since an HLO
    computation has one ROOT); None keeps several graph outputs (ONNX).
    """
    member_set = set(members)
    ordered = [node for node in graph if node in member_set]
    if len(ordered) != len(member_set):
        raise ProfilingError(f"{len(member_set) - len(ordered)} group members are not top-level nodes of graph {graph.name!r}")
    if not ordered:
        raise ProfilingError("cannot cut an empty group")
    ext_inputs, ext_outputs = group_boundary(ordered)
    cut = Graph(f"{graph.name}.group", opset_imports=graph.opset_imports)
    cut.meta = {k: v for k, v in graph.meta.items() if k != "hlo.is_scheduled"}
    vmap: dict[Value, Value] = {}
    for value in ext_inputs:
        fresh = Value(value.name, value.type)
        fresh.meta = dict(value.meta)
        vmap[value] = cut.add_input(fresh)
    for node in ordered:
        for value in node.inputs:
            if value is not None and value.is_constant and value not in vmap:
                fresh = Value(value.name, value.type, const=value.const)
                vmap[value] = cut.add_initializer(fresh)
    for node in ordered:
        outputs = [Value(v.name, v.type) for v in node.outputs]
        for old, new in zip(node.outputs, outputs):
            new.meta = dict(old.meta)
            vmap[old] = new
        twin = Node(
            node.op_type,
            [None if v is None else vmap[v] for v in node.inputs],
            outputs=outputs,
            attrs=[_copy_attr(attr, vmap) for attr in node.attrs.values()],
            domain=node.domain,
            name=node.name,
            kind=node.kind,
            overload=node.overload,
        )
        twin.meta = {k: v for k, v in node.meta.items() if k != "control_predecessors"}
        cut.append(twin)
    results = [vmap[v] for v in ext_outputs]
    if tuple_op is not None and len(results) > 1:
        from graph_ir.types import TupleType

        packed = Value("group_result", TupleType(tuple(v.type for v in results)))
        cut.append(Node(tuple_op, results, outputs=[packed], name="group_result", domain=ordered[0].domain))
        results = [packed]
    cut.set_outputs(results)
    root = graph.root
    cut.model = copy.deepcopy(root.model)
    for key, function in root.functions.items():
        cut.functions[key] = clone_function(function)
    return GroupCut(cut, tuple(ordered), tuple(ext_inputs), tuple(ext_outputs))


def _copy_attr(attr: Attr, vmap: dict[Value, Value]) -> Attr:
    # Bodies may read outer values (ONNX If/Loop); vmap sends those to the cut's inputs.
    if attr.kind is AttrKind.GRAPH:
        return Attr(attr.name, attr.kind, clone_graph(attr.value, vmap), attr.doc_string)
    if attr.kind is AttrKind.GRAPHS:
        return Attr(attr.name, attr.kind, tuple(clone_graph(g, vmap) for g in attr.value), attr.doc_string)
    return attr
