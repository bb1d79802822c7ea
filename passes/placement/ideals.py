"""Tarnawski et al.'s dynamic program over ideals of a DAG ("Efficient Algorithms for Device
Placement of DNN Graph Operators", NeurIPS 2020), for the profiled workloads' cost model.

A set S of nodes is *contiguous* when S = I \\ I' for ideals (downward-closed sets) I' of I. The
DP gives every device one contiguous set: the state is (ideal I, accelerators used, CPU used) and
a step adds S = I \\ I' to a new device, so a placement is a chain ∅ = I0 ⊆ I1 ⊆ ... ⊆ V.

- Units. A colour class must sit on one device, so the DP places *units*: colour classes. Their
  DAG is the quotient of the graph; when that has a cycle (training graphs: the forward node of
  layer i feeds layer i+1's, and the backward nodes run the other way), only edges between forward
  nodes order the units and each class's backward nodes ride along with its forward ones (the
  paper's treatment of training graphs). A class with no forward node is glued to the unit of a
  neighbouring forward class.
- Loads. On an accelerator, S costs its accelerator latencies plus its communication, which for a
  contiguous set depends on S alone: every u in S with a successor outside S pays its send cost,
  every u outside S with a successor in S its receive cost. On the CPU, S costs its CPU latencies
  (the CPU pays no communication). An accelerator set must fit `capacity` and hold no
  unsupported node.
- Objectives. "max" minimises the largest load (pipelined throughput: the paper's DP). "sum"
  minimises the sum of segment costs, compute plus receiving (a proxy for a single sample's
  latency when segments run one after another), subject to the same memory limit.
- The ideal family. All ideals of the unit DAG when there are at most `max_ideals` of them;
  otherwise (wide graphs: GNMT's grid of LSTM cells has millions) the prefixes of many
  topological orders (level orders mixing top and bottom levels, and seeded random ones), with an
  INFO log saying so. The DP is exact over the family: the optimum over all contiguous splits
  when the family is complete, a feasible split otherwise.
Pairs (I', I) whose compute alone exceeds an upper bound on the optimum are pruned before the
communication terms are computed; when more than `max_pairs` remain (operator graphs: thousands
of ideals), the family shrinks to the prefixes of fewer orders, down to one, with an INFO log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

__all__ = ["IdealDpResult", "MaxLoadInstance", "enumerate_ideals", "ideal_dp", "order_ideals", "unit_graph"]

logger = logging.getLogger(__name__)

_CHUNK = 20_000  # pairs per block of the communication product


@dataclass
class MaxLoadInstance:
    """The arrays the DP needs (nodes are rows; devices: 0 the CPU, 1..k accelerators)."""

    accel: np.ndarray  # (N,) latency on an accelerator (inf: unsupported)
    cpu: np.ndarray  # (N,) latency on the CPU
    cost: np.ndarray  # (N,) send/receive cost of the node's output
    size: np.ndarray  # (N,) bytes on an accelerator
    color: np.ndarray  # (N,) co-location class
    backward: np.ndarray  # (N,) bool
    edge_src: np.ndarray
    edge_dst: np.ndarray
    accelerators: int
    capacity: float

    @property
    def num_nodes(self) -> int:
        return int(self.accel.size)


class _TooManyPairs(Exception):
    pass


@dataclass
class IdealDpResult:
    device: np.ndarray  # (N,) device per node
    value: float  # the DP's objective (max-load or sum)
    ideals: int  # size of the family searched
    complete: bool  # the family held every ideal (the value is the contiguous optimum)


def unit_graph(inst: MaxLoadInstance) -> tuple[np.ndarray, list[list[int]]]:
    """(unit of each node, predecessor units of each unit) with an acyclic unit DAG."""
    _, unit = np.unique(inst.color, return_inverse=True)
    unit = unit.reshape(-1).astype(np.int64)
    count = int(unit.max()) + 1
    su, du = unit[inst.edge_src], unit[inst.edge_dst]
    if _acyclic(count, su, du):
        return unit, _preds(count, su, du)
    forward = ~inst.backward[inst.edge_src] & ~inst.backward[inst.edge_dst]
    has_forward = np.zeros(count, dtype=bool)
    has_forward[unit[~inst.backward]] = True
    # Glue classes without a forward node to a forward neighbour (breadth-first over the classes).
    target = np.where(has_forward, np.arange(count), -1)
    neighbours: list[set[int]] = [set() for _ in range(count)]
    for a, b in zip(su.tolist(), du.tolist()):
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    frontier = [u for u in range(count) if has_forward[u]]
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(neighbours[u]):
                if target[v] < 0:
                    target[v] = target[u]
                    nxt.append(v)
        frontier = nxt
    target[target < 0] = 0 if has_forward.any() else np.flatnonzero(target < 0)
    _, merged = np.unique(target[unit], return_inverse=True)
    merged = merged.reshape(-1).astype(np.int64)
    count = int(merged.max()) + 1
    a, b = merged[inst.edge_src[forward]], merged[inst.edge_dst[forward]]
    if not _acyclic(count, a, b):
        # Colour classes that order the forward graph cyclically: fall back to one unit per
        # strongly connected component of the forward quotient.
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(count))
        g.add_edges_from(zip(a.tolist(), b.tolist()))
        scc = {v: i for i, comp in enumerate(nx.strongly_connected_components(g)) for v in comp}
        merged = np.array([scc[int(u)] for u in merged], dtype=np.int64)
        count = int(merged.max()) + 1
        a, b = merged[inst.edge_src[forward]], merged[inst.edge_dst[forward]]
    return merged, _preds(count, a, b)


def _preds(count: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    preds: list[set[int]] = [set() for _ in range(count)]
    for a, b in zip(src.tolist(), dst.tolist()):
        if a != b:
            preds[b].add(a)
    return [sorted(p) for p in preds]


def _acyclic(count: int, src: np.ndarray, dst: np.ndarray) -> bool:
    keep = src != dst
    indegree = np.bincount(dst[keep], minlength=count)
    succs: list[list[int]] = [[] for _ in range(count)]
    for a, b in zip(src[keep].tolist(), dst[keep].tolist()):
        succs[a].append(b)
    stack = [u for u in range(count) if indegree[u] == 0]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for v in succs[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                stack.append(v)
    return seen == count


def enumerate_ideals(preds: list[list[int]], max_ideals: int) -> np.ndarray | None:
    """Every ideal of the unit DAG as a bool matrix (ideals x units), or None past `max_ideals`."""
    count = len(preds)
    pred_mask = [sum(1 << p for p in ps) for ps in preds]
    seen = {0}
    frontier = [0]
    while frontier:
        nxt = []
        for ideal in frontier:
            for u in range(count):
                bit = 1 << u
                if not ideal & bit and pred_mask[u] & ~ideal == 0:
                    grown = ideal | bit
                    if grown not in seen:
                        seen.add(grown)
                        nxt.append(grown)
                        if len(seen) > max_ideals:
                            return None
        frontier = nxt
    return _masks_to_matrix(sorted(seen, key=lambda m: (bin(m).count("1"), m)), count)


def _masks_to_matrix(masks: list[int], count: int) -> np.ndarray:
    nbytes = (count + 7) // 8
    raw = np.frombuffer(b"".join(m.to_bytes(nbytes, "little") for m in masks), dtype=np.uint8)
    bits = np.unpackbits(raw.reshape(len(masks), nbytes), axis=1, bitorder="little")
    return bits[:, :count].astype(bool)


def order_ideals(preds: list[list[int]], weight: np.ndarray, *, orders: int = 24, seed: int = 0) -> np.ndarray:
    """Prefixes of topological orders of the unit DAG: level orders ranking units by
    alpha * top level + (1 - alpha) * (depth - bottom level), both strictly increasing along
    edges, plus orders from randomly re-weighted levels."""
    count = len(preds)
    succs: list[list[int]] = [[] for _ in range(count)]
    for v, ps in enumerate(preds):
        for p in ps:
            succs[p].append(v)
    topo = _topological(preds, succs)
    rng = np.random.default_rng(seed)
    keys = []
    base = weight + 1e-6 * max(float(weight.max(initial=0.0)), 1.0)  # zero-time units still advance levels
    for trial in range(orders):
        w = base if trial < 11 else base * rng.uniform(0.2, 5.0, count)
        top, bottom = _levels(topo, preds, succs, w)
        alpha = trial / 10 if trial < 11 else float(rng.uniform())
        keys.append(alpha * top + (1 - alpha) * (bottom.max() - bottom))
    masks = {0}
    for key in keys:
        mask = 0
        for u in np.lexsort((np.arange(count), key)).tolist():
            mask |= 1 << u
            masks.add(mask)
    return _masks_to_matrix(sorted(masks, key=lambda m: (bin(m).count("1"), m)), count)


def _topological(preds: list[list[int]], succs: list[list[int]]) -> list[int]:
    waiting = [len(p) for p in preds]
    stack = [u for u in range(len(preds)) if waiting[u] == 0]
    order = []
    while stack:
        u = stack.pop()
        order.append(u)
        for v in succs[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                stack.append(v)
    return order


def _levels(topo: list[int], preds: list[list[int]], succs: list[list[int]], w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = np.zeros(len(topo))
    bottom = np.zeros(len(topo))
    for u in topo:
        top[u] = max((top[p] + w[p] for p in preds[u]), default=0.0)
    for u in reversed(topo):
        bottom[u] = w[u] + max((bottom[s] for s in succs[u]), default=0.0)
    return top, bottom


def ideal_dp(
    inst: MaxLoadInstance,
    *,
    objective: str = "max",
    use_cpu: bool = True,
    max_ideals: int = 4000,
    orders: int = 24,
    max_pairs: int = 400_000,
    upper_bound: float | None = None,
    seed: int = 0,
) -> IdealDpResult:
    """The min-max (or min-sum) contiguous split over the ideal family (module docstring)."""
    unit, preds = unit_graph(inst)
    unit_weight = np.bincount(unit, weights=np.where(np.isfinite(inst.accel), inst.accel, inst.cpu), minlength=len(preds))
    family = enumerate_ideals(preds, max_ideals)
    complete = family is not None
    if family is None:
        family = order_ideals(preds, unit_weight, orders=orders, seed=seed)
        logger.info(
            "ideal DP: more than %d ideals; searching the %d prefixes of %d topological orders instead "
            "(contiguous splits along those orders only)",
            max_ideals, family.shape[0], orders,
        )
    if objective == "max" and upper_bound is None and family.shape[0] > 600:
        # A quick solve over one order's prefixes bounds the optimum, so the full family's
        # pairs whose compute alone exceeds it are never costed.
        quick = order_ideals(preds, unit_weight, orders=1, seed=seed)
        try:
            upper_bound = _solve(inst, quick[:, unit], objective, use_cpu, None, False, None).value
        except ValueError:
            upper_bound = None
    while True:
        if not complete and orders > 1 and family.shape[0] > 3 * np.sqrt(max_pairs):
            orders //= 2  # hopeless before trying: about M^2 / 2 pairs
            family = order_ideals(preds, unit_weight, orders=orders, seed=seed)
            continue
        try:
            return _solve(inst, family[:, unit], objective, use_cpu, upper_bound, complete, max_pairs)
        except _TooManyPairs as err:
            if orders <= 1 and not complete:
                return _solve(inst, family[:, unit], objective, use_cpu, upper_bound, complete, None)
            orders = orders if complete else max(orders // 2, 1)
            family, complete = order_ideals(preds, unit_weight, orders=orders, seed=seed), False
            logger.info("ideal DP: %s pairs of ideals exceed %d; searching the prefixes of %d topological orders", err, max_pairs, orders)


def _solve(
    inst: MaxLoadInstance,
    nodes: np.ndarray,
    objective: str,
    use_cpu: bool,
    upper_bound: float | None,
    complete: bool,
    max_pairs: int | None,
) -> IdealDpResult:
    m, n = nodes.shape
    f = nodes.astype(np.float64)
    f32 = nodes.astype(np.float32)
    finite_accel = np.where(np.isfinite(inst.accel), inst.accel, 0.0)
    w_acc, w_cpu, w_size = f @ finite_accel, f @ inst.cpu, f @ inst.size
    w_bad = f @ (~np.isfinite(inst.accel)).astype(np.float64)
    count = f.sum(axis=1)
    bound = np.inf if upper_bound is None or objective != "max" else upper_bound * (1 + 1e-9)
    los, his = [], []
    for first in range(0, m, 512):  # row blocks keep the M x M temporaries small
        rows = slice(first, min(first + 512, m))
        overlap = f32[rows] @ f32.T  # |I_i ∩ I_j| (exact in float32 below 2**24 nodes)
        keep = np.abs(overlap - count[rows, None]) < 0.5  # I_i ⊆ I_j
        keep &= count[rows, None] < count[None, :]  # proper subsets only
        if np.isfinite(bound):
            # Prune pairs whose compute alone (the cheaper of CPU and accelerator) exceeds the bound.
            d_acc = w_acc[None, :] - w_acc[rows, None]
            d_cpu = w_cpu[None, :] - w_cpu[rows, None] if use_cpu else np.inf
            keep &= np.minimum(d_acc, d_cpu) <= bound
        a, b = np.nonzero(keep)
        los.append(a + first)
        his.append(b)
        if max_pairs is not None and sum(x.size for x in los) > max_pairs:
            raise _TooManyPairs(f"more than {sum(x.size for x in los)}")
    lo, hi = np.concatenate(los), np.concatenate(his)
    # Edges grouped by source: a source pays once however many of its edges cross.
    by_src = np.argsort(inst.edge_src, kind="stable")
    src, dst = inst.edge_src[by_src], inst.edge_dst[by_src]
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]]) if src.size else np.zeros(0, dtype=np.int64)
    source_cost = inst.cost[src[starts]] if src.size else np.zeros(0)
    send = np.zeros(lo.size)
    recv = np.zeros(lo.size)
    for start in range(0, lo.size if src.size else 0, _CHUNK):
        a, b = lo[start : start + _CHUNK], hi[start : start + _CHUNK]
        inside = nodes[b] & ~nodes[a]  # S = I \ I'
        s_in, d_in = inside[:, src], inside[:, dst]
        leaving = np.logical_or.reduceat(s_in & ~d_in, starts, axis=1)  # source in S, a consumer outside
        entering = np.logical_or.reduceat(~s_in & d_in, starts, axis=1)  # source outside, a consumer in S
        send[start : start + _CHUNK] = leaving @ source_cost
        recv[start : start + _CHUNK] = entering @ source_cost
    compute_acc = w_acc[hi] - w_acc[lo]
    fits = (w_size[hi] - w_size[lo] <= inst.capacity * (1 + 1e-12)) & (w_bad[hi] - w_bad[lo] < 0.5)
    if objective == "max":
        acc_cost = np.where(fits, compute_acc + send + recv, np.inf)
        cpu_cost = w_cpu[hi] - w_cpu[lo]
    else:
        acc_cost = np.where(fits, compute_acc + recv, np.inf)
        cpu_cost = w_cpu[hi] - w_cpu[lo] + recv
    combine = np.maximum if objective == "max" else np.add
    k = inst.accelerators
    cpu_layers = 2 if use_cpu else 1
    best = np.full((k + 1, cpu_layers, m), np.inf)
    came: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # per state: (pair index, kind)
    best[0, 0, 0] = 0.0
    for a in range(k + 1):
        for c in range(cpu_layers):
            if a == 0 and c == 0:
                continue
            value = np.full(m, np.inf)
            pair = np.full(m, -1, dtype=np.int64)  # -1: empty segment (copy of the previous state)
            kind = np.zeros(m, dtype=np.int64)  # 0: from (a-1, c), 1: from (a, c-1)
            for source, costs, label in (((a - 1, c), acc_cost, 0), ((a, c - 1), cpu_cost, 1)):
                if source[0] < 0 or source[1] < 0:
                    continue
                prev = best[source]
                better = prev < value
                value[better], pair[better], kind[better] = prev[better], -1, label
                candidate = combine(prev[lo], costs)
                order = np.lexsort((candidate, hi))  # per target: the best pair first
                first = np.ones(order.size, dtype=bool)
                first[1:] = hi[order][1:] != hi[order][:-1]
                pick = order[first]
                targets = hi[pick]
                better = candidate[pick] < value[targets]
                value[targets[better]] = candidate[pick][better]
                pair[targets[better]] = pick[better]
                kind[targets[better]] = label
            best[a, c] = value
            came[(a, c)] = (pair, kind)
    full = m - 1  # the family is sorted by size: the last ideal is V
    state = min(((a, c) for a in range(k + 1) for c in range(cpu_layers)), key=lambda s: (best[s][full], s))
    total = float(best[state][full])
    if not np.isfinite(total):
        raise ValueError("no contiguous split satisfies the memory and support constraints")
    device = np.full(n, -1, dtype=np.int64)
    ideal = full
    a, c = state
    while (a, c) != (0, 0):
        pair, kind = came[(a, c)]
        p, label = int(pair[ideal]), int(kind[ideal])
        if p >= 0:
            segment = nodes[hi[p]] & ~nodes[lo[p]]
            device[segment] = a if label == 0 else 0
            ideal = int(lo[p])
        a, c = (a - 1, c) if label == 0 else (a, c - 1)
    assert (device >= 0).all()
    return IdealDpResult(device, total, m, complete)
