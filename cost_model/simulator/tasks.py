"""Decisions applied to a problem: the task graph the event loop runs, built with numpy only.

Tasks are kernels (ids 0..K-1) and transfer hops (ids K..K+H-1).
- A kernel is one unfused node, or all nodes sharing a fusion group id on one device. Its time is
  the node's roofline time, or the group's: summed FLOP time, boundary bytes only, one launch.
- A transfer moves one value to one destination device, once, however many nodes there use it.
  Node outputs leave from their producer's device; graph inputs from their home device (the
  device of their first consumer), ready at t=0; constants never move (every device using one
  holds a copy for the whole step). A transfer is a chain of hops along the topology's route,
  store-and-forward; each hop occupies one directed link's copy engine for latency + bytes/bw.
- Resources: device d is resource d; directed link l is resource D + l. Each runs one task at a
  time; among its ready tasks the lowest `rank` goes first. Devices that share an executor
  (`Topology.executors`: forced XLA host devices) are one resource, and so is a link between
  two of them. Kernel rank orders by priority
  (highest first; a fused kernel takes its members' maximum), then by first node index. A hop
  ranks by the highest priority among the kernels its transfer feeds, then by transfer order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_model.decisions import DecisionError, Decisions
from cost_model.simulator.problem import VALUE_CONSTANT, SimulationProblem
from cost_model.simulator.scatter import scatter_max
from graph_ir.kernel_pieces import spanning_group_pieces

__all__ = ["TaskGraph", "build_task_graph", "kernel_bytes", "kernel_durations", "kernels"]

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(eq=False)
class TaskGraph:
    num_kernels: int
    num_resources: int
    kernel_of_node: np.ndarray  # (N,)
    kernel_first: np.ndarray  # (K,) lowest member node index
    kernel_size: np.ndarray  # (K,) member count
    kernel_device: np.ndarray  # (K,)
    kernel_duration: np.ndarray  # (K,) float64
    kernel_priority: np.ndarray  # (K,) float64
    # uses that stay on one device: use index, producer kernel (or -1 for graph inputs), consumer kernel
    local_use: np.ndarray
    local_src_kernel: np.ndarray
    local_dst_kernel: np.ndarray
    # value origin: the device and kernel where each value starts (-1 kernel: available at t=0)
    value_origin_device: np.ndarray  # (V,)
    value_origin_kernel: np.ndarray  # (V,)
    # transfers (value, destination)
    xfer_value: np.ndarray
    xfer_src: np.ndarray
    xfer_dst: np.ndarray
    xfer_bytes: np.ndarray
    xfer_first_hop: np.ndarray  # task id
    xfer_last_hop: np.ndarray  # task id
    xc_xfer: np.ndarray  # (transfer, consumer kernel) pairs
    xc_kernel: np.ndarray
    # hops (task id = num_kernels + hop index)
    hop_xfer: np.ndarray
    hop_link: np.ndarray
    hop_duration: np.ndarray
    # all tasks
    duration: np.ndarray  # float64 (K+H,)
    resource: np.ndarray  # (K+H,)
    rank: np.ndarray  # (K+H,) position in the pick order
    by_rank: np.ndarray  # (K+H,) inverse of rank
    succ_ptr: np.ndarray  # (K+H+1,)
    succ: np.ndarray
    pending: np.ndarray  # (K+H,) number of predecessors

    @property
    def num_tasks(self) -> int:
        return int(self.duration.shape[0])


def kernels(problem: SimulationProblem, device: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    count = problem.num_nodes
    grouped = group >= 0
    if not grouped.any():
        ids = np.arange(count, dtype=np.int64)
        return ids, ids, np.ones(count, dtype=np.int64)
    key = np.where(grouped, group.astype(np.int64) * problem.num_devices + device, -1 - np.arange(count, dtype=np.int64))
    # A group placed on several devices is one kernel per device, cut into convex pieces
    # (graph_ir.kernel_pieces) so that no kernel waits on itself through another device.
    pred_ptr, preds = _pred_csr(problem)
    piece = spanning_group_pieces(pred_ptr, preds, group, device)
    if piece is not None:
        key = np.where(grouped, key * (int(piece.max()) + 1) + piece, key)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # kernels numbered in order of their first node
    renumber = np.empty(order.size, dtype=np.int64)
    renumber[order] = np.arange(order.size, dtype=np.int64)
    kernel_of_node = renumber[inverse.reshape(-1)]
    return kernel_of_node, first[order].astype(np.int64), np.bincount(kernel_of_node).astype(np.int64)


def _pred_csr(problem: SimulationProblem) -> tuple[np.ndarray, np.ndarray]:
    """Distinct producers of each node as CSR arrays (cached on the problem)."""
    cached = problem._cache.get("pred_csr")
    if cached is None:
        src, dst = problem.node_edges()
        order = np.argsort(dst, kind="stable")
        ptr = np.zeros(problem.num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=problem.num_nodes), out=ptr[1:])
        cached = problem._cache["pred_csr"] = (ptr, src[order])
    return cached


def _boundary_bytes(problem: SimulationProblem, kernel_of_node: np.ndarray, num_kernels: int) -> np.ndarray:
    """Bytes read from and written to memory by each kernel (fused-group boundary traffic)."""
    uv, un = problem.use_value, problem.use_node
    consumer = kernel_of_node[un]
    prod = problem.use_producer
    producer_kernel = np.where(prod >= 0, np.append(kernel_of_node, -1)[prod], -1)
    external = producer_kernel != consumer
    # Each distinct (value, kernel) read once. Uses are sorted by value (`SimulationProblem`
    # builds them so), so the keys come in long sorted runs and a stable (run-aware) sort dedupes
    # them ~8x faster than np.unique, which hashes.
    read_key = np.sort(uv[external] * num_kernels + consumer[external], kind="stable")
    if read_key.size:
        read_key = read_key[np.r_[True, read_key[1:] != read_key[:-1]]]
    read = np.bincount(read_key % num_kernels, weights=problem.value_bytes[read_key // num_kernels], minlength=num_kernels)
    # An output is written when it leaves its kernel: used outside, a graph output, or unused.
    leaves = np.bincount(uv[external], minlength=problem.num_values) > 0
    leaves |= problem.value_is_output | (problem.value_num_uses == 0)
    written = np.flatnonzero(leaves & (problem.value_producer >= 0))
    write = np.bincount(
        kernel_of_node[problem.value_producer[written]], weights=problem.value_bytes[written], minlength=num_kernels
    )
    return read + write


def kernel_bytes(problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_first: np.ndarray, kernel_size: np.ndarray) -> np.ndarray:
    """Bytes each kernel moves: a lone node its node bytes, a fused group its boundary traffic."""
    boundary = _boundary_bytes(problem, kernel_of_node, int(kernel_first.shape[0]))
    return np.where(kernel_size == 1, problem.node_bytes[kernel_first], boundary)


def kernel_durations(
    problem: SimulationProblem, device: np.ndarray, fusion_group: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernels of a placement + grouping and how long each runs: (kernel_of_node,
    kernel_first, kernel_size, duration). A lone node takes its node time; a fused group its
    roofline (summed FLOP time, boundary bytes only, one launch) unless the problem's kernel cost
    source knows better."""
    n = problem.num_nodes
    device = np.asarray(device, dtype=np.int64)
    kernel_of_node, kernel_first, kernel_size = kernels(problem, device, np.asarray(fusion_group))
    num_kernels = int(kernel_first.shape[0])
    node_type = problem.device_type_of[device]
    nodes_range = np.arange(n)
    if num_kernels == n:
        return kernel_of_node, kernel_first, kernel_size, problem.node_time[nodes_range, node_type]
    compute = np.bincount(kernel_of_node, weights=problem.flop_time[nodes_range, node_type], minlength=num_kernels)
    kbytes = kernel_bytes(problem, kernel_of_node, kernel_first, kernel_size)
    ktype = problem.device_type_of[device[kernel_first]]
    duration = np.maximum(compute, kbytes / problem.type_bandwidth[ktype]) + problem.type_launch[ktype]
    if problem.kernel_costs is not None:
        single = kernel_size == 1  # the same number as the unfused path (roofline or the source's)
        duration[single] = problem.node_time[kernel_first[single], ktype[single]]
        duration = problem.kernel_costs.kernel_times(problem, kernel_of_node, kernel_size, ktype, duration)
    return kernel_of_node, kernel_first, kernel_size, duration


