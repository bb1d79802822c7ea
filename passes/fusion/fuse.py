"""`fuse`: XLA-like greedy producer/consumer fusion.

Order, as XLA's GPU pipeline: first every heavy op (matmul, convolution) takes its epilogue, the
chain of elementwise sole users that follows it (`rules.is_epilogue`; XLA's GEMM rewriter folds
bias and activation into the library call before fusion runs); then consumers are visited from
the graph's end backwards and each tries to pull its producers in (loop fusion,
`rules.can_fuse_into`); last, reductions take their epilogues the same way. Every merge passes
`FusionGroups.legal`: same device, at most `max_nodes` nodes and one hero, no cycle between
groups.

Duplication: with `max_duplicates = k > 0`, a cheap producer (elementwise or an index map) with
2..k+1 users, all of which could fuse it, is first cloned so each user gets its own copy (XLA
duplicates such producers into every consumer fusion rather than writing their output to memory).
The clones are real nodes (named `<producer>.dup<i>`), inserted right after the original.

Cost check: with `cost-check`, each fused group is kept only when the target's kernel cost
source (the cost door: roofline, profiled, learned) says the fused kernel is no slower than its
members run as separate kernels; the others are split back. Rules alone decide otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.core import Node
from graph_ir.order import node_order
from passes.fusion.groups import FusionGroups
from passes.fusion.rules import HEAVY_KINDS, REDUCTION_KINDS, can_fuse_into, extends_epilogue, is_epilogue
from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from cost_model.costs import Target
    from graph_ir.graph import Graph
    from passes.infra.context import PassContext

__all__ = ["Fuse", "check_fusion_limits", "drop_unprofitable_groups", "duplicate_cheap_producers", "greedy_fuse"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class Fuse(Pass):
    """Greedy loop and epilogue fusion; writes `node.fusion_group`."""

    name = "fuse"
    max_nodes: int = option(32, "largest fused group, in nodes")
    max_duplicates: int = option(0, "extra copies of a cheap producer allowed so each user can fuse it (0: none)")
    epilogues: bool = option(True, "fuse an elementwise sole user into its reduction/matmul/conv producer")
    cost_check: bool = option(False, "keep a fused group only when the target's cost source says it is no slower than its parts")

    def __post_init__(self) -> None:
        check_fusion_limits(self.name, max_nodes=self.max_nodes, max_duplicates=self.max_duplicates)

    def call(self, graph: Graph, context: PassContext) -> PassResult:
        clones = duplicate_cheap_producers(graph, self.max_duplicates) if self.max_duplicates > 0 else 0
        groups = FusionGroups(graph, max_nodes=self.max_nodes)
        greedy_fuse(groups, epilogues=self.epilogues)
        split = drop_unprofitable_groups(groups, context.target) if self.cost_check else 0
        changed = groups.write()
        logger.debug("fuse: %d merges into %d groups, %d clones, %d split by cost", groups.merges, groups.num_groups, clones, split)
        return PassResult(graph, changed or clones > 0)


def check_fusion_limits(pass_name: str, *, max_nodes: int, max_duplicates: int = 0) -> None:
    """Refuse limits that make no sense (a pipeline typo such as `max-nodes=0` would otherwise
    silently fuse nothing)."""
    if max_nodes < 1:
        raise PassError(f"pass '{pass_name}': max-nodes must be at least 1 (1 fuses nothing), got {max_nodes}", pass_name=pass_name, field="max-nodes")
    if max_duplicates < 0:
        raise PassError(f"pass '{pass_name}': max-duplicates must be 0 or more, got {max_duplicates}", pass_name=pass_name, field="max-duplicates")


def greedy_fuse(groups: FusionGroups, *, epilogues: bool = True) -> None:
    nodes = groups.nodes
    if epilogues:
        _take_epilogues(groups, HEAVY_KINDS)
    for consumer in range(len(nodes) - 1, -1, -1):
        for producer in groups.preds[consumer]:
            if can_fuse_into(nodes[producer], nodes[consumer]):
                groups.try_merge(producer, consumer)
    if epilogues:
        _take_epilogues(groups, REDUCTION_KINDS)


def drop_unprofitable_groups(groups: FusionGroups, target: Target) -> int:
    """Split each multi-node group whose fused kernel the target's cost source times slower than
    its members as separate kernels; the number split."""
    from cost_model.costs import kernel_durations
    from cost_model.decisions import Decisions

    nodes = groups.nodes
    if not nodes:
        return 0
    graph = nodes[0].graph
    problem = target.problem(graph)  # same node order as `groups` (both node_order(graph))
    device = Decisions.from_graph(graph, problem.topology, nodes=problem.nodes, unknown_devices="default").device
    roots = np.array([groups.find(i) for i in range(len(nodes))], dtype=np.int64)
    sizes = np.array([len(groups.members[r]) for r in roots.tolist()], dtype=np.int64)
    fusion = np.where(sizes > 1, roots, -1)
    kernel_of_node, kernel_first, kernel_size, fused = kernel_durations(problem, device, fusion)
    alone = problem.node_time[np.arange(len(nodes)), problem.device_type_of[device]]  # each node as its own kernel
    separate = np.bincount(kernel_of_node, weights=alone, minlength=kernel_first.size)
    slower = np.flatnonzero((kernel_size > 1) & (fused > separate))
    for k in slower.tolist():
        groups.split(int(kernel_first[k]))
    return int(slower.size)


def _take_epilogues(groups: FusionGroups, kinds: frozenset) -> None:
    """Each producer of `kinds` absorbs the chain of elementwise sole users after it."""
    nodes = groups.nodes
    for producer in range(len(nodes)):
        if nodes[producer].kind not in kinds:
            continue
        current = producer
        while len(groups.succs[current]) == 1:
            user = groups.succs[current][0]
            first = current == producer
            if first and not is_epilogue(nodes[current], nodes[user], 1):
                break
            if not first and not extends_epilogue(nodes[current], nodes[user], 1):
                break
            if not groups.try_merge(current, user):
                break
            current = user


def duplicate_cheap_producers(graph: Graph, max_duplicates: int) -> int:
    """Clone cheap single-output producers for their users (module docstring); the clone count."""
    clones_after: dict[Node, list[Node]] = {}
    for node in node_order(graph):
        if len(node.outputs) != 1:
            continue
        value = node.outputs[0]
        users = value.users()
        if not 2 <= len(users) <= max_duplicates + 1:
            continue
        if any(u.graph is not graph or u.device != node.device or not can_fuse_into(node, u) for u in users):
            continue
        made = []
        for i, user in enumerate(users[1:], start=1):
            clone = Node(
                node.op_type,
                node.inputs,
                attrs=list(node.attrs.values()),
                domain=node.domain,
                overload=node.overload,
                kind=node.kind,
                name=graph.unique_name(f"{node.name or 'node'}.dup{i}"),
            )
            clone.outputs[0].name = graph.unique_name(f"{value.name or 'v'}.dup{i}")
            clone.outputs[0].type = value.type
            clone.device = node.device
            for use in list(value.uses):
                if use.node is user:
                    user.set_input(use.index, clone.outputs[0])
            made.append(clone)
        clones_after[node] = made
    if not clones_after:
        return 0
    order: list[Node] = []
    for node in list(graph):
        order.append(node)
        order.extend(clones_after.get(node, ()))
    for made in clones_after.values():
        graph.extend(made)
    graph.reorder(order)
    return sum(len(m) for m in clones_after.values())
