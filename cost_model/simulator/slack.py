"""Slack of every task of a simulated step: how much later it could finish without delaying the
step, given the order the simulation ran things in.

A task's latest finish is the step time for a task with no successor, else the smallest latest
start (latest finish minus duration) over its successors: its data successors in the task graph
(kernels and transfer hops) and the next task on the same resource (device or link) in the
simulated order. Slack = latest finish - simulated end. Zero-slack tasks form the critical path;
a placement move that does not touch one cannot shorten the step, which is what makes slack a
good order for a local search's moves (RESULTS.md h9: moves of the least-slack fusion unit first
improved 0.56-0.99 AUC on held-out polish traces, random 0.45-0.60).

One sweep in decreasing start time: every successor starts no earlier than its predecessor ends,
so it is finished before the predecessor is visited. Compiled with numba when it is installed
(`graph_ir._jit`), pure Python otherwise (same result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from graph_ir._jit import choose_engine

if TYPE_CHECKING:
    from cost_model.simulator.result import SimulationResult

__all__ = ["node_slack", "task_slack"]

_kernel: tuple[str, Callable[..., np.ndarray]] | None = None


def _python_slack(
    order: np.ndarray, succ_ptr: np.ndarray, succ: np.ndarray, queue_next: np.ndarray, duration: np.ndarray, end: np.ndarray, step: float
) -> np.ndarray:
    # Index loops (no tolist): the same source compiles with numba and runs as Python.
    latest = np.full(duration.shape[0], step)
    for k in range(order.shape[0]):
        i = order[k]
        value = step
        for p in range(succ_ptr[i], succ_ptr[i + 1]):
            s = succ[p]
            if latest[s] - duration[s] < value:
                value = latest[s] - duration[s]
        j = queue_next[i]
        if j >= 0 and latest[j] - duration[j] < value:
            value = latest[j] - duration[j]
        latest[i] = value
    return latest - end


def _compiled() -> Callable[..., np.ndarray]:
    from numba import njit

    return njit(cache=True)(_python_slack)


def task_slack(result: SimulationResult) -> np.ndarray:
    """(K+H,) seconds of slack per task of `result` (module docstring)."""
    global _kernel
    if _kernel is None:
        _kernel = choose_engine("task slack", _compiled, _python_slack)
    tasks = result.tasks
    start, end = result.task_start, result.task_end
    count = tasks.num_tasks
    queue_next = np.full(count, -1, dtype=np.int64)
    if count:
        by_queue = np.lexsort((start, tasks.resource))
        same = tasks.resource[by_queue][1:] == tasks.resource[by_queue][:-1]
        queue_next[by_queue[:-1][same]] = by_queue[1:][same]
    order = np.argsort(-start, kind="stable").astype(np.int64)
    return _kernel[1](
        order,
        np.asarray(tasks.succ_ptr, dtype=np.int64),
        np.asarray(tasks.succ, dtype=np.int64),
        queue_next,
        np.asarray(tasks.duration, dtype=np.float64),
        np.asarray(end, dtype=np.float64),
        float(result.step_time_s),
    )


def node_slack(result: SimulationResult) -> np.ndarray:
    """(N,) slack of each node's kernel, as a fraction of the step time (0: on the critical path)."""
    slack = task_slack(result)[result.tasks.kernel_of_node]
    return slack / max(result.step_time_s, 1e-30)
