"""The event loop of `engine.py`, compiled with numba: the same algorithm over flat arrays.

Imported only by `engine.select_engine` (never at `import cost_model`), because importing numba
costs ~0.5 s and it is an optional dependency (`pip install compiler-opt[fast]`).

Results equal the pure-Python loop to the last bit: every time is the same float64 sum
`now + duration[task]` in the same order of events, and both pick orders are fully determined by
unique keys (the ready queues pop the lowest rank, and ranks are a permutation; the event queue
pops the lowest `(end_time, task)`), so the heap layout does not matter, only that each pops the
minimum. `cache=True` keeps the machine code in `__pycache__` (or `NUMBA_CACHE_DIR`), so the
~2 s compile is paid once per machine, not once per process.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["event_loop_compiled", "scatter_max_compiled"]


@njit(cache=True, inline="always")
def _ready_push(heap: np.ndarray, base: int, size: int, key: int) -> None:
    # Min-heap of ranks stored in heap[base : base + size]; sift the new key up.
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        above = heap[base + parent]
        if above <= key:
            break
        heap[base + i] = above
        i = parent
    heap[base + i] = key


@njit(cache=True, inline="always")
def _ready_pop(heap: np.ndarray, base: int, size: int) -> int:
    # Remove and return the minimum of heap[base : base + size] (size >= 1).
    top = heap[base]
    size -= 1
    key = heap[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[base + child + 1] < heap[base + child]:
            child += 1
        below = heap[base + child]
        if key <= below:
            break
        heap[base + i] = below
        i = child
    heap[base + i] = key
    return top


@njit(cache=True, inline="always")
def _event_less(t1: float, k1: int, t2: float, k2: int) -> bool:
    # The order of the Python tuples (end_time, task).
    return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True, inline="always")
def _event_push(times: np.ndarray, tasks: np.ndarray, size: int, time: float, task: int) -> None:
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if not _event_less(time, task, times[parent], tasks[parent]):
            break
        times[i] = times[parent]
        tasks[i] = tasks[parent]
        i = parent
    times[i] = time
    tasks[i] = task


@njit(cache=True, inline="always")
def _event_pop(times: np.ndarray, tasks: np.ndarray, size: int) -> int:
    # Remove the minimum (the caller read it at index 0); returns its task.
    top = tasks[0]
    size -= 1
    time = times[size]
    task = tasks[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _event_less(times[child + 1], tasks[child + 1], times[child], tasks[child]):
            child += 1
        if not _event_less(times[child], tasks[child], time, task):
            break
        times[i] = times[child]
        tasks[i] = tasks[child]
        i = child
    times[i] = time
    tasks[i] = task
    return top


@njit(cache=True, nogil=True)
def event_loop_compiled(
    num_resources: int,
    duration: np.ndarray,
    resource: np.ndarray,
    rank: np.ndarray,
    by_rank: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pending: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Start and end times (float64) and the number of tasks that never ran (their pending count
    did not reach 0); `pending` is left untouched. Arrays: duration float64, the rest int64, all C-contiguous."""
    count = duration.shape[0]
    start = np.zeros(count, dtype=np.float64)
    end = np.zeros(count, dtype=np.float64)
    left = pending.copy()
    # One ready heap per resource, each a segment of one array sized by its task count.
    base = np.zeros(num_resources + 1, dtype=np.int64)
    for task in range(count):
        base[resource[task] + 1] += 1
    for r in range(num_resources):
        base[r + 1] += base[r]
    ready = np.empty(count, dtype=np.int64)
    ready_size = np.zeros(num_resources, dtype=np.int64)
    busy = np.zeros(num_resources, dtype=np.bool_)
    for task in range(count):
        if left[task] == 0:
            r = resource[task]
            _ready_push(ready, base[r], ready_size[r], rank[task])
            ready_size[r] += 1
    # At most one event per busy resource.
    ev_time = np.empty(num_resources, dtype=np.float64)
    ev_task = np.empty(num_resources, dtype=np.int64)
    ev_size = 0
    for r in range(num_resources):
        if ready_size[r]:
            task = by_rank[_ready_pop(ready, base[r], ready_size[r])]
            ready_size[r] -= 1
            finish = duration[task]
            end[task] = finish
            busy[r] = True
            _event_push(ev_time, ev_task, ev_size, finish, task)
            ev_size += 1
    # Resources to offer a task once the events at `now` are retired, deduplicated (a second
    # visit of a resource in the Python loop finds it busy and does nothing).
    dirty = np.empty(num_resources, dtype=np.int64)
    is_dirty = np.zeros(num_resources, dtype=np.bool_)
    while ev_size:
        now = ev_time[0]
        task = _event_pop(ev_time, ev_task, ev_size)
        ev_size -= 1
        num_dirty = 0
        while True:
            r = resource[task]
            busy[r] = False
            if not is_dirty[r]:
                is_dirty[r] = True
                dirty[num_dirty] = r
                num_dirty += 1
            for i in range(succ_ptr[task], succ_ptr[task + 1]):
                s = succ[i]
                left[s] -= 1
                if left[s] == 0:
                    rs = resource[s]
                    _ready_push(ready, base[rs], ready_size[rs], rank[s])
                    ready_size[rs] += 1
                    if not is_dirty[rs]:
                        is_dirty[rs] = True
                        dirty[num_dirty] = rs
                        num_dirty += 1
            if ev_size and ev_time[0] == now:
                task = _event_pop(ev_time, ev_task, ev_size)
                ev_size -= 1
                continue
            break
        for j in range(num_dirty):
            r = dirty[j]
            is_dirty[r] = False
            if not busy[r] and ready_size[r]:
                task = by_rank[_ready_pop(ready, base[r], ready_size[r])]
                ready_size[r] -= 1
                finish = now + duration[task]
                start[task] = now
                end[task] = finish
                busy[r] = True
                _event_push(ev_time, ev_task, ev_size, finish, task)
                ev_size += 1
    stuck = 0
    for task in range(count):
        if left[task] != 0:  # as the Python loop's `any(pending)`
            stuck += 1
    return start, end, stuck


@njit(cache=True, nogil=True)
def scatter_max_compiled(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """`np.maximum.at(target, index, values)` (`scatter.scatter_max` checks the bounds)."""
    for i in range(index.shape[0]):
        j = index[i]
        v = values[i]
        if v > target[j] or v != v:  # NaN wins, as in np.maximum
            target[j] = v
