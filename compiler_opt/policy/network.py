"""`GoPolicy`: encoder + joint heads + value head, with iterative non-autoregressive sampling.

One call encodes the graph once (GraphSAGE and segmented attention do not depend on the
decisions), then runs the heads `iterations` times: iteration t samples every node's three
actions in parallel, conditioned on iteration t-1's samples. `sample` draws `samples` episodes
at once (a batch dimension through the heads), `evaluate` recomputes log-probabilities and
entropies of stored actions for PPO (all iterations in one batch, teacher-forced on the stored
previous iteration). An episode's log-probability is the sum over iterations, nodes and tasks.

Actions are int64 (iterations, samples, N, 3): device index, fusion level, priority level; the
last iteration's actions are the episode's decisions.

Warm start: `initial` (K, N, 3) or (N, 3) gives the decisions the first round is conditioned on
(a classical placement or the best episode so far) instead of "none"; such an episode is
seeded (heads.py: every round edits its previous one). `evaluate_decisions` needs the same
`initial` to recompute the log-probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from compiler_opt.policy.config import PolicyConfig
from compiler_opt.policy.context import ContextGraph, context_graph
from compiler_opt.policy.encoder import GraphEncoder
from compiler_opt.policy.features import DEVICE_FEATURE_NAMES, PolicyInputs
from compiler_opt.policy.heads import JointHeads, ValueHead

__all__ = ["Encoded", "GoPolicy", "Sampled", "gumbel_argmax"]


def gumbel_argmax(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One draw per row from softmax(`logits`) by Gumbel-max: a masked action (-inf) never wins."""
    uniform = torch.rand(logits.shape, generator=generator).clamp_(1e-20, 1.0)
    return (logits - torch.log(-torch.log(uniform))).argmax(-1)


@dataclass
class Encoded:
    nodes: torch.Tensor  # (N, H)
    graph: torch.Tensor  # (H,)
    devices: torch.Tensor  # (D, H)
    mask: torch.Tensor  # (N, D) bool
    position: torch.Tensor  # (N,) topological depth 0..1
    ordinal: torch.Tensor  # (D,) device ordinal among its kind 0..1
    context: ContextGraph | None = None  # placement-context edges (policy/context.py)


@dataclass
class Sampled:
    actions: torch.Tensor  # (T, K, N, 3) int64
    log_prob: torch.Tensor  # (K,) summed over iterations, nodes and tasks
    value: torch.Tensor  # () the value head's estimate for the graph
    decision_log_prob: torch.Tensor | None = None  # (T, K, N, 3) per decision (per-decision PPO ratios)
    place_log_prob: torch.Tensor | None = None  # (K, N, D) the last round's placement log-probabilities (smoothed decoding)


