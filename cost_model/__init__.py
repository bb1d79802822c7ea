"""Cost models: analytical FLOP/byte counts, device specs, the simulator, learned models."""

from __future__ import annotations

from cost_model.flops import graph_bytes, graph_flops, node_bytes, node_flops

__all__ = ["graph_bytes", "graph_flops", "node_bytes", "node_flops"]
