"""The three task heads, linked by shared cross-task attention, and the value head.

Per node there are three task tokens (placement, fusion, scheduling). Each token is the node
state plus a task embedding plus the embedding of that task's decision at the previous
refinement iteration (a learned "none" at the first). One attention layer, shared by the three
tasks, runs over each node's three tokens, so every task sees the others' previous decisions;
graph-conditioned superposition scales the tokens first. Then:
- placement: the token is projected and scored against device embeddings (an MLP of each
  device's features and the graph embedding), so the number of devices is free; plus a learned
  contiguity term `c * -(depth - ordinal)^2` (node's topological depth vs the device's ordinal
  among its kind, both 0..1) that lets the policy express the layer-wise split
  with one weight, initialised at 1 so an untrained policy starts near a layer-wise split
  (a random placement is 3-5x slower than the human expert and PPO on two cores cannot climb
  out of that in hours); masked devices get -inf;
- fusion priority: logits over `fusion_levels` classes (level 0 starts no merge), biased at
  initialisation toward the top level (see the comment there);
- scheduling priority: logits over `priority_levels` classes.
The value head reads the graph embedding and the mean node state.

Seeded episodes (warm start, `compiler_opt/rl/warm_start.py`): the first refinement round is
conditioned on a given placement (a classical method's) instead of "none", and every round of
such an episode edits its previous round: each task's logits get a learned `keep` bonus (one per
task) on the previous round's decision, and placement drops the contiguity term (a from-scratch
prior: a seed that is not a layer-wise split would be pulled back toward one, up to -10 per
node, and the policy could not propose small edits of it). Keeping fusion and priority levels
too: with free fusion and scheduling heads the seeded episodes were 3-30% slower than the same
placement with the seed's own levels (the heads are barely trained; WORKSPACE.md "Warm start"). Unseeded episodes are computed
exactly as before (a checkpoint without `keep` loads with its initial value).
"""

from __future__ import annotations

import torch
from torch import nn

from compiler_opt.policy.config import PolicyConfig
from compiler_opt.policy.context import CONTEXT_FEATURES, NODE_CONTEXT_FEATURES, ContextGraph, context_features
from compiler_opt.policy.encoder import Superposition
from compiler_opt.policy.features import DEVICE_FEATURE_NAMES

__all__ = ["KEEP_INIT", "JointHeads", "ValueHead", "TASKS"]

TASKS = ("placement", "fusion", "scheduling")

# Initial logit bonus for keeping the previous round's decision in a seeded episode. Chosen on
# training-split workloads at paper size (resnet-50 4xV100, bert-base 8xV100, rnnlm-2 2xV100,
# shipped checkpoint; WORKSPACE.md "Warm start"): at 6 the heads move 1-4% of the nodes per
# episode and every such episode was 15-90% slower than its seed; at 8, 0.1-0.6%; at 10 almost none.
KEEP_INIT = 8.0


