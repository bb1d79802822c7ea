"""Random legal fusions for the fusion x placement property tests (ONNX, HLO, the suite)."""

from __future__ import annotations

import random

import graph_ir
from passes.fusion.groups import FusionGroups
from passes.fusion.rules import fusible


def random_legal_fusion(graph: graph_ir.Graph, rng: random.Random, max_nodes: int) -> None:
    """Merge random producer/consumer pairs of fusible nodes where `FusionGroups` allows it
    (about two thirds of the edges tried), and write the groups into the graph."""
    groups = FusionGroups(graph, max_nodes=max_nodes)
    edges = [(p, c) for c in range(len(groups.nodes)) for p in groups.preds[c]]
    rng.shuffle(edges)
    for p, c in edges[: max(1, len(edges) * 2 // 3)]:
        if fusible(groups.nodes[p]) and fusible(groups.nodes[c]):
            groups.try_merge(p, c)
    groups.write()
