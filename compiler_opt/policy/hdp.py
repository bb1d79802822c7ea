"""The HDP-style reference policy: a grouper and a placer (Mirhoseini et al., "A Hierarchical
Model for Device Placement", ICLR 2018), on the same `PolicyInputs` as GO.

- **Grouper**: a feed-forward network over each node's features (op-kind embedding, log sizes,
  FLOPs, degrees, topological position, and the mean of its producers' and consumers' features,
  HDP's "adjacency information") with a softmax over `groups` groups; every node's group is
  sampled independently.
- **Group embeddings** (HDP section 2): per sampled group, the count of each op kind, the
  number of member nodes, the sum of member FLOPs and output bytes, and the group's row and
  column of the group-to-group edge-count matrix (log1p-scaled). They depend on the sampled
  grouping, so no gradient flows through them (as in HDP, where they are inputs to the placer).
- **Placer**: a sequence-to-sequence LSTM with content-based attention: a bidirectional LSTM
  encodes the group embeddings in group order, an LSTM decoder emits one device per group,
  reading the previous group's device embedding and attending over the encoder states.
  A group may only use a device every member allows (`PolicyInputs.device_mask`); a group whose
  members share no device may use any device a member allows, and `node_devices` moves a node
  off a device it may not use (to its first allowed device), so no node lands on a masked device.

Unlike GO this policy is tied to one device count (its output layer has `num_devices` rows) and
learns one graph at a time: it is the search-from-scratch baseline GO's speed-up is measured
against. `sample` returns the log-probability of the grouping plus the placement, with gradient,
for REINFORCE (`compiler_opt/rl/hdp.py`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from compiler_opt.policy.config import PolicyConfigError
from graph_ir.features import NODE_FEATURE_NAMES

if TYPE_CHECKING:
    from compiler_opt.policy.features import PolicyInputs

__all__ = ["HdpPolicy", "HdpPolicyConfig", "HdpSample", "node_devices"]

_FLOPS = NODE_FEATURE_NAMES.index("log_flops")
_BYTES = NODE_FEATURE_NAMES.index("log_out_bytes")


@dataclass(frozen=True)
class HdpPolicyConfig:
    groups: int = 64  # HDP used 256 groups for graphs of tens of thousands of ops
    hidden: int = 64
    kind_embedding: int = 16

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class HdpSample:
    group: torch.Tensor  # (K, N) int64
    group_device: torch.Tensor  # (K, G) int64
    device: torch.Tensor  # (K, N) int64, after moving nodes off devices they may not use
    log_prob: torch.Tensor  # (K,) grouping + placement, with gradient
    entropy: torch.Tensor  # (K,) mean per-decision entropy, with gradient


def node_devices(group: torch.Tensor, group_device: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(K, N) devices: each node's group's device, or the node's first allowed device when the
    group's device is masked for it."""
    device = torch.gather(group_device, 1, group)
    allowed = mask[torch.arange(mask.shape[0]).unsqueeze(0), device]
    fallback = mask.float().argmax(dim=1).unsqueeze(0).expand_as(device)
    return torch.where(allowed, device, fallback)


