"""Placement context: where a node's producers and consumers sit, and how loaded each device is,
under the previous refinement round's placement.

Without it the heads see only each node's *own* previous decision (its three task tokens attend
to each other, never to other nodes), so no node can tell whether its neighbours share its
device, which is what decides most moves (RESULTS.md h8: the shipped policy's move scores had a
held-out AUC of 0.45). This module is a placement-aware message-passing step: every edge sends its
producer's (consumer's) previous device along, weighted by the bytes it carries, and each node
sums what arrives per device. Per (node, device) the heads then read:

- `in_share`, `out_share`: the fraction of the node's input (output) bytes whose producer
  (consumer) is on the device: moving there makes those transfers local;
- `in_gain`, `out_gain`: the same minus the value on the node's current device (what a move
  there gains or loses);
- `load`, `load_gain`: the device's share of the summed node time (each node's roofline time on
  that device), over the mean device's, and its difference to the current device's;
- `weight`: the node's own time on the device over the mean device load (how far moving it
  shifts the balance).

All features are ratios, so they mean the same on 300 or 100k nodes and 2 or 8 devices. The
scatter is two `index_add_` over the edges per round: linear in the graph's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from compiler_opt.policy.features import PolicyInputs

__all__ = ["CONTEXT_FEATURES", "NODE_CONTEXT_FEATURES", "ContextGraph", "context_features", "context_graph"]

CONTEXT_FEATURES = ("in_share", "out_share", "in_gain", "out_gain", "load", "load_gain", "weight")
# Per node, the current device's view: co-located input and output bytes, its device's load.
NODE_CONTEXT_FEATURES = ("in_share", "out_share", "load")


@dataclass
class ContextGraph:
    """What the context step needs of one graph, computed once per encoding."""

    src: torch.Tensor  # (E,) int64 producer rows
    dst: torch.Tensor  # (E,) int64 consumer rows
    in_weight: torch.Tensor  # (E,) the edge's share of its consumer's input bytes
    out_weight: torch.Tensor  # (E,) the edge's share of its producer's output bytes
    time: torch.Tensor  # (N, D) node time on each device (seconds; ones when unknown)


def _shares(index: torch.Tensor, weight: torch.Tensor, count: int) -> torch.Tensor:
    """`weight` divided by the sum of the weights with the same `index` (edges of one node)."""
    total = torch.zeros(count, dtype=weight.dtype).index_add_(0, index, weight)
    return weight / total[index].clamp_min(1e-30)


def context_graph(inputs: PolicyInputs) -> ContextGraph:
    count, devices = inputs.num_nodes, inputs.num_devices
    src, dst = inputs.edge_index[0], inputs.edge_index[1]
    # Edges of unknown size count as one byte each; a node whose edges are all zero shares equally.
    weight = inputs.edge_bytes.double().clamp_min(1.0) if inputs.edge_bytes is not None else torch.ones(src.shape[0], dtype=torch.float64)
    time = inputs.node_time if inputs.node_time is not None else torch.ones(count, devices)
    return ContextGraph(
        src,
        dst,
        _shares(dst, weight, count).float(),
        _shares(src, weight, count).float(),
        time.float(),
    )


def context_features(graph: ContextGraph, device: torch.Tensor, num_devices: int) -> tuple[torch.Tensor, torch.Tensor]:
    """((B, N, D, len(CONTEXT_FEATURES)), (B, N, len(NODE_CONTEXT_FEATURES))) for previous
    placements `device` (B, N) int64."""
    batch, count = device.shape
    placed = torch.nn.functional.one_hot(device, num_devices).float()  # (B, N, D)
    in_share = torch.zeros(batch, count, num_devices).index_add_(1, graph.dst, placed[:, graph.src] * graph.in_weight[None, :, None])
    out_share = torch.zeros(batch, count, num_devices).index_add_(1, graph.src, placed[:, graph.dst] * graph.out_weight[None, :, None])
    load = (placed * graph.time[None]).sum(1)  # (B, D)
    mean = load.mean(-1, keepdim=True).clamp_min(1e-30)
    load = load / mean
    here = device.unsqueeze(-1)
    cur_in, cur_out = in_share.gather(-1, here), out_share.gather(-1, here)
    load_n = load[:, None, :].expand(batch, count, num_devices)
    cur_load = load_n.gather(-1, here)
    weight = (graph.time[None] / mean[:, None, :]).clamp(max=10.0)
    pair = torch.stack(
        [in_share, out_share, in_share - cur_in, out_share - cur_out, load_n, load_n - cur_load, weight], dim=-1
    )
    node = torch.cat([cur_in, cur_out, cur_load], dim=-1)
    return pair, node