def build_task_graph(problem: SimulationProblem, decisions: Decisions) -> TaskGraph:
    """Kernels, transfers, hops and their dependencies for one set of decisions."""
    n = problem.num_nodes
    if decisions.num_nodes != n:
        raise DecisionError(f"decisions cover {decisions.num_nodes} nodes but the problem has {n}")
    num_devices = problem.num_devices
    device = decisions.device.astype(np.int64)
    if n and (device.min() < 0 or device.max() >= num_devices):
        decisions.validate(num_devices, nodes=problem.nodes)
    kernel_of_node, kernel_first, kernel_size, kernel_duration = kernel_durations(problem, device, decisions.fusion_group)
    num_kernels = int(kernel_first.shape[0])
    kernel_device = device[kernel_first]
    if num_kernels == n:
        kernel_priority = decisions.priority
    else:
        kernel_priority = np.full(num_kernels, -np.inf)
        scatter_max(kernel_priority, kernel_of_node, decisions.priority)

    # -- where each value starts, and which uses cross devices --------------------------------
    uv, un = problem.use_value, problem.use_node
    consumer_kernel = kernel_of_node[un]
    consumer_device = device[un]
    vprod = problem.value_producer
    has_producer = vprod >= 0
    first_consumer = problem.value_first_consumer
    # Index -1 (no producer, no consumer) reads the appended default, so a graph without a
    # computing node (inputs passed straight to outputs) indexes nothing out of range.
    device_or_0 = np.append(device, 0)
    value_origin_device = np.where(has_producer, device_or_0[vprod], np.where(first_consumer >= 0, device_or_0[first_consumer], 0))
    value_origin_kernel = np.where(has_producer, np.append(kernel_of_node, -1)[vprod], -1)
    src_device = value_origin_device[uv]
    src_kernel = value_origin_kernel[uv]
    is_constant = problem.value_kind[uv] == VALUE_CONSTANT
    cross = (src_device != consumer_device) & ~is_constant
    local = ~cross & ~is_constant
    local_use = np.flatnonzero(local)
    local_src_kernel = src_kernel[local_use]
    local_dst_kernel = consumer_kernel[local_use]

    # -- transfers: one per (value, destination device) -------------------------------------------
    cross_use = np.flatnonzero(cross)
    xkey = uv[cross_use] * num_devices + consumer_device[cross_use]
    xkeys, xfirst, xinverse = np.unique(xkey, return_index=True, return_inverse=True)
    xfer_value = xkeys // num_devices
    xfer_dst = xkeys % num_devices
    xfer_src = value_origin_device[xfer_value]
    xfer_bytes = problem.value_bytes[xfer_value]
    xfer_kernel = value_origin_kernel[xfer_value]
    xc_xfer = xinverse.reshape(-1).astype(np.int64)
    xc_kernel = consumer_kernel[cross_use]
    num_xfers = int(xkeys.shape[0])

    hops_table, route_links = problem.topology.route_table
    nhops = hops_table[xfer_src, xfer_dst]
    if num_xfers and nhops.min() < 0:
        bad = int(np.flatnonzero(nhops < 0)[0])
        names = problem.topology.device_names
        value = problem.values[int(xfer_value[bad])]
        raise DecisionError(
            f"value %{value.name} must move from {names[xfer_src[bad]]} to {names[xfer_dst[bad]]}, "
            "but the topology has no route between them",
            field="device",
        )
    hop_offsets = np.zeros(num_xfers + 1, dtype=np.int64)
    np.cumsum(nhops, out=hop_offsets[1:])
    num_hops = int(hop_offsets[-1])
    hop_xfer = np.repeat(np.arange(num_xfers, dtype=np.int64), nhops)
    hop_pos = np.arange(num_hops, dtype=np.int64) - hop_offsets[hop_xfer]
    hop_link = route_links[xfer_src[hop_xfer], xfer_dst[hop_xfer], hop_pos] if num_hops else _EMPTY
    link_bw, link_latency = problem._cache.get("links") or _link_arrays(problem)
    hop_duration = link_latency[hop_link] + xfer_bytes[hop_xfer] / link_bw[hop_link]
    xfer_first_hop = num_kernels + hop_offsets[:-1]
    xfer_last_hop = num_kernels + hop_offsets[1:] - 1

    # -- task arrays ---------------------------------------------------------------------------
    num_tasks = num_kernels + num_hops
    duration = np.concatenate([kernel_duration, hop_duration])
    topology = problem.topology
    if topology.shares_executors:  # devices on one executor serialize, copies between them too
        resource = np.concatenate([np.asarray(topology.executors, dtype=np.int64)[kernel_device], topology.link_resources[hop_link]])
    else:
        resource = np.concatenate([kernel_device, num_devices + hop_link])
    xfer_priority = np.full(num_xfers, -np.inf)
    scatter_max(xfer_priority, xc_xfer, kernel_priority[xc_kernel])
    sort_priority = np.concatenate([kernel_priority, xfer_priority[hop_xfer]])
    tie = np.concatenate([kernel_first, n + np.arange(num_hops, dtype=np.int64)])
    by_rank = np.lexsort((tie, -sort_priority))
    rank = np.empty(num_tasks, dtype=np.int64)
    rank[by_rank] = np.arange(num_tasks, dtype=np.int64)

    # Dependencies; duplicates are harmless (each edge is counted in `pending` and released once).
    same = local_src_kernel >= 0
    from_kernel = xfer_kernel >= 0
    chain = np.flatnonzero(hop_pos > 0) + num_kernels
    edge_src = np.concatenate(
        [local_src_kernel[same], xfer_kernel[from_kernel], chain - 1, xfer_last_hop[xc_xfer]]
    )
    edge_dst = np.concatenate([local_dst_kernel[same], xfer_first_hop[from_kernel], chain, xc_kernel])
    keep = edge_src != edge_dst  # a kernel's internal uses
    edge_src, edge_dst = edge_src[keep], edge_dst[keep]
    order = np.argsort(edge_src, kind="stable")
    succ = edge_dst[order]
    succ_ptr = np.zeros(num_tasks + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_src, minlength=num_tasks), out=succ_ptr[1:])
    pending = np.bincount(edge_dst, minlength=num_tasks)

    return TaskGraph(
        num_kernels=num_kernels,
        num_resources=num_devices + len(problem.topology.links),
        kernel_of_node=kernel_of_node,
        kernel_first=kernel_first,
        kernel_size=kernel_size,
        kernel_device=kernel_device,
        kernel_duration=kernel_duration,
        kernel_priority=kernel_priority,
        local_use=local_use,
        local_src_kernel=local_src_kernel,
        local_dst_kernel=local_dst_kernel,
        value_origin_device=value_origin_device,
        value_origin_kernel=value_origin_kernel,
        xfer_value=xfer_value,
        xfer_src=xfer_src,
        xfer_dst=xfer_dst,
        xfer_bytes=xfer_bytes,
        xfer_first_hop=xfer_first_hop,
        xfer_last_hop=xfer_last_hop,
        xc_xfer=xc_xfer,
        xc_kernel=xc_kernel,
        hop_xfer=hop_xfer,
        hop_link=hop_link,
        hop_duration=hop_duration,
        duration=duration,
        resource=resource,
        rank=rank,
        by_rank=by_rank,
        succ_ptr=succ_ptr,
        succ=succ,
        pending=pending,
    )


def _link_arrays(problem: SimulationProblem) -> tuple[np.ndarray, np.ndarray]:
    links = problem.topology.links
    arrays = (
        np.array([l.bandwidth for l in links], dtype=np.float64),
        np.array([l.latency_s for l in links], dtype=np.float64),
    )
    problem._cache["links"] = arrays
    return arrays