class JointHeads(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        h = config.hidden
        self.config = config
        self.task = nn.Parameter(torch.randn(3, h) * 0.02)
        self.none = nn.Parameter(torch.randn(3, h) * 0.02)  # "no previous decision" per task
        self.device_mlp = nn.Sequential(nn.Linear(len(DEVICE_FEATURE_NAMES) + h, h), nn.ReLU(), nn.Linear(h, h))
        self.prev_device = nn.Linear(h, h)
        self.prev_fusion = nn.Embedding(config.fusion_levels, h)
        self.prev_priority = nn.Embedding(config.priority_levels, h)
        self.superposition = Superposition(h)
        self.norm = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.mix = nn.Linear(h, h)
        self.place_query = nn.Linear(h, h)
        self.contiguity = nn.Parameter(torch.ones(()))
        self.keep = nn.Parameter(torch.full((3,), KEEP_INIT))  # placement, fusion, scheduling
        self.fusion_out = nn.Linear(h, config.fusion_levels)
        with torch.no_grad():
            # Start by fusing: the top level gets +2 (p ~ 0.7 with 4 levels). Unfused, the many small
            # elementwise kernels of a real graph each pay a launch: an untrained policy whose
            # argmax was "no merge" for most nodes was 7.5x slower than the human expert on
            # rnnlm-8, and 40 PPO iterations had not learned fusion's value.
            self.fusion_out.bias.zero_()
            self.fusion_out.bias[-1] = 2.0
        self.priority_out = nn.Linear(h, config.priority_levels)
        # Placement context (policy/context.py): a per-(node, device) score added to the placement
        # logits and a per-node vector added to the task tokens. Both end in zero-initialised
        # layers, so a checkpoint trained before they existed computes exactly what it did.
        self.context_score = nn.Sequential(nn.Linear(len(CONTEXT_FEATURES), 16), nn.ReLU(), nn.Linear(16, 1))
        self.context_token = nn.Linear(len(NODE_CONTEXT_FEATURES), h)
        for layer in (self.context_score[-1], self.context_token):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def device_embeddings(self, device_x: torch.Tensor, graph_embedding: torch.Tensor) -> torch.Tensor:
        g = graph_embedding.expand(device_x.shape[0], -1)
        return self.device_mlp(torch.cat([device_x, g], dim=1))

    def forward(
        self,
        nodes: torch.Tensor,
        graph_embedding: torch.Tensor,
        devices: torch.Tensor,
        mask: torch.Tensor,
        previous: torch.Tensor | None,
        batch: int,
        position: torch.Tensor | None = None,
        ordinal: torch.Tensor | None = None,
        seeded: bool = False,
        context: ContextGraph | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Logits for `batch` samples: placement (B, N, D), fusion (B, N, F), scheduling (B, N, P).

        `previous`: (B, N, 3) int64 decisions of the previous iteration (device, fusion level,
        priority level), or None at the first iteration. `seeded`: an episode that edits a
        given placement (module docstring): keep bonus instead of the contiguity term.
        `context`: the graph's placement-context edges (policy/context.py), read when there are
        previous decisions.
        """
        if seeded and previous is None:
            raise ValueError("a seeded round needs the previous decisions")
        count, h = nodes.shape
        tokens = nodes[None, :, None, :] + self.task[None, None]  # (1, N, 3, H)
        if previous is None:
            # the first round's tokens are the same for every sample: computed once, the logits expanded to the batch
            # (on 29k-node gnmt-8 the heads' cross-task attention over 9 samples was most of a round's CPU)
            prev = self.none[None, None].expand(1, count, 3, h)
        else:
            prev = torch.stack(
                [
                    self.prev_device(devices)[previous[..., 0]],
                    self.prev_fusion(previous[..., 1]),
                    self.prev_priority(previous[..., 2]),
                ],
                dim=2,
            )
        pair = None
        if previous is not None and context is not None:
            pair, node = context_features(context, previous[..., 0], devices.shape[0])
            prev = prev + self.context_token(node)[:, :, None, :]
        tokens = self.superposition(tokens + prev, graph_embedding)  # (B, N, 3, H)
        tokens = tokens + self._cross_task(self.norm(tokens))
        place = self.place_query(tokens[:, :, 0]) @ devices.T / (h**0.5)  # (B, N, D)
        if pair is not None:
            place = place + self.context_score(pair).squeeze(-1)
        fusion, priority = self.fusion_out(tokens[:, :, 1]), self.priority_out(tokens[:, :, 2])
        if seeded and previous is not None:
            place = place + self.keep[0] * self._one_hot(previous[..., 0], place)
            fusion = fusion + self.keep[1] * self._one_hot(previous[..., 1], fusion)
            priority = priority + self.keep[2] * self._one_hot(previous[..., 2], priority)
        elif position is not None and ordinal is not None:
            place = place - self.contiguity * (position[:, None] - ordinal[None, :]).pow(2) * 10.0
        place = place.masked_fill(~mask[None], float("-inf"))
        if previous is None:
            place, fusion, priority = (t.expand(batch, *t.shape[1:]) for t in (place, fusion, priority))
        return place, fusion, priority

    @staticmethod
    def _one_hot(index: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(index, logits.shape[-1]).to(logits.dtype)


    def _cross_task(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head attention among each node's three task tokens (B, N, 3, H), as broadcast products
        summed over the head width: with three tokens, millions of 3x3 batched matmuls (einsum's form until
        the forty-seventh session) spent most of their time permuting copies (30% slower on 29k nodes x 9)."""
        heads = self.config.heads
        *lead, tasks, h = x.shape
        q, k, v = self.qkv(x).view(*lead, tasks, 3, heads, h // heads).unbind(-3)  # each (..., tasks, heads, d)
        scores = (q.unsqueeze(-3) * k.unsqueeze(-4)).sum(-1) / (h // heads) ** 0.5  # (..., t, s, heads)
        out = (scores.softmax(-2).unsqueeze(-1) * v.unsqueeze(-4)).sum(-3)  # (..., t, heads, d)
        return self.mix(out.reshape(*lead, tasks, h))


class ValueHead(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        h = config.hidden
        self.mlp = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 1))

    def forward(self, nodes: torch.Tensor, graph_embedding: torch.Tensor) -> torch.Tensor:
        mean = nodes.mean(0) if nodes.shape[0] else nodes.new_zeros(nodes.shape[1])
        return self.mlp(torch.cat([graph_embedding, mean])).squeeze(-1)
