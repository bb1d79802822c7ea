"""`schedule{strategy=topological|critical-path|memory}`: write node priorities (and optionally
reorder the nodes) from one of the strategies in `strategies.py`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cost_model.decisions import Decisions
from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass
from passes.scheduling.strategies import STRATEGIES, schedule_priorities

if TYPE_CHECKING:
    from graph_ir.graph import Graph
    from passes.infra.context import PassContext

__all__ = ["Schedule"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class Schedule(Pass):
    """Set `node.priority` (higher runs first among ready kernels on a device) by `strategy`.

    Costs (critical-path) are the target's node and transfer times (its devices and kernel cost
    source, through the cost door) with the nodes' current devices; unplaced nodes count as on
    the topology's default device. With `reorder`, the graph's node order
    becomes the schedule order (always a topological order)."""

    name = "schedule"
    strategy: str = option("critical-path", "topological | critical-path | memory")
    devices: str = option("", "override the target's topology for node and transfer times; empty: the target's")
    reorder: bool = option(False, "also reorder the graph's nodes into the schedule order")

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise PassError(
                f"pass 'schedule': strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}",
                pass_name=self.name,
            )

    def call(self, graph: Graph, context: PassContext) -> PassResult:
        problem = context.target.problem(graph)
        decisions = Decisions.from_graph(graph, problem.topology, nodes=problem.nodes)
        priority, order = schedule_priorities(problem, decisions, self.strategy)
        changed = False
        for node, p in zip(problem.nodes, priority.tolist()):
            if node.priority != p:
                node.priority = p
                changed = True
        if self.reorder:
            new_order = [problem.nodes[i] for i in order]
            if new_order != list(graph):
                graph.reorder(new_order)
                changed = True
        logger.debug("schedule{strategy=%s}: %d nodes", self.strategy, problem.num_nodes)
        return PassResult(graph, changed)
