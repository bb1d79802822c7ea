"""Graph-partitioning placements: METIS k-way (pymetis) and a Scotch-like recursive bisection.

Both see the graph as undirected: vertex weight = compute time on the fastest candidate, edge
weight = bytes between the two nodes (both directions merged). Part sizes are proportional to
each device's speed (the inverse of its time for the whole graph). Neither looks at the DAG's
order, so a part may feed another and be fed back: that is what these baselines are.

`scotch` follows Scotch's dual recursive bipartitioning (Pellegrini): the device list is halved
(contiguous halves, so neighbours on a ring stay together) and the graph is bisected to match the
halves' speed, recursively. Each bisection is a spectral bisection (the Fiedler vector of the
weighted Laplacian by sparse shift-invert Lanczos, split at the weight quantile that matches the
target share; graphs above `SPECTRAL_LIMIT` nodes use the topological order as the 1-D embedding)
refined by a Fiduccia-Mattheyses-style pass: single-vertex moves across the cut, best gain first,
kept only while both sides stay within 3 % of their target weight. Scotch itself uses multilevel
coarsening with FM refinement; this is the single-level version.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from passes.infra.registry import register_pass
from passes.placement.base import PlacementPass
from passes.placement.context import PlacementContext

__all__ = ["MetisPlacement", "ScotchPlacement", "SPECTRAL_LIMIT", "metis_parts", "undirected_edges"]

logger = logging.getLogger(__name__)

SPECTRAL_LIMIT = 50_000
_BALANCE_TOLERANCE = 0.03


def undirected_edges(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, num_nodes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric edge list (a, b, weight) with a != b, both directions present, parallel edges
    merged (weights summed)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    keep = src != dst
    src, dst, weight = src[keep], dst[keep], np.asarray(weight, dtype=np.float64)[keep]
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    n = max(num_nodes, 1)
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    merged = np.bincount(inverse.reshape(-1), weights=weight, minlength=keys.size)
    lo, hi = keys // n, keys % n
    return np.r_[lo, hi], np.r_[hi, lo], np.r_[merged, merged]


def _undirected(ctx: PlacementContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return undirected_edges(ctx.edge_src, ctx.edge_dst, ctx.edge_bytes, ctx.num_nodes)


def metis_parts(
    parts: int,
    src: np.ndarray,
    dst: np.ndarray,
    edge_weight: np.ndarray,
    vertex_weight: np.ndarray,
    *,
    shares: np.ndarray | None = None,
    seed: int = 0,
) -> np.ndarray:
    """pymetis k-way partition of the undirected graph of edges `src`-`dst` (either direction,
    merged): (N,) int64 part ids in [0, parts). `shares`: each part's target fraction of the
    vertex weight (None: equal)."""
    import pymetis

    count = int(np.asarray(vertex_weight).shape[0])
    if parts <= 1 or count <= 1:
        return np.zeros(count, dtype=np.int64)
    a, b, weight = undirected_edges(src, dst, edge_weight, count)
    order = np.lexsort((b, a))
    a, b, weight = a[order], b[order], weight[order]
    xadj = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=count), out=xadj[1:])
    # METIS wants positive integers: scale to a fixed resolution, floor at 1.
    vw = np.asarray(vertex_weight, dtype=np.float64)
    vweights = np.maximum(np.rint(vw / max(vw.max(), 1e-30) * 1e5), 1).astype(np.int64)
    eweights = np.maximum(np.rint(weight / max(weight.max(initial=0.0), 1.0) * 1e5), 1).astype(np.int64)
    target = np.full(parts, 1.0 / parts) if shares is None else np.asarray(shares, dtype=np.float64) / np.sum(shares)
    _, out = pymetis.part_graph(
        parts,
        xadj=xadj.tolist(),
        adjncy=b.tolist(),
        vweights=vweights.tolist(),
        eweights=eweights.tolist() if eweights.size else None,
        tpwgts=(target * (1 - 1e-9)).tolist(),
        options=pymetis.Options(seed=seed),
    )
    return np.asarray(out, dtype=np.int64)


def _speed_shares(ctx: PlacementContext, devices: np.ndarray) -> np.ndarray:
    speed = 1.0 / np.maximum(ctx.times[:, devices].sum(axis=0), 1e-30)
    return speed / speed.sum()


def _vertex_weights(ctx: PlacementContext) -> np.ndarray:
    return ctx.times[:, ctx.candidates].min(axis=1)


@register_pass
@dataclass(frozen=True)
class MetisPlacement(PlacementPass):
    """pymetis k-way partitioning, vertex weight = compute time, edge weight = tensor bytes,
    part targets = device speed shares; part i goes to candidate i."""

    name = "metis"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        k = ctx.candidates.size
        if k == 1 or ctx.num_nodes <= 1:
            return np.full(ctx.num_nodes, ctx.candidates[0], dtype=np.int64)
        parts = metis_parts(
            k, ctx.edge_src, ctx.edge_dst, ctx.edge_bytes, _vertex_weights(ctx),
            shares=_speed_shares(ctx, ctx.candidates), seed=self.seed,
        )
        return ctx.candidates[parts]


@register_pass
@dataclass(frozen=True)
class ScotchPlacement(PlacementPass):
    """Scotch-like dual recursive bisection: spectral bisection + FM refinement (module docstring)."""

    name = "scotch"

    def assign(self, ctx: PlacementContext) -> np.ndarray:
        src, dst, weight = _undirected(ctx)
        adjacency: list[list[tuple[int, float]]] = [[] for _ in range(ctx.num_nodes)]
        for a, b, w in zip(src.tolist(), dst.tolist(), weight.tolist()):
            adjacency[a].append((b, w))
        out = np.empty(ctx.num_nodes, dtype=np.int64)
        vw = _vertex_weights(ctx)
        self._split(ctx, np.arange(ctx.num_nodes), ctx.candidates, adjacency, vw, out)
        return out

    def _split(
        self,
        ctx: PlacementContext,
        nodes: np.ndarray,
        devices: np.ndarray,
        adjacency: list[list[tuple[int, float]]],
        vw: np.ndarray,
        out: np.ndarray,
    ) -> None:
        if devices.size == 1 or nodes.size == 0:
            out[nodes] = devices[0]
            return
        half = devices.size // 2
        left_devices, right_devices = devices[:half], devices[half:]
        speed = _speed_shares(ctx, devices)
        share = float(speed[:half].sum())
        left = bisect(nodes, adjacency, vw, share, seed=self.seed)
        self._split(ctx, nodes[left], left_devices, adjacency, vw, out)
        self._split(ctx, nodes[~left], right_devices, adjacency, vw, out)


def bisect(
    nodes: np.ndarray, adjacency: list[list[tuple[int, float]]], vw: np.ndarray, share: float, *, seed: int = 0
) -> np.ndarray:
    """Boolean mask over `nodes`: True for the side that should carry `share` of the weight."""
    count = nodes.size
    local = {int(n): i for i, n in enumerate(nodes.tolist())}
    rows, cols, vals = [], [], []
    for i, n in enumerate(nodes.tolist()):
        for m, w in adjacency[n]:
            j = local.get(m)
            if j is not None:
                rows.append(i)
                cols.append(j)
                vals.append(w)
    weight = vw[nodes]
    total = float(weight.sum())
    embedding = None
    if count <= SPECTRAL_LIMIT and count > 2 and rows:
        from scipy.sparse.linalg import ArpackNoConvergence

        try:
            embedding = _fiedler(count, np.asarray(rows), np.asarray(cols), np.asarray(vals), seed)
        except ArpackNoConvergence:  # ill-conditioned Laplacians (near-disconnected graphs)
            logger.info("scotch: Lanczos did not converge on %d nodes; bisecting the topological order", count)
    if embedding is None:
        embedding = np.arange(count, dtype=np.float64)  # nodes are in topological order
    order = np.argsort(embedding, kind="stable")
    cumulative = np.cumsum(weight[order])
    cut = int(np.searchsorted(cumulative, share * total, side="left")) + 1
    left = np.zeros(count, dtype=bool)
    left[order[: min(max(cut, 1), count - 1) if count > 1 else 1]] = True
    _refine(left, rows, cols, vals, weight, share, total)
    return left


def _fiedler(count: int, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, seed: int) -> np.ndarray:
    """Second-smallest eigenvector of the weighted Laplacian (normalised edge weights), by sparse
    shift-invert Lanczos just below 0 (the Laplacian shifted there is positive definite)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    w = vals / max(vals.max(), 1e-30) + 1e-3  # every edge connects a little, even empty tensors
    adjacency = sp.coo_matrix((w, (rows, cols)), shape=(count, count)).tocsr()
    laplacian = (sp.diags(np.asarray(adjacency.sum(axis=1)).reshape(-1)) - adjacency).tocsc()
    v0 = np.random.default_rng(seed).standard_normal(count)
    # Bounded work: on some large graphs (an 11k-node GNMT step) unbounded ARPACK ran for
    # minutes; past the cap it raises ArpackNoConvergence and the caller bisects the order.
    _, vectors = eigsh(laplacian, k=2, sigma=-1e-3, which="LM", v0=v0, maxiter=200, tol=1e-6)
    vector = vectors[:, 1]
    # An eigenvector's sign is arbitrary: fix it so results do not depend on the LAPACK build.
    pivot = int(np.argmax(np.abs(vector)))
    return vector if vector[pivot] >= 0 else -vector


def _refine(
    left: np.ndarray, rows: list[int], cols: list[int], vals: list[float], weight: np.ndarray, share: float, total: float
) -> None:
    """FM-style single moves, best gain first, while the cut drops and balance holds."""
    count = left.size
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(count)]
    for i, j, w in zip(rows, cols, vals):
        neighbours[i].append((j, w))
    target = share * total
    slack = _BALANCE_TOLERANCE * total
    left_weight = float(weight[left].sum())
    for _ in range(4):  # passes
        moved = False
        gains = []
        for v in range(count):
            same = sum(w for u, w in neighbours[v] if left[u] == left[v])
            other = sum(w for u, w in neighbours[v] if left[u] != left[v])
            if other > same:
                gains.append((other - same, v))
        for _gain, v in sorted(gains, key=lambda g: (-g[0], g[1])):
            same = sum(w for u, w in neighbours[v] if left[u] == left[v])
            other = sum(w for u, w in neighbours[v] if left[u] != left[v])
            if other <= same:
                continue
            new_left = left_weight - weight[v] if left[v] else left_weight + weight[v]
            if abs(new_left - target) > max(slack, abs(left_weight - target)):
                continue
            left[v] = not left[v]
            left_weight = new_left
            moved = True
        if not moved:
            break
