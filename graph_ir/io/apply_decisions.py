"""Decisions made concrete before export: fused groups as kernels, priorities as an order.

Exporters that write fused groups as real kernels (ONNX local functions, HLO fusion
computations) share the legality rules and the rewriting kept here:

- `materialize_fusion_groups(graph)` collects every fused group of two or more nodes with its
  boundary (the values it reads from outside, the values it gives back) and checks that it can
  be one kernel:
  * one graph level: all members in the root graph or all in the same subgraph (a kernel cannot
    straddle an If branch and its parent);
  * one device: `cost_model.decisions` defines a kernel as "same group id *and* same device",
    so a group id that spans devices is split into one kernel per device (`split_devices=False`
    rejects it instead), and each device's share is cut into convex pieces
    (`graph_ir.kernel_pieces`, as the simulator does): a placement that ignores fusion can put
    a member on another device between two members of one share;
  * acyclic: contracting each group to one vertex must leave the level a DAG, otherwise the
    kernel could not run as one unit (an outside node would need some of its outputs and feed
    some of its inputs). The fusion pass never builds such groups; a hand-set `fusion_group`
    can, and gets an `ExportError` naming the groups on the cycle.
  Function bodies (already reusable units) are left as they are.
- `level_order` is one level's order with each group as one unit: topological, as close to the
  current order as possible, or a list schedule by `node.priority` (higher first, ties by the
  current order; a group's priority is its members' highest, as the simulator's kernel rank).
- `single_result_parts` cuts a group with several results into single-result parts, for
  backends whose kernels have one output (XLA:CPU compiles no multi-output fusion).
- `outline_group` moves a group's nodes into a new body graph whose inputs stand for the
  boundary values (so the body references nothing outside itself, as ONNX functions and HLO
  computations require) and leaves stand-in values that the exporter's call node produces.
- `inline_fused_functions` undoes the ONNX form after import: calls to `compiler_opt.fused`
  functions become their nodes again, with their group ids.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence, Union

import numpy as np

from graph_ir.clone import clone_graph
from graph_ir.core import Node, Value
from graph_ir.errors import ExportError
from graph_ir.graph import Graph
from graph_ir.kernel_pieces import spanning_group_pieces
from graph_ir.verify import topological_order

__all__ = [
    "FUSED_DOMAIN",
    "FusionGroup",
    "Outlined",
    "has_fusion_groups",
    "inline_fused_functions",
    "level_order",
    "materialize_fusion_groups",
    "outline_group",
    "single_result_parts",
]

logger = logging.getLogger(__name__)

# The ONNX domain of the local functions that fused groups become.
FUSED_DOMAIN = "compiler_opt.fused"


@dataclass(eq=False)
class FusionGroup:
    """One fused kernel to be: its nodes at one graph level, and its boundary values."""

    group_id: int
    device: str | None
    graph: Graph  # the level holding every member
    nodes: list[Node]  # in topological order
    inputs: list[Value]  # values read from outside (explicitly or captured by members' subgraphs), first-use order
    outputs: list[Value]  # member outputs read outside the group or returned by the level
    split: bool = False  # the group id spans devices; this is one device's share (or a piece of it)
    piece: int = 0  # which convex piece of that share (graph_ir.kernel_pieces)

    @property
    def label(self) -> str:
        """A name for files and messages: `fused_<group>` (plus the device, and the piece when
        the device's share was cut, when split)."""
        if not self.split:
            return f"fused_{self.group_id}"
        device = "".join(c if c.isalnum() else "_" for c in str(self.device)).strip("_") or "none"
        return f"fused_{self.group_id}_{device}" + (f"_{self.piece}" if self.piece else "")

    @property
    def priority(self) -> float | None:
        found = [n.priority for n in self.nodes if n.priority is not None]
        return max(found) if found else None


Unit = Union[Node, FusionGroup]


def has_fusion_groups(graph: Graph) -> bool:
    """True when two nodes share a group id (cheap, no validation): something to materialize
    or to reject."""
    seen: set[int] = set()
    for level in (graph, *graph.subgraphs()):
        for node in level:
            if node.fusion_group is not None:
                if node.fusion_group in seen:
                    return True
                seen.add(node.fusion_group)
    return False


def materialize_fusion_groups(graph: Graph, *, split_devices: bool = True) -> list[FusionGroup]:
    """Every fused group of two or more nodes of `graph` (a root graph), validated (module docstring)."""
    if graph.parent is not None:
        raise ExportError(f"graph {graph.name!r} is a subgraph; pass its root graph")
    level_of: dict[int, Graph] = {}
    found: list[FusionGroup] = []
    for level in (graph, *graph.subgraphs()):
        members: dict[int, dict[str | None, list[Node]]] = {}
        for node in level:
            gid = node.fusion_group
            if gid is None:
                continue
            first = level_of.setdefault(gid, level)
            if first is not level:
                raise ExportError(
                    f"fusion group {gid} has nodes in {_where(first)} and in {_where(level)}; "
                    "a fused kernel lives at one graph level",
                    node=node.name,
                    field="fusion_group",
                )
            members.setdefault(gid, {}).setdefault(node.device, []).append(node)
        if not members:
            continue
        order = topological_order(level)
        position = {node: i for i, node in enumerate(order)}
        owners = _owners(level)
        groups = []
        pieces: dict[Node, int] | None = None
        for gid, by_device in members.items():
            if len(by_device) > 1 and not split_devices:
                names = ", ".join(f"{d} ({nodes[0].name})" for d, nodes in by_device.items())
                first_node = next(iter(by_device.values()))[0].name
                raise ExportError(f"fusion group {gid} spans devices {names}", node=first_node, field="device")
            if len(by_device) > 1 and pieces is None:
                pieces = _spanning_pieces(level, order, position)
            for device, nodes in by_device.items():
                nodes.sort(key=position.__getitem__)
                by_piece: dict[int, list[Node]] = {}
                for node in nodes:
                    by_piece.setdefault(pieces.get(node, 0) if len(by_device) > 1 and pieces else 0, []).append(node)
                for piece, piece_nodes in by_piece.items():
                    if len(piece_nodes) < 2:
                        continue  # a one-node kernel is the node itself
                    inputs, outputs = _boundary(level, piece_nodes, owners)
                    split = len(by_device) > 1
                    groups.append(FusionGroup(gid, device, level, piece_nodes, inputs, outputs, split=split, piece=piece))
        level_order(level, groups)  # raises on a cycle between groups
        found.extend(groups)
    logger.debug("%d fused groups to materialize in %r", len(found), graph.name)
    return found


def level_order(level: Graph, groups: Sequence[FusionGroup], *, by_priority: bool = False) -> list[Unit]:
    """`level`'s nodes in a valid order with each of its `groups` as one unit (module docstring)."""
    order = topological_order(level)
    units: list[Unit] = []
    unit_of: dict[Node, int] = {}
    rank: list[int] = []
    for group in groups:
        if group.graph is not level:
            continue
        for node in group.nodes:
            unit_of[node] = len(units)
        units.append(group)
        rank.append(len(order))
    for index, node in enumerate(order):
        unit = unit_of.setdefault(node, len(units))
        if unit == len(units):
            units.append(node)
            rank.append(index)
        else:
            rank[unit] = min(rank[unit], index)
    succs: list[set[int]] = [set() for _ in units]
    preds: list[set[int]] = [set() for _ in units]
    for node in order:
        unit = unit_of[node]
        for value in _reads(node):
            producer = value.producer
            if producer is not None and producer.graph is level and unit_of[producer] != unit:
                succs[unit_of[producer]].add(unit)
                preds[unit].add(unit_of[producer])
    indegree = [len(p) for p in preds]

    def key(u: int) -> tuple[float, int]:
        if not by_priority:
            return (0.0, rank[u])
        return (-(units[u].priority or 0.0), rank[u])  # unset priorities are 0.0, as in the simulator

    ready = [(key(u), u) for u, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    result: list[Unit] = []
    while ready:
        _, u = heapq.heappop(ready)
        result.append(units[u])
        for s in succs[u]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (key(s), s))
    if len(result) != len(units):
        _raise_cycle(units, preds, [u for u, d in enumerate(indegree) if d > 0], level)
    return result


def single_result_parts(group: FusionGroup) -> list[FusionGroup]:
    """`group` as parts of two or more nodes with one result each (no node duplicated).

    Going backwards, a member starts a new part when its value leaves the group or is read by
    members of two parts; otherwise it joins its readers' part. Every member reaches its part's
    root inside the part, so a cycle between parts would be a cycle in the graph: there is none.
    """
    if len(group.outputs) <= 1:
        return [group]
    level, members, results = group.graph, set(group.nodes), set(group.outputs)
    part_of: dict[Node, int] = {}
    roots = 0
    owners = _owners(level)
    for node in reversed(group.nodes):
        readers = {part_of[r] for v in node.outputs for use in v.uses if (r := _level_ancestor(use.node, level)) in members}
        if len(readers) == 1 and not any(v in results for v in node.outputs):
            part_of[node] = readers.pop()
        else:
            part_of[node], roots = roots, roots + 1
    parts = []
    for part in range(roots):
        nodes = [n for n in group.nodes if part_of[n] == part]
        if len(nodes) >= 2:
            inputs, outputs = _boundary(level, nodes, owners)
            parts.append(FusionGroup(group.group_id, group.device, level, nodes, inputs, outputs, split=group.split, piece=group.piece))
    return parts[::-1]  # roots were numbered from the end


@dataclass(eq=False)
class Outlined:
    """A group moved into `body`; the exporter makes the node that calls it."""

    body: Graph  # the group's nodes; inputs stand for `inputs`; outputs are `inner_outputs`
    inputs: list[Value]  # outer values, one per body input, in order
    outputs: list[Value]  # stand-ins for the group's results at the level: no producer yet, users rewired
    inner_outputs: list[Value]  # the group's results, now inside `body`


def outline_group(
    group: FusionGroup,
    body_name: str,
    *,
    param_name: Callable[[Value, int], str] | None = None,
    owners: Sequence[Node] | None = None,
) -> Outlined:
    """Move `group`'s nodes out of their level into a new graph `body_name` (module docstring).

    Body inputs take the outer values' names unless `param_name(value, index)` says otherwise.
    The boundary is recomputed, since outlining an earlier group may have rewired it. `owners`:
    the level's subgraph-owning nodes when the caller outlines many groups of one level (a scan
    of the level per group otherwise; the list may hold nodes moved away since).
    """
    level, members = group.graph, group.nodes
    member_set = set(members)
    owners = _owners(level) if owners is None else owners
    inputs, outputs = _boundary(level, members, owners)
    body = Graph(body_name)
    params: dict[Value, Value] = {}
    for index, value in enumerate(inputs):
        param = Value(param_name(value, index) if param_name else value.name, value.type)
        params[value] = body.add_input(param)
    returned = _returned_by_outside(level, member_set, owners)
    stand_ins = []
    for value in outputs:
        stand_in = Value("", value.type)
        for use in value.uses:
            if not _within(use.node, member_set, level):
                use.node.set_input(use.index, stand_in)
        if level.has_output(value):
            level.replace_output(value, stand_in)
        for subgraph in returned.get(value, ()):
            subgraph.replace_output(value, stand_in)
        stand_ins.append(stand_in)
    # remove_nodes drops every input (recursively): keep them, then restore them inside `body`.
    saved = [(node, node.inputs) for member in members for node in (member, *_nested_nodes(member))]
    level.remove_nodes(members)
    body.extend(members)
    for node, node_inputs in saved:
        node.replace_inputs(None if v is None else params.get(v, v) for v in node_inputs)
    for member in members:
        for subgraph in _nested_graphs(member):
            for value in subgraph.outputs:
                if value in params:  # a branch that returns an outer value directly
                    subgraph.replace_output(value, params[value])
    body.set_outputs(outputs)
    return Outlined(body, inputs, stand_ins, outputs)


def inline_fused_functions(graph: Graph) -> int:
    """Replace calls to `compiler_opt.fused` local functions (what ONNX export with
    `fused_groups_as_functions` writes) by copies of the functions' nodes, which keep their
    decisions (so the groups come back); drop the functions no longer called. Returns the
    number of calls inlined."""
    fused = {(f.domain, f.name): f for f in graph.functions.values() if f.domain == FUSED_DOMAIN}
    inlined = 0
    while fused:  # inlined bodies may hold calls themselves (a group inside a fused If's branch)
        found = 0
        for level in (graph, *graph.subgraphs()):
            calls = [n for n in level if (n.domain, n.op_type) in fused]
            owners = _owners(level) if calls else []
            for call in calls:
                _inline_call(level, call, fused[(call.domain, call.op_type)].graph, owners)
            found += len(calls)
        if not found:
            break
        inlined += found
    for key in [k for k in graph.functions if (k[0], k[1]) in fused]:
        if not any((n.domain, n.op_type) == key[:2] for n in graph.all_nodes()):
            del graph.functions[key]
    return inlined


def _inline_call(level: Graph, call: Node, function_body: Graph, owners: list[Node]) -> None:
    body = clone_graph(function_body)
    args = dict(zip(body.inputs, call.inputs))
    results = [args.get(v, v) for v in body.outputs]
    copies = body.nodes
    saved = [(node, node.inputs) for copy in copies for node in (copy, *_nested_nodes(copy))]
    body.set_outputs([])
    body.remove_nodes(copies)  # drops inputs (restored below, with the call's arguments)
    for value in call.outputs:  # free the names: the body's results usually carry them
        level.rename_value(value, level.unique_name(f"{value.name}.call"))
    for node in copies:
        if level.find_node(node.name) is not None:
            node.name = level.unique_name(node.name)
        for value in node.outputs:
            if level.lookup(value.name) is not None:
                value.name = level.unique_name(value.name)
    level.insert_before(call, copies)
    owners.extend(_owners_among(copies))
    for node, node_inputs in saved:
        node.replace_inputs(None if v is None else args.get(v, v) for v in node_inputs)
    for copy in copies:
        for subgraph in _nested_graphs(copy):
            for value in subgraph.outputs:
                if value in args:
                    subgraph.replace_output(value, args[value])
    returned = _returned_by_outside(level, {call}, owners)
    for old, new in zip(call.outputs, results):
        if new.type is None:  # a FunctionProto types no outputs; the call's value_info did
            new.type = old.type
        old.replace_all_uses_with(new)
        for subgraph in returned.get(old, ()):
            subgraph.replace_output(old, new)
    level.remove(call)


# -- helpers ---------------------------------------------------------------------------------------
def _spanning_pieces(level: Graph, order: list[Node], position: dict[Node, int]) -> dict[Node, int]:
    """Convex piece of each member of a group that spans devices (`graph_ir.kernel_pieces`,
    the same cut the simulator makes, so exported kernels are the simulated ones)."""
    ptr = [0]
    preds: list[int] = []
    for node in order:
        found = {position[v.producer] for v in _reads(node) if v.producer is not None and v.producer.graph is level}
        found.discard(position[node])
        preds.extend(sorted(found))
        ptr.append(len(preds))
    group = np.array([-1 if n.fusion_group is None else n.fusion_group for n in order], dtype=np.int64)
    names = {d: i for i, d in enumerate(dict.fromkeys(n.device for n in order))}
    device = np.array([names[n.device] for n in order], dtype=np.int64)
    piece = spanning_group_pieces(np.asarray(ptr, dtype=np.int64), np.asarray(preds, dtype=np.int64), group, device)
    if piece is None:
        return {}
    return {node: int(p) for node, p in zip(order, piece.tolist()) if p}


def _where(level: Graph) -> str:
    return f"graph {level.name!r}" + (f" (of node {level.parent.name!r})" if level.parent is not None else "")


def _owners(level: Graph) -> list[Node]:
    """The level's nodes that own subgraphs (their subgraphs may return outer values directly)."""
    return _owners_among(level)


def _owners_among(nodes: Iterable[Node]) -> list[Node]:
    return [node for node in nodes if node.attrs and any(True for _ in node.subgraphs())]


def _reads(node: Node) -> Iterator[Value]:
    """Values `node` depends on: its inputs and what its subgraphs capture."""
    for value in node.inputs:
        if value is not None:
            yield value
    if any(True for _ in node.subgraphs()):
        yield from node.implicit_inputs()


def _nested_graphs(node: Node) -> Iterator[Graph]:
    for graph in node.subgraphs():
        yield graph
        yield from graph.subgraphs()


def _nested_nodes(node: Node) -> Iterator[Node]:
    for graph in node.subgraphs():
        yield from graph.all_nodes()


def _level_ancestor(node: Node, level: Graph) -> Node | None:
    """`node` itself if it is in `level`, else the node of `level` whose subgraphs hold it."""
    while node.graph is not level:
        graph = node.graph
        if graph is None or graph.parent is None:
            return None
        node = graph.parent
    return node


def _within(node: Node, members: set[Node], level: Graph) -> bool:
    """Is `node` a member, or nested inside a member's subgraphs?"""
    return _level_ancestor(node, level) in members


def _returned_by_outside(level: Graph, members: set[Node], owners: Sequence[Node]) -> dict[Value, list[Graph]]:
    """Values that subgraphs of non-members return directly (a use that no node records)."""
    found: dict[Value, list[Graph]] = {}
    for node in owners:
        if node.graph is level and node not in members:
            for graph in _nested_graphs(node):
                for value in graph.outputs:
                    found.setdefault(value, []).append(graph)
    return found


def _boundary(level: Graph, members: Sequence[Node], owners: Sequence[Node]) -> tuple[list[Value], list[Value]]:
    member_set = set(members)
    inputs: dict[Value, None] = {}
    for node in members:
        for value in _reads(node):
            if value.producer not in member_set:
                inputs[value] = None
    returned = _returned_by_outside(level, member_set, owners)
    outputs = []
    for node in members:
        for value in node.outputs:
            if (
                level.has_output(value)
                or value in returned
                or any(not _within(use.node, member_set, level) for use in value.uses)
            ):
                outputs.append(value)
    if not outputs:  # every result is dead: a kernel still needs one (HLO ROOT, ONNX function output)
        outputs.append(members[-1].outputs[0])
    return list(inputs), outputs


def _raise_cycle(units: list[Unit], preds: list[set[int]], stuck: list[int], level: Graph) -> None:
    stuck_set = set(stuck)
    u, path, on_path = stuck[0], [], {}
    while u not in on_path:  # every stuck unit waits on another stuck unit
        on_path[u] = len(path)
        path.append(u)
        u = min(p for p in preds[u] if p in stuck_set)
    cycle = path[on_path[u] :][::-1]
    first_group = next((i for i, c in enumerate(cycle) if isinstance(units[c], FusionGroup)), 0)
    cycle = cycle[first_group:] + cycle[:first_group]  # start the story at a group

    def describe(i: int) -> str:
        unit = units[i]
        return f"group {_group_name(unit)}" if isinstance(unit, FusionGroup) else f"node {unit.name!r}"

    groups = [units[i] for i in cycle if isinstance(units[i], FusionGroup)]
    # A group split across devices appears once per kernel: name each kernel, not the id twice.
    ids = ", ".join(dict.fromkeys(_group_name(g) for g in groups))
    steps = " -> ".join(describe(i) for i in (*cycle, cycle[0]))
    first = groups[0].nodes[0].name if groups else None
    raise ExportError(
        f"fusion groups {ids} in {_where(level)} would form a cycle ({steps}): a fused kernel must be able to "
        "run as one unit, so no path may leave a group and come back into it",
        node=first,
        field="fusion_group",
    )


def _group_name(group: FusionGroup) -> str:
    if not group.split:
        return str(group.group_id)
    return f"{group.group_id} (its share on {group.device}" + (f", piece {group.piece})" if group.piece else ")")
