"""The GraphSAGE kernel cost model (after Kaufman et al., "A Learned Performance Model for Tensor
Processing Units", MLSys 2021, and the TpuGraphs baselines).

For a kernel graph and a batch of C configurations:
1. node input = [opcode embedding, normalized node features] -> linear -> h (N, H);
2. configuration features joined early: tile form adds linear(config) to every node, layout
   form adds linear(node config) to the configurable nodes -> C copies of the graph (C*N, H);
3. `layers` GraphSAGE layers over both edge directions (one SAGEConv on producer->consumer
   edges, one on the reversed edges, summed), residual, layer norm;
4. per-copy reduction: mean, max, both, or attention pooling -> MLP -> predicted log runtime (C,).

Residual form (`residual=True`, fusion datasets): per configuration, graph-level numbers
(`graph_features`: log of its `fusion_terms`, the roofline simulator's step time among them) are
joined to the pooled vector before the MLP, and the MLP's output is added to an offset, log
roofline_s: the model learns log(runtime / roofline_s), the simulator's error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

__all__ = ["CostModel", "ModelConfig"]

OPCODE_VOCAB = 256


@dataclass(frozen=True)
class ModelConfig:
    node_features: int
    config_features: int
    layout_form: bool = False
    hidden: int = 64
    layers: int = 3
    pooling: str = "mean+max"  # mean | max | mean+max | attention
    opcode_dim: int = 16
    graph_features: int = 0  # per-configuration graph-level inputs joined before the MLP (0: none)
    residual: bool = False  # output = MLP + offset (log roofline_s) passed to forward

    def to_dict(self) -> dict:
        return asdict(self)


class CostModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        from torch_geometric.nn import SAGEConv
        from torch_geometric.nn.aggr import AttentionalAggregation

        if config.pooling not in ("mean", "max", "mean+max", "attention"):
            raise ValueError(f"unknown pooling {config.pooling!r}")
        self.config = config
        h = config.hidden
        self.opcode = nn.Embedding(OPCODE_VOCAB, config.opcode_dim)
        self.node_in = nn.Linear(config.opcode_dim + config.node_features, h)
        self.config_in = nn.Sequential(nn.Linear(config.config_features, h), nn.ReLU(), nn.Linear(h, h))
        self.forward_convs = nn.ModuleList(SAGEConv(h, h) for _ in range(config.layers))
        self.backward_convs = nn.ModuleList(SAGEConv(h, h) for _ in range(config.layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(config.layers))
        pooled = (2 * h if config.pooling == "mean+max" else h) + (h if config.graph_features else 0)
        self.graph_in = nn.Sequential(nn.Linear(config.graph_features, h), nn.ReLU()) if config.graph_features else None
        self.attention = AttentionalAggregation(nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))) if config.pooling == "attention" else None
        self.head = nn.Sequential(nn.Linear(pooled, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))
        # Input normalization and target offset, fitted on the training set (saved with the weights).
        self.register_buffer("node_mean", torch.zeros(config.node_features))
        self.register_buffer("node_std", torch.ones(config.node_features))
        self.register_buffer("config_mean", torch.zeros(config.config_features))
        self.register_buffer("config_std", torch.ones(config.config_features))
        self.register_buffer("target_mean", torch.zeros(()))
        if config.graph_features:  # only then (checkpoints from before the residual form have no such buffers)
            self.register_buffer("graph_mean", torch.zeros(config.graph_features))
            self.register_buffer("graph_std", torch.ones(config.graph_features))

    def forward(
        self,
        node_feat: torch.Tensor,  # (N, F)
        node_opcode: torch.Tensor,  # (N,)
        edge_index: torch.Tensor,  # (2, E): row 0 producer, row 1 consumer
        config_feat: torch.Tensor,  # tile: (C, Fc); layout: (C, M, Fc)
        node_config_ids: torch.Tensor | None = None,  # layout: (M,)
        graph_feat: torch.Tensor | None = None,  # (C, graph_features) when the config has them
        offset: torch.Tensor | None = None,  # (C,) added to the output (residual form: log roofline_s)
    ) -> torch.Tensor:
        n = node_feat.shape[0]
        c = config_feat.shape[0]
        x = (node_feat - self.node_mean) / self.node_std
        h = self.node_in(torch.cat([self.opcode(node_opcode.clamp(0, OPCODE_VOCAB - 1)), x], dim=1))  # (N, H)
        cfg = self.config_in((config_feat - self.config_mean) / self.config_std)
        h = h.unsqueeze(0).expand(c, n, -1)
        if node_config_ids is None:
            h = h + cfg.unsqueeze(1)
        else:
            h = h.clone()
            h[:, node_config_ids] = h[:, node_config_ids] + cfg
        h = torch.relu(h).reshape(c * n, -1)
        offsets = (torch.arange(c, device=edge_index.device) * n).repeat_interleave(edge_index.shape[1])
        forward_edges = edge_index.repeat(1, c) + offsets
        backward_edges = forward_edges.flip(0)
        for fwd, bwd, norm in zip(self.forward_convs, self.backward_convs, self.norms):
            h = norm(h + torch.relu(fwd(h, forward_edges) + bwd(h, backward_edges)))
        batch = torch.arange(c, device=h.device).repeat_interleave(n)
        if self.attention is not None:
            pooled = self.attention(h, batch, dim_size=c)
        else:
            grouped = h.reshape(c, n, -1)
            parts = []
            if self.config.pooling in ("mean", "mean+max"):
                parts.append(grouped.mean(dim=1))
            if self.config.pooling in ("max", "mean+max"):
                parts.append(grouped.max(dim=1).values)
            pooled = torch.cat(parts, dim=1)
        if self.graph_in is not None:
            if graph_feat is None:
                raise ValueError("this model reads graph-level features per configuration (graph_feat)")
            pooled = torch.cat([pooled, self.graph_in((graph_feat - self.graph_mean) / self.graph_std)], dim=1)
        out = self.head(pooled).squeeze(-1) + self.target_mean
        if self.config.residual:
            if offset is None:
                raise ValueError("a residual model needs the offset (log roofline_s) of every configuration")
            out = out + offset
        return out
