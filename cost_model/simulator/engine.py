"""The event loop: list scheduling of a task graph on resources that run one task at a time.

Pure Python over plain lists (numpy scalar indexing would cost more than the work). One heap of
completion events `(end_time, task)`; one heap of ready ranks per resource. All events at the same
time are retired before any resource picks its next task, so simultaneous readiness is decided by
rank (priority), not by event order. Fully deterministic: no dict or set iteration order, ties by
task id.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

__all__ = ["run_event_loop"]


def run_event_loop(
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
