"""`fuse-by-priority`: fusion driven by per-node priorities (the learned policy's fusion head).

Each node carries a fusion priority: the pass option `priorities` (aligned with
`node_order(graph)`), else `node.meta["fusion_priority"]`, else 0. Nodes are visited from the
highest priority down (ties: earlier node first), like XLA's priority fusion visits producers; a
visited node whose priority exceeds `threshold` tries to fuse into each of its consumers (highest
priority first) under the loop-fusion rule, then to take its sole elementwise user as an
epilogue. Legality is `fuse`'s: the same kind rules, device, size and acyclicity checks, so any
priority vector yields a valid fusion and the policy only chooses among legal ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from passes.fusion.groups import FusionGroups
from passes.fusion.rules import can_fuse_into, is_epilogue
from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["FuseByPriority", "PRIORITY_META_KEY", "fuse_by_priority"]

logger = logging.getLogger(__name__)

PRIORITY_META_KEY = "fusion_priority"


@register_pass
@dataclass(frozen=True)
class FuseByPriority(Pass):
    """Priority-ordered fusion with `fuse`'s legality rules; writes `node.fusion_group`."""

    name = "fuse-by-priority"
    priorities: tuple[float, ...] = option((), "per-node priorities in node order (empty: node.meta['fusion_priority'])")
    threshold: float = option(0.0, "nodes at or below this priority start no merge")
    max_nodes: int = option(32, "largest fused group, in nodes")

    def __post_init__(self) -> None:
        from passes.fusion.fuse import check_fusion_limits

        check_fusion_limits(self.name, max_nodes=self.max_nodes)

    def call(self, graph: Graph) -> PassResult:
        priorities = np.asarray(self.priorities, dtype=np.float64) if self.priorities else None
        changed = fuse_by_priority(graph, priorities, threshold=self.threshold, max_nodes=self.max_nodes)
        return PassResult(graph, changed)


def fuse_by_priority(
    graph: Graph,
    priorities: Sequence[float] | np.ndarray | None = None,
    *,
    threshold: float = 0.0,
    max_nodes: int = 32,
) -> bool:
    """Fuse `graph` in place by priority (module docstring); True when any fusion_group changed."""
    groups = FusionGroups(graph, max_nodes=max_nodes)
    nodes = groups.nodes
    if priorities is None:
        score = np.array([float(n.meta.get(PRIORITY_META_KEY, 0.0)) for n in nodes], dtype=np.float64)
    else:
        score = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if score.size != len(nodes):
            raise PassError(f"fuse-by-priority got {score.size} priorities for {len(nodes)} nodes", pass_name=FuseByPriority.name)
    if score.size and not np.isfinite(score).all():
        raise PassError("fuse-by-priority: priorities must be finite", pass_name=FuseByPriority.name)
    for node in np.lexsort((np.arange(len(nodes)), -score)).tolist():
        if score[node] <= threshold:
            break
        users = groups.succs[node]
        for user in sorted(users, key=lambda u: (-score[u], u)):
            if can_fuse_into(nodes[node], nodes[user]):
                groups.try_merge(node, user)
        if len(users) == 1 and is_epilogue(nodes[node], nodes[users[0]], 1):
            groups.try_merge(node, users[0])
    logger.debug("fuse-by-priority: %d merges into %d groups", groups.merges, groups.num_groups)
    return groups.write()
