"""Common subexpression elimination: merge nodes that compute the same thing, and equal constants."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

from graph_ir.core import UNKNOWN_VALUE
from passes.basic._walk import all_graphs, has_side_effects, listed_outputs, replace_value
from passes.infra.base import Pass, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["CommonSubexpressionElimination"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    """Merge nodes with the same op, attributes, input values, output count and decisions.

    The first node is kept and the uses of the others move to it. Never merged: side-effecting
    or random kinds, nodes with subgraphs (their bodies are compared by identity only), and a
    duplicate whose output is a graph output (merging would rename the graph's interface).
    Nodes are compared only within one graph, not across nesting levels. Decisions (device,
    fusion group, priority, tile) are part of the key so a merge never drops one.

    Equal constants (same dtype, shape and content digest) are merged first, so nodes that read
    equal constants become equal too; constants over `constant_size_limit` bytes are not hashed.
    """

    name = "cse"
    merge_constants: bool = option(True, "also merge equal initializers")
    constant_size_limit: int = option(1 << 20, "largest initializer (bytes) compared by content")

    def call(self, graph: Graph) -> PassResult:
        listed = listed_outputs(graph)
        merged_constants = merged_nodes = 0
        for sub in list(all_graphs(graph)):  # parents before their subgraphs
            if self.merge_constants:
                merged_constants += self._merge_constants(sub, listed)
            merged_nodes += _merge_nodes(sub, listed)
        if merged_constants or merged_nodes:
            logger.debug("cse merged %d nodes and %d constants", merged_nodes, merged_constants)
        return PassResult(graph, bool(merged_constants or merged_nodes))

    def _merge_constants(self, graph: Graph, listed: dict[Value, list[Graph]]) -> int:
        inputs = set(graph.inputs)
        # Bucket by type first and hash contents only where two constants share one: hashing
        # every weight of a CNN costs more than the rest of the pass.
        buckets: dict[Hashable, list[Value]] = {}
        for value in list(graph.initializers.values()):
            tensor = value.const
            if tensor is None or value in inputs or tensor.nbytes > self.constant_size_limit:
                continue
            buckets.setdefault((tensor.dtype, tuple(tensor.shape), value.type), []).append(value)
        merged = 0
        for bucket in buckets.values():
            if len(bucket) < 2:
                continue
            seen: dict[str, Value] = {}
            for value in bucket:
                kept = seen.setdefault(value.const.digest(), value)
                if kept is value or value in listed:
                    continue
                value.replace_all_uses_with(kept, replace_graph_outputs=False)
                graph.remove_initializer(value)
                merged += 1
        return merged


def _node_key(node: Node) -> Hashable | None:
    """The identity of what a node computes, or None when it must not be merged."""
    if not node.outputs or has_side_effects(node) or any(True for _ in node.subgraphs()):
        return None
    if node.meta.get(UNKNOWN_VALUE):  # e.g. an HLO constant whose data the text elided
        return None
    try:
        attrs = tuple(attr.structural_key() for _, attr in sorted(node.attrs.items()))
    except Exception as err:  # a constant whose data cannot be read: leave the node alone
        logger.debug("cse: not merging %s (%s)", node.name, err)
        return None
    key = (
        node.domain,
        node.op_type,
        node.overload,
        attrs,
        node.inputs,
        # Result types too: in HLO the result shape is part of the op (broadcast, iota, reshape).
        tuple(value.type for value in node.outputs),
        (node.device, node.fusion_group, node.priority, node.tile),
    )
    try:
        hash(key)
    except TypeError:  # an attribute value the IR cannot hash (an exotic opaque payload)
        return None
    return key


def _merge_nodes(graph: Graph, listed: dict[Value, list[Graph]]) -> int:
    seen: dict[Hashable, Node] = {}
    doomed: list[Node] = []
    for node in graph:  # in order: merging a node makes its users' keys equal for later nodes
        key = _node_key(node)
        if key is None:
            continue
        kept = seen.setdefault(key, node)
        if kept is node or any(value in listed for value in node.outputs):
            continue
        for old, new in zip(node.outputs, kept.outputs):
            replace_value(old, new, listed)
        doomed.append(node)
    if doomed:
        graph.remove_nodes(doomed)
    return len(doomed)
