"""Partitioned decoding: the policy's placement read as co-location, cut by METIS.

The policy's per-node device distributions say more about which nodes belong together than
about which device a group should run on: on training graphs its targets are METIS partitions
whose device *labels* are arbitrary (RESULTS.md h13: 39% of rnnlm training's nodes on their
target device), and a per-node argmax of a distribution that is right about groups but unsure
about labels scatters a layer over devices. This decoding keeps what the policy is sure of:
each data edge gets the probability that both ends land on the same device,
`agree(u, v) = sum_d p_u(d) p_v(d)`, its tensor bytes are scaled by `agree ** gamma`, and METIS
cuts the graph into k parts (vertex weight: the node's fastest compute time) where the policy
expects a device change and the tensor is small. Each part then goes to the device that holds
most of its nodes' probability mass (one device per part, an assignment problem), and a node
that may not use its part's device keeps the policy's own.

k runs over the usable device count and its halves down to 2, with equal parts; one more cut per
gamma has one part per device that the policy gives at least 5% of its expected load
(`sum_n p_n(d) * time_n`), sized by that load, each part on its device: the policy says how much
each device should run, METIS where to cut (smaller shares are dropped: METIS cannot fill a part
of almost no weight, and says so on stdout). gamma runs over a few exponents; each distinct placement
is one zero-shot candidate, simulated like the sampled episodes. gamma = 0 is
plain METIS on bytes, a classical method, so it is not a candidate here (RESULTS.md h14 reports it
as the control).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["AGREEMENT_EXPONENTS", "edge_agreement", "partitioned_placements"]

# Exponents of the edge agreement: 1 trusts the policy's probabilities as they are, 4 cuts
# almost only where it is confident of a change (RESULTS.md h14: chosen on the training split's
# inference cells; each wins cells the others lose).
AGREEMENT_EXPONENTS: tuple[float, ...] = (1.0, 2.0, 4.0)
_MIN_SHARE = 0.05


def edge_agreement(prob: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(E,) probability that each edge's two ends are placed on the same device, the nodes drawn
    independently from `prob` (N, D)."""
    prob = np.asarray(prob, dtype=np.float64)
    return np.einsum("ed,ed->e", prob[src], prob[dst])


def _part_devices(parts: np.ndarray, count: int, prob: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Each part's device: the assignment of parts to distinct candidates with the most
    probability mass of the parts' nodes on their device."""
    from scipy.optimize import linear_sum_assignment

    mass = np.zeros((count, candidates.size))
    np.add.at(mass, parts, prob[:, candidates])
    rows, cols = linear_sum_assignment(-mass)
    device_of = np.empty(count, dtype=np.int64)
    device_of[rows] = candidates[cols]
    return device_of


def partitioned_placements(
    log_prob: np.ndarray,
    edge_index: np.ndarray,
    edge_bytes: np.ndarray | None,
    node_time: np.ndarray | None,
    mask: np.ndarray,
    fallback: np.ndarray,
    *,
    exponents: Sequence[float] = AGREEMENT_EXPONENTS,
    seed: int = 0,
) -> list[np.ndarray]:
    """The distinct partitioned decodings (module docstring), each (N,) int64.

    `log_prob` (N, D): the policy's placement log-probabilities; `edge_index` (2, E) producer ->
    consumer; `edge_bytes` (E,); `node_time` (N, D) seconds of each node on each device (None, as
    in `PolicyInputs` of a profiled problem: every edge one byte, every node one unit); `mask`
    (N, D) bool, the devices each node may use; `fallback` (N,) the policy's own device, kept by
    a node whose part's device is masked for it. Devices no node may use are never a part's."""
    from passes.placement.partition import metis_parts

    prob = np.exp(np.asarray(log_prob, dtype=np.float64))
    mask = np.asarray(mask, dtype=bool)
    fallback = np.asarray(fallback, dtype=np.int64)
    count = prob.shape[0]
    candidates = np.flatnonzero(mask.any(axis=0))
    if count < 2 or candidates.size < 2:
        return []
    src, dst = np.asarray(edge_index, dtype=np.int64)
    agree = edge_agreement(prob, src, dst)
    edge_bytes = np.ones(src.size) if edge_bytes is None else np.maximum(np.asarray(edge_bytes, dtype=np.float64), 1.0)
    vertex = np.ones(count) if node_time is None else np.asarray(node_time, dtype=np.float64)[:, candidates].min(axis=1)
    rows = np.arange(count)
    out: list[np.ndarray] = []
    seen = {fallback.tobytes()}
    load = (prob[:, candidates] * vertex[:, None]).sum(axis=0)
    busy = load >= _MIN_SHARE * load.sum()

    def keep(device: np.ndarray) -> None:
        device = np.where(mask[rows, device], device, fallback)
        if device.tobytes() not in seen:
            seen.add(device.tobytes())
            out.append(device)

    for gamma in exponents:
        weight = edge_bytes * agree**gamma
        k = candidates.size
        while k >= 2:
            parts = metis_parts(k, src, dst, weight, vertex, seed=seed)
            keep(_part_devices(parts, k, prob, candidates)[parts])
            k //= 2
        if busy.sum() >= 2:
            keep(candidates[busy][metis_parts(int(busy.sum()), src, dst, weight, vertex, shares=load[busy], seed=seed)])
    return out
