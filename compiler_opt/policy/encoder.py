"""The node encoder: op-kind embedding + features -> GraphSAGE -> segmented recurrent attention.

- GraphSAGE: each layer runs two `SAGEConv(aggr="max", project=True)` (max-pool aggregator, as in
  GO), one over producer->consumer edges and one over the reversed edges, so a node hears both
  its inputs and its users; residual + LayerNorm.
- Graph embedding: mean and max of the node states with the graph and device summary features.
- Parameter superposition (`Superposition`): before each attention layer the node states are
  scaled elementwise by `1 + W g` (g: the graph embedding); W starts near zero, so the scale
  starts near 1 and the same weights specialise per graph.
- Segmented recurrent attention (`SegmentAttention`): the rows are in topological order and cut
  into segments of `segment` nodes; each segment attends to itself and to the previous segment's
  layer input, detached (Transformer-XL's cached memory without gradient). All segments run as
  one batch, so memory grows linearly with the node count and there is no Python loop over nodes.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import SAGEConv

from compiler_opt.policy.config import PolicyConfig
from compiler_opt.policy.features import DEVICE_FEATURE_NAMES, GRAPH_FEATURE_NAMES, NUM_OP_KINDS, PolicyInputs
from graph_ir.features import NODE_FEATURE_NAMES

__all__ = ["GraphEncoder", "SegmentAttention", "Superposition"]


class Superposition(nn.Module):
    """Graph-conditioned elementwise scale `1 + W g`, initialised near 1."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        nn.init.normal_(self.proj.weight, std=1e-3)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor, graph_embedding: torch.Tensor) -> torch.Tensor:
        return x * (1.0 + self.proj(graph_embedding))


class SegmentAttention(nn.Module):
    """One pre-norm Transformer layer over segments of the topological order (module docstring)."""

    def __init__(self, hidden: int, heads: int, segment: int) -> None:
        super().__init__()
        self.segment = segment
        self.norm_q = nn.LayerNorm(hidden)
        self.norm_ff = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))
        # Position inside [memory segment | current segment], learned.
        self.position = nn.Parameter(torch.zeros(2 * segment, hidden))
        nn.init.normal_(self.position, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        count, hidden = x.shape
        if count == 0:
            return x
        s = self.segment
        blocks = -(-count // s)
        padded = torch.cat([x, x.new_zeros(blocks * s - count, hidden)]) if blocks * s != count else x
        current = padded.view(blocks, s, hidden)
        memory = torch.cat([current.new_zeros(1, s, hidden), current[:-1]]).detach()
        keys = torch.cat([memory, current], dim=1)
        pad = torch.zeros(blocks, 2 * s, dtype=torch.bool, device=x.device)
        pad[0, :s] = True  # the first segment has no memory
        tail = blocks * s - count
        if tail:
            pad[-1, 2 * s - tail :] = True  # padding rows of the last segment
        queries = self.norm_q(current) + self.position[s:]
        keys = self.norm_q(keys) + self.position
        out, _ = self.attn(queries, keys, keys, key_padding_mask=pad, need_weights=False)
        current = current + out
        current = current + self.ff(self.norm_ff(current))
        return current.reshape(blocks * s, hidden)[:count]


class GraphEncoder(nn.Module):
    """Node states (N, H) and a graph embedding (H,) from `PolicyInputs`."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        h = config.hidden
        self.kind = nn.Embedding(NUM_OP_KINDS, config.kind_dim)
        self.inp = nn.Sequential(nn.Linear(config.kind_dim + len(NODE_FEATURE_NAMES), h), nn.ReLU(), nn.Linear(h, h))
        self.forward_convs = nn.ModuleList(SAGEConv(h, h, aggr="max", project=True) for _ in range(config.sage_layers))
        self.backward_convs = nn.ModuleList(SAGEConv(h, h, aggr="max", project=True) for _ in range(config.sage_layers))
        self.sage_norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(config.sage_layers))
        summary = 2 * h + len(GRAPH_FEATURE_NAMES) + 2 * len(DEVICE_FEATURE_NAMES)
        self.graph_mlp = nn.Sequential(nn.Linear(summary, h), nn.ReLU(), nn.Linear(h, h))
        self.superpositions = nn.ModuleList(Superposition(h) for _ in range(config.attention_layers))
        self.attention = nn.ModuleList(
            SegmentAttention(h, config.heads, config.segment) for _ in range(config.attention_layers)
        )
        self.out_norm = nn.LayerNorm(h)

    def graph_embedding(self, x: torch.Tensor, inputs: PolicyInputs) -> torch.Tensor:
        if x.shape[0]:
            pooled = torch.cat([x.mean(0), x.max(0).values])
        else:
            pooled = x.new_zeros(2 * x.shape[1])
        devices = torch.cat([inputs.device_x.mean(0), inputs.device_x.max(0).values])
        return self.graph_mlp(torch.cat([pooled, inputs.graph_x, devices]))

    def forward(self, inputs: PolicyInputs) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.inp(torch.cat([self.kind(inputs.op_kind), inputs.node_x], dim=1))
        edges = inputs.edge_index
        reverse = edges.flip(0)
        for fwd, bwd, norm in zip(self.forward_convs, self.backward_convs, self.sage_norms):
            x = norm(x + torch.relu(fwd(x, edges) + bwd(x, reverse)))
        g = self.graph_embedding(x, inputs)
        for modulate, layer in zip(self.superpositions, self.attention):
            x = layer(modulate(x, g))
        return self.out_norm(x), g
