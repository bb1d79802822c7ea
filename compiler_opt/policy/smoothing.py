"""Smoothed decoding: the placement head's per-node scores read as a pairwise model over edges.

The heads score every node's device in parallel (one-shot, non-autoregressive), so the greedy
answer takes each node's most likely device on its own. Where the policy is unsure, neighbours
land on different devices and every such edge is a transfer: a pipeline the policy half-learned
breaks at a few nodes (RESULTS.md h11: rnnlm-2 at 2xV100, 97% of nodes on their target's device
and still 0.74x the expert against the target's 0.53x). A decoder that also asks neighbours to
agree repairs that without search: each node minimises

    -log p(node, device) + weight * (edges to neighbours on another device)

by iterated conditional modes (every node re-decided in parallel from its neighbours' devices,
until nothing changes or `sweeps` ends), started from the greedy answer. Only devices the node
may use are chosen (their log-probability is -inf otherwise). A larger weight trusts the graph
more than the scores; the zero-shot tries a few and simulates each, as it does its samples, so
the decoding never picks a slower answer than the greedy one it starts from.

This is decoding, not training or search: no simulator call decides a node, and the answer is
a function of the policy's scores and the graph alone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SMOOTHING_WEIGHTS", "smooth_placement"]

# The agreement weights zero-shot decodes with (nats per disagreeing neighbour): at 0.3 a node
# follows its neighbours only where the policy is nearly indifferent, at 3 almost always.
SMOOTHING_WEIGHTS = (0.3, 1.0, 3.0)


def smooth_placement(log_probs: np.ndarray, edge_index: np.ndarray, weight: float, *, start: np.ndarray | None = None, sweeps: int = 10) -> np.ndarray:
    """(N,) int64 devices minimising the module docstring's cost by iterated conditional modes.
    `log_probs` (N, D): the placement head's log-probabilities (-inf: a masked device);
    `edge_index` (2, E) producer -> consumer rows; `start`: the first answer (default: the
    per-node argmax)."""
    log_probs = np.asarray(log_probs, dtype=np.float64)
    count, devices = log_probs.shape
    if weight < 0:
        raise ValueError(f"smoothing weight must be >= 0, got {weight}")
    allowed = np.isfinite(log_probs)
    # Masked devices cost "infinity" but stay finite so sums never turn into nan.
    unary = np.where(allowed, -log_probs, np.inf)
    device = np.asarray(start if start is not None else np.where(allowed, log_probs, -np.inf).argmax(1), dtype=np.int64).copy()
    if count == 0 or edge_index.shape[1] == 0 or weight == 0:
        return device
    src, dst = np.asarray(edge_index[0]), np.asarray(edge_index[1])
    degree = np.bincount(src, minlength=count) + np.bincount(dst, minlength=count)
    for _ in range(sweeps):
        agree = np.zeros((count, devices))
        np.add.at(agree, (src, device[dst]), 1.0)
        np.add.at(agree, (dst, device[src]), 1.0)
        cost = unary + weight * (degree[:, None] - agree)
        new = cost.argmin(1)
        if np.array_equal(new, device):
            break
        device = new
    return device
