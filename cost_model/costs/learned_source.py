"""`learned`: the learned tile model (`cost_model.learned`) behind the cost door.

The factory loads the model shipped in the package (`TilePredictor.packaged()`, trained on this
machine's CPU); it answers dot/conv/reduce nodes on the topology's cpu devices and leaves the
rest to the roofline (see `cost_model.learned.costs`). Loading is lazy: torch, torch_geometric
and TVM are imported only when a target asks for `costs=learned`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cost_model.costs.source import KernelCostSource, register_cost_source

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from graph_ir.graph import Graph

__all__: list[str] = []

logger = logging.getLogger(__name__)


def _learned(graph: Graph, topology: Topology) -> KernelCostSource:
    from cost_model.learned.costs import LearnedCosts
    from cost_model.learned.predictor import TilePredictor

    costs = LearnedCosts(TilePredictor.packaged())
    if not any(d.kind in costs.device_kinds for d in topology.devices):
        logger.warning(
            "the learned kernel model describes this machine's %s devices; topology %s has none, so every "
            "kernel keeps its roofline time (use a host topology such as '2xhost')",
            "/".join(costs.device_kinds),
            topology.name,
        )
    return costs


register_cost_source(
    "learned",
    _learned,
    "the learned GraphSAGE tile model shipped in the package (dot/conv/reduce kernels on this machine's cpu devices)",
)
