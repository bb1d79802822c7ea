"""The event loop: list scheduling of a task graph on resources that run one task at a time.

One heap of completion events `(end_time, task)`; one heap of ready ranks per resource. All
events at the same time are retired before any resource picks its next task, so simultaneous
readiness is decided by rank (priority), not by event order. Fully deterministic: no dict or set
iteration order, ties by task id.

Two implementations of that one algorithm, with bit-identical results:
- `event_loop_compiled` (`engine_numba.py`), numba-compiled over arrays, ~30x faster; used when
  numba is installed (`pip install compiler-opt[fast]`) and `COMPILER_OPT_NO_JIT` is not set;
- `event_loop_python` below, pure Python over plain lists (numpy scalar indexing would cost more
  than the work), the fallback.
`run_event_loop` picks one on first use (numba is imported then, not at `import cost_model`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from heapq import heapify, heappop, heappush

import numpy as np

from graph_ir._jit import NO_JIT_ENV, choose_engine  # noqa: F401 - NO_JIT_ENV re-exported for callers and tests

__all__ = ["engine_name", "event_loop_python", "run_event_loop", "select_engine"]

logger = logging.getLogger(__name__)


# (name, array-level loop) once chosen; None until the first simulation.
_engine: tuple[str, Callable[..., tuple[np.ndarray, np.ndarray, int]]] | None = None


def run_event_loop(
    num_resources: int,
    duration: np.ndarray,
    resource: np.ndarray,
    rank: np.ndarray,
    by_rank: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pending: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Start and end time of every task (float64 arrays), and how many tasks never ran (> 0: a
    dependency cycle). The inputs are not modified.

    `resource[t]` in [0, num_resources); `rank` a permutation with inverse `by_rank`; successors
    of t are `succ[succ_ptr[t]:succ_ptr[t + 1]]`; `pending[t]` counts t's incoming edges.
    """
    duration = np.ascontiguousarray(duration, dtype=np.float64)
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (resource, rank, by_rank, succ_ptr, succ, pending)]
    _check_task_arrays(num_resources, duration, *arrays)
    loop = (_engine or select_engine())[1]
    return loop(int(num_resources), duration, *arrays)


def _check_task_arrays(
    num_resources: int,
    duration: np.ndarray,
    resource: np.ndarray,
    rank: np.ndarray,
    by_rank: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pending: np.ndarray,
) -> None:
    # The compiled loop does not check bounds: a bad index must fail here, not corrupt memory
    # (~0.1 ms on 17k tasks).
    count = duration.shape[0]
    if any(a.ndim != 1 or a.shape[0] != count for a in (resource, rank, by_rank, pending)) or succ_ptr.shape != (count + 1,):
        raise ValueError("duration, resource, rank, by_rank and pending need one entry per task, succ_ptr one more")
    for name, values, bound in (("resource", resource, num_resources), ("rank", rank, count), ("by_rank", by_rank, count), ("succ", succ, count)):
        if values.size and (values.min() < 0 or values.max() >= bound):
            raise ValueError(f"{name} must lie in [0, {bound}), got values in [{values.min()}, {values.max()}]")
    if succ_ptr[0] != 0 or succ_ptr[-1] != succ.shape[0] or (count and np.diff(succ_ptr).min() < 0):
        raise ValueError(f"succ_ptr must rise from 0 to len(succ) = {succ.shape[0]}")


def select_engine(*, refresh: bool = False) -> tuple[str, Callable[..., tuple[np.ndarray, np.ndarray, int]]]:
    """The engine `run_event_loop` uses, `("numba", fn)` or `("python", fn)`, chosen once and
    logged; `refresh=True` chooses again (after changing `COMPILER_OPT_NO_JIT`, in tests)."""
    global _engine
    if _engine is not None and not refresh:
        return _engine

    def compiled() -> Callable[..., tuple[np.ndarray, np.ndarray, int]]:
        from cost_model.simulator.engine_numba import event_loop_compiled

        return event_loop_compiled

    _engine = choose_engine("simulator event loop", compiled, _python_arrays)
    return _engine


def engine_name() -> str:
    """"numba" or "python": the engine simulations use (chooses it if not chosen yet)."""
    return (_engine or select_engine())[0]


def _python_arrays(
    num_resources: int,
    duration: np.ndarray,
    resource: np.ndarray,
    rank: np.ndarray,
    by_rank: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    pending: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    # Lists, because indexing a list is several times cheaper than indexing an array.
    left = pending.tolist()
    start, end, _ = event_loop_python(
        num_resources,
        duration.tolist(),
        resource.tolist(),
        rank.tolist(),
        by_rank.tolist(),
        succ_ptr.tolist(),
        succ.tolist(),
        left,
    )
    stuck = sum(1 for p in left if p)
    return np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64), stuck


def event_loop_python(
    num_resources: int,
    duration: list[float],
    resource: list[int],
    rank: list[int],
    by_rank: list[int],
    succ_ptr: list[int],
    succ: list[int],
    pending: list[int],
) -> tuple[list[float], list[float], bool]:
    """Start and end time of every task, and whether all ran (False: a dependency cycle).

    `pending` is consumed (decremented in place); tasks left with pending > 0 never ran.
    """
    push, pop = heappush, heappop  # locals: the loop below runs once per task
    count = len(duration)
    start = [0.0] * count
    end = [0.0] * count
    ready: list[list[int]] = [[] for _ in range(num_resources)]
    busy = [False] * num_resources
    for task in range(count):
        if not pending[task]:
            ready[resource[task]].append(rank[task])
    events: list[tuple[float, int]] = []
    for r in range(num_resources):
        heap = ready[r]
        if heap:
            heapify(heap)
            task = by_rank[heappop(heap)]
            finish = duration[task]
            end[task] = finish
            busy[r] = True
            events.append((finish, task))
    heapify(events)
    while events:
        now, task = pop(events)
        r = resource[task]
        busy[r] = False
        dirty = [r]
        while True:
            for s in succ[succ_ptr[task] : succ_ptr[task + 1]]:
                left = pending[s] - 1
                pending[s] = left
                if not left:
                    rs = resource[s]
                    push(ready[rs], rank[s])
                    dirty.append(rs)
            if events and events[0][0] == now:
                task = pop(events)[1]
                r = resource[task]
                busy[r] = False
                dirty.append(r)
                continue
            break
        for r in dirty:
            if not busy[r]:
                heap = ready[r]
                if heap:
                    task = by_rank[pop(heap)]
                    finish = now + duration[task]
                    start[task] = now
                    end[task] = finish
                    busy[r] = True
                    push(events, (finish, task))
    return start, end, not any(pending)