def _log_softmax_parts(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log-probabilities and per-row entropy; -inf logits (masked) contribute nothing."""
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    # Masked entries: p = 0 and logp = -inf; zero the log first so no NaN reaches the gradient.
    entropy = -(p * logp.masked_fill(torch.isinf(logp), 0.0)).sum(-1)
    return logp, entropy


class GoPolicy(nn.Module):
    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or PolicyConfig()
        self.encoder = GraphEncoder(self.config)
        self.heads = JointHeads(self.config)
        self.value_head = ValueHead(self.config)

    def encode(self, inputs: PolicyInputs) -> Encoded:
        nodes, graph = self.encoder(inputs)
        devices = self.heads.device_embeddings(inputs.device_x, graph)
        ordinal = inputs.device_x[:, DEVICE_FEATURE_NAMES.index("ordinal")]
        return Encoded(nodes, graph, devices, inputs.device_mask, inputs.position, ordinal, context_graph(inputs))

    def value(self, encoded: Encoded) -> torch.Tensor:
        return self.value_head(encoded.nodes, encoded.graph)

    def _logits(self, enc: Encoded, previous: torch.Tensor | None, batch: int, seeded: bool = False) -> tuple[torch.Tensor, ...]:
        return self.heads(
            enc.nodes, enc.graph, enc.devices, enc.mask, previous, batch, enc.position, enc.ordinal, seeded, enc.context
        )

    @staticmethod
    def _initial(initial: torch.Tensor | None, samples: int, count: int) -> torch.Tensor | None:
        """`initial` as int64 (samples, N, 3), or None."""
        if initial is None:
            return None
        initial = torch.as_tensor(initial, dtype=torch.int64)
        if initial.dim() == 2:
            initial = initial.unsqueeze(0).expand(samples, -1, -1)
        if tuple(initial.shape) != (samples, count, 3):
            raise ValueError(f"initial decisions of shape {tuple(initial.shape)}, expected ({samples}, {count}, 3)")
        return initial

    @torch.no_grad()
    def sample(
        self,
        inputs: PolicyInputs,
        samples: int = 1,
        *,
        generator: torch.Generator | None = None,
        greedy: bool = False,
        greedy_first: bool = False,
        initial: torch.Tensor | None = None,
    ) -> Sampled:
        """Draw `samples` episodes (greedy: the most likely action at every iteration;
        greedy_first: episode 0 greedy, the others drawn exactly as without it, one encoding for
        all); with `initial` (N, 3) or (samples, N, 3), seeded episodes that edit those decisions."""
        enc = self.encode(inputs)
        previous = self._initial(initial, samples, enc.nodes.shape[0])
        seeded = previous is not None
        steps = []
        step_logps = []
        place_logp = None
        for _ in range(self.config.iterations):
            chosen = []
            chosen_logp = []
            for task, logits in enumerate(self._logits(enc, previous, samples, seeded)):
                logp = torch.log_softmax(logits, dim=-1)
                if task == 0:
                    place_logp = logp
                if greedy:
                    action = logits.argmax(-1)
                else:
                    action = gumbel_argmax(logits, generator)
                    if greedy_first:
                        action[0] = logits[0].argmax(-1)
                chosen_logp.append(logp.gather(-1, action.unsqueeze(-1)).squeeze(-1))
                chosen.append(action)
            previous = torch.stack(chosen, dim=-1)
            steps.append(previous)
            step_logps.append(torch.stack(chosen_logp, dim=-1))
        per_decision = torch.stack(step_logps)  # (T, K, N, 3)
        return Sampled(torch.stack(steps), per_decision.sum((0, 2, 3)), self.value(enc), per_decision, place_logp)

    def evaluate(
        self, inputs: PolicyInputs, actions: torch.Tensor, initial: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log_prob (K,), mean entropy per node (K,), value ()) of stored `actions` (T, K, N, 3)."""
        per_decision, entropy, value = self.evaluate_decisions(inputs, actions, initial)
        return per_decision.sum((0, 2, 3)), entropy, value

    def evaluate_decisions(
        self, inputs: PolicyInputs, actions: torch.Tensor, initial: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-probability of every decision (T, K, N, 3), mean entropy per node (K,), value ())
        of stored `actions` (T, K, N, 3); iteration t > 0 is teacher-forced on the stored t-1,
        iteration 0 on `initial` (seeded episodes, as sampled) or on nothing."""
        enc = self.encode(inputs)
        iterations, samples, count, _ = actions.shape
        first = self._initial(initial, samples, count)
        seeded = first is not None
        if first is not None:
            # Every round is conditioned on decisions: one batch for all of them.
            previous_all = torch.cat([first.unsqueeze(0), actions[:-1]]).reshape(iterations * samples, count, 3)
            parts = [(previous_all, actions.reshape(iterations * samples, count, 3), iterations * samples)]
        else:
            parts = [(None, actions[0], samples)]
            if iterations > 1:
                flat_prev = actions[:-1].reshape((iterations - 1) * samples, count, 3)
                flat_act = actions[1:].reshape((iterations - 1) * samples, count, 3)
                parts.append((flat_prev, flat_act, (iterations - 1) * samples))
        chunks = []
        entropy = torch.zeros(samples)
        for previous, act, batch in parts:
            tasks = []
            for task, logits in enumerate(self._logits(enc, previous, batch, seeded)):
                logp, ent = _log_softmax_parts(logits)
                tasks.append(logp.gather(-1, act[..., task : task + 1]).squeeze(-1))  # (batch, N)
                entropy = entropy + ent.mean(-1).view(-1, samples).sum(0)
            chunks.append(torch.stack(tasks, dim=-1).view(-1, samples, count, 3))
        return torch.cat(chunks), entropy / iterations, self.value(enc)