class HdpPolicy(nn.Module):
    def __init__(self, num_op_kinds: int, num_devices: int, config: HdpPolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or HdpPolicyConfig()
        self.num_op_kinds = num_op_kinds
        self.num_devices = num_devices
        c = self.config
        features = len(NODE_FEATURE_NAMES)
        node_in = c.kind_embedding + 3 * features
        self.kind = nn.Embedding(num_op_kinds, c.kind_embedding)
        self.grouper = nn.Sequential(nn.Linear(node_in, c.hidden), nn.ReLU(), nn.Linear(c.hidden, c.groups))
        group_in = num_op_kinds + 3 + 2 * c.groups
        self.group_proj = nn.Linear(group_in, c.hidden)
        self.encoder = nn.LSTM(c.hidden, c.hidden, batch_first=True, bidirectional=True)
        self.enc_proj = nn.Linear(2 * c.hidden, c.hidden)
        self.device_embedding = nn.Embedding(num_devices + 1, c.hidden)  # last row: "no previous group"
        self.decoder = nn.LSTMCell(2 * c.hidden, c.hidden)
        self.attn_query = nn.Linear(c.hidden, c.hidden)
        self.out = nn.Linear(2 * c.hidden, num_devices)

    # -- grouper -------------------------------------------------------------------------------
    def node_inputs(self, inputs: PolicyInputs) -> torch.Tensor:
        x = inputs.node_x
        n = x.shape[0]
        src, dst = inputs.edge_index[0], inputs.edge_index[1]
        ones = torch.ones(src.shape[0])
        # Mean features of producers and of consumers (HDP's adjacency input, made size-free).
        pred = torch.zeros_like(x).index_add_(0, dst, x[src]) / torch.zeros(n).index_add_(0, dst, ones).clamp(min=1).unsqueeze(1)
        succ = torch.zeros_like(x).index_add_(0, src, x[dst]) / torch.zeros(n).index_add_(0, src, ones).clamp(min=1).unsqueeze(1)
        return torch.cat([self.kind(inputs.op_kind), x, pred, succ], dim=1)

    def group_embeddings(self, inputs: PolicyInputs, group: torch.Tensor) -> torch.Tensor:
        """(K, G, hidden) from sampled groupings (K, N); no gradient through the counts."""
        k, n = group.shape
        g = self.config.groups
        src, dst = inputs.edge_index[0], inputs.edge_index[1]
        kinds = nn.functional.one_hot(inputs.op_kind, self.num_op_kinds).float()
        flops = torch.pow(10.0, inputs.node_x[:, _FLOPS].clamp(max=15)) / 1e9
        out_bytes = torch.pow(10.0, inputs.node_x[:, _BYTES].clamp(max=15)) / 1e6
        rows = []
        with torch.no_grad():
            for sample in group:
                counts = torch.zeros(g, self.num_op_kinds).index_add_(0, sample, kinds)
                size = counts.sum(dim=1, keepdim=True)
                work = torch.zeros(g).index_add_(0, sample, flops).unsqueeze(1)
                bytes_ = torch.zeros(g).index_add_(0, sample, out_bytes).unsqueeze(1)
                adjacency = torch.bincount(sample[src] * g + sample[dst], minlength=g * g).view(g, g).float()
                rows.append(torch.log1p(torch.cat([counts, size, work, bytes_, adjacency, adjacency.t()], dim=1)))
        return self.group_proj(torch.stack(rows))

    # -- sampling ------------------------------------------------------------------------------
    def sample(self, inputs: PolicyInputs, samples: int, *, generator: torch.Generator | None = None, greedy: bool = False) -> HdpSample:
        mask = inputs.device_mask
        if mask.shape[1] != self.num_devices:
            raise PolicyConfigError(f"HDP policy built for {self.num_devices} devices, the topology has {mask.shape[1]}", field="num_devices")
        logits = self.grouper(self.node_inputs(inputs))  # (N, G)
        log_p = torch.log_softmax(logits, dim=-1)
        if greedy:
            group = logits.argmax(dim=-1).unsqueeze(0).expand(samples, -1)
        else:
            group = torch.multinomial(log_p.exp(), samples, replacement=True, generator=generator).t()  # (K, N)
        group_lp = torch.gather(log_p.unsqueeze(0).expand(samples, -1, -1), 2, group.unsqueeze(2)).squeeze(2).sum(dim=1)
        group_ent = -(log_p.exp() * log_p).sum(dim=-1).mean().expand(samples)

        emb = self.group_embeddings(inputs, group)  # (K, G, H)
        encoded, _ = self.encoder(emb)
        keys = self.enc_proj(encoded)  # (K, G, H)
        allowed = self._group_masks(mask, group)  # (K, G, D)
        k, g, h = keys.shape
        state = (torch.zeros(k, h), torch.zeros(k, h))
        prev = torch.full((k,), self.num_devices, dtype=torch.long)
        chosen, place_lp, place_ent = [], torch.zeros(k), torch.zeros(k)
        for step in range(g):
            state = self.decoder(torch.cat([emb[:, step], self.device_embedding(prev)], dim=1), state)
            query = self.attn_query(state[0])
            weights = torch.softmax(torch.einsum("kh,kgh->kg", query, keys) / h**0.5, dim=1)
            context = torch.einsum("kg,kgh->kh", weights, encoded[..., :h] + encoded[..., h:])
            step_logits = self.out(torch.cat([state[0], context], dim=1)).masked_fill(~allowed[:, step], float("-inf"))
            step_lp = torch.log_softmax(step_logits, dim=-1)
            if greedy:
                pick = step_logits.argmax(dim=-1)
            else:
                pick = torch.multinomial(step_lp.exp(), 1, generator=generator).squeeze(1)
            place_lp = place_lp + step_lp.gather(1, pick.unsqueeze(1)).squeeze(1)
            p = step_lp.exp()
            place_ent = place_ent - (p * step_lp.masked_fill(p == 0, 0.0)).sum(dim=-1)
            chosen.append(pick)
            prev = pick
        group_device = torch.stack(chosen, dim=1)
        entropy = (group_ent + place_ent / g) / 2
        return HdpSample(group, group_device, node_devices(group, group_device, mask), group_lp + place_lp, entropy)

    def _group_masks(self, mask: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
        """(K, G, D): devices every member allows (empty group: all; no common device: any member's)."""
        k = group.shape[0]
        g = self.config.groups
        blocked = (~mask).float()
        out = []
        for sample in group:
            any_blocked = torch.zeros(g, mask.shape[1]).index_add_(0, sample, blocked) > 0
            every = ~any_blocked
            some = torch.zeros(g, mask.shape[1]).index_add_(0, sample, mask.float()) > 0
            none_common = ~every.any(dim=1, keepdim=True)
            out.append(torch.where(none_common, some, every))
        return torch.stack(out).reshape(k, g, -1)
