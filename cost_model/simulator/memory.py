"""Peak memory per device from a finished schedule, vectorised.

Lifetimes (documented model):
- a node output occupies its bytes on its producer's device from its kernel's start until the
  last of: its kernel's end, the end of each consumer kernel on that device, the end of the first
  hop of each transfer leaving with it; a graph output lives until the end of the step;
- a graph input occupies its home device (its first consumer's) from t=0 likewise;
- a transferred copy occupies each device a hop lands on from that hop's start until the next hop
  ends (intermediate chips on a ring) or, at the destination, until its last consumer there ends;
- a constant occupies every device that uses it for the whole step;
- values used only inside their own fused kernel never reach memory.
At equal times frees happen before allocations (a kernel may reuse the memory its predecessor
just released).
"""

from __future__ import annotations

import numpy as np

from cost_model.simulator.problem import VALUE_CONSTANT, SimulationProblem
from cost_model.simulator.scatter import scatter_max
from cost_model.simulator.tasks import TaskGraph

__all__ = ["peak_memory"]


def peak_memory(
    problem: SimulationProblem, tasks: TaskGraph, start: np.ndarray, end: np.ndarray, step_time: float
) -> np.ndarray:
    """Peak bytes held per device (int64, shape (D,))."""
    num_devices = problem.num_devices
    num_values = problem.num_values
    uv, un = problem.use_value, problem.use_node
    kend = end[: tasks.num_kernels]
    kstart = start[: tasks.num_kernels]

    # Resident constants, per device that uses them: a (constant, device) mark table.
    const_use, const_slot, const_bytes = _constant_uses(problem)
    base = np.zeros(num_devices, dtype=np.int64)
    if const_use.size:
        marks = np.zeros((const_bytes.size, num_devices), dtype=bool)
        marks[const_slot, tasks.kernel_device[tasks.kernel_of_node[un[const_use]]]] = True
        base = const_bytes @ marks

    # Values at their origin (node outputs and graph inputs).
    origin_kernel = tasks.value_origin_kernel
    has_kernel = origin_kernel >= 0
    # origin -1 reads the appended 0.0 (also when there is no kernel at all)
    alloc = np.where(has_kernel, np.append(kstart, 0.0)[origin_kernel], 0.0)
    free = np.where(has_kernel, np.append(kend, 0.0)[origin_kernel], 0.0)
    local = tasks.local_use
    scatter_max(free, uv[local], kend[tasks.local_dst_kernel])
    if tasks.xfer_value.size:
        scatter_max(free, tasks.xfer_value, end[tasks.xfer_first_hop])
    free[problem.value_is_output] = step_time
    # Skip constants and values that never leave their fused kernel.
    leaves = np.zeros(num_values, dtype=bool)
    leaves[uv[local[tasks.local_src_kernel != tasks.local_dst_kernel]]] = True
    leaves[tasks.xfer_value] = True
    leaves |= problem.value_is_output | (problem.value_num_uses == 0)
    live = np.flatnonzero(leaves & (problem.value_kind != VALUE_CONSTANT) & (problem.value_bytes > 0))
    dev_parts = [tasks.value_origin_device[live]]
    alloc_parts = [alloc[live]]
    free_parts = [free[live]]
    size_parts = [problem.value_bytes[live]]

    # Copies landing on a device, one per hop.
    if tasks.hop_xfer.size:
        links_dst = problem._cache.get("link_dst")
        if links_dst is None:
            topo = problem.topology
            links_dst = problem._cache["link_dst"] = np.array([topo.device_index(l.dst) for l in topo.links], dtype=np.int64)
        hop_task = tasks.num_kernels + np.arange(tasks.hop_xfer.size, dtype=np.int64)
        xfer = tasks.hop_xfer
        is_last = hop_task == tasks.xfer_last_hop[xfer]
        hop_free = np.where(is_last, end[hop_task], end[np.minimum(hop_task + 1, start.size - 1)])
        last_free = end[tasks.xfer_last_hop].copy()
        scatter_max(last_free, tasks.xc_xfer, kend[tasks.xc_kernel])
        hop_free = np.where(is_last, last_free[xfer], hop_free)
        dev_parts.append(links_dst[tasks.hop_link])
        alloc_parts.append(start[hop_task])
        free_parts.append(hop_free)
        size_parts.append(problem.value_bytes[tasks.xfer_value[xfer]])

    devices = np.concatenate(dev_parts)
    sizes = np.concatenate(size_parts)
    if not devices.size:
        return base
    # Frees first in the arrays, so a stable sort by time puts them before allocations at equal
    # times; then a stable sort by device groups each device's events in time order.
    times = np.concatenate([np.concatenate(free_parts), np.concatenate(alloc_parts)])
    where = np.concatenate([devices, devices])
    delta = np.concatenate([-sizes, sizes])
    by_time = np.argsort(times, kind="stable")
    # Small integer device ids let numpy use its linear-time radix sort.
    device_ids = where[by_time].astype(np.int16 if num_devices < 2**15 else np.int64)
    order = by_time[np.argsort(device_ids, kind="stable")]
    # Every allocation is freed on its own device, so the running total returns to zero at the
    # end of each device's segment and one global cumulative sum serves all devices.
    running = np.cumsum(delta[order])
    where_sorted = where[order]
    starts = np.flatnonzero(np.r_[True, where_sorted[1:] != where_sorted[:-1]])
    peak = np.zeros(num_devices, dtype=np.int64)
    peak[where_sorted[starts]] = np.maximum.reduceat(running, starts)
    return base + np.maximum(peak, 0)


def _constant_uses(problem: SimulationProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uses of constants, each use's slot among the distinct constants, and their sizes (cached)."""
    cached = problem._cache.get("constant_uses")
    if cached is None:
        uv = problem.use_value
        const_use = np.flatnonzero(problem.value_kind[uv] == VALUE_CONSTANT)
        ids, slot = np.unique(uv[const_use], return_inverse=True)
        cached = problem._cache["constant_uses"] = (const_use, slot.reshape(-1), problem.value_bytes[ids])
    return cached
