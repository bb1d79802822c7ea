"""`FusionGroups`' cycle check compiled with numba: the same search over flat arrays.

Imported only by `groups.select_cycle_engine` (never at `import passes`), because importing
numba costs ~0.5 s and it is an optional dependency (`pip install compiler-opt[fast]`).

The search is the pure-Python one of `groups.py` step for step: the same two directions, the same
cheap skip (every outside predecessor of the consumer side lies in the producer side), the same
breadth-first order over groups (members in merge order, kept as a linked list), the same count
of visited nodes against `limit`. So it refuses exactly the merges the Python search refuses,
`search_limit` refusals included. `cache=True` keeps the machine code in `__pycache__` (or
`NUMBA_CACHE_DIR`), so the compile (~1 s) is paid once per machine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["creates_cycle_compiled"]


@njit(cache=True)
def _preds_within(target: int, source: int, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, head: np.ndarray, nxt: np.ndarray) -> bool:
    m = head[target]
    while m >= 0:
        for k in range(pred_ptr[m], pred_ptr[m + 1]):
            r = root[pred_idx[k]]
            if r != target and r != source:
                return False
        m = nxt[m]
    return True


@njit(cache=True)
def _reaches_through_third(
    src: int, dst: int, limit: int, root: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray,
    head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, stamp: int, queue: np.ndarray,
) -> bool:
    # `seen[g] == stamp` marks groups seen by this search (no clearing between searches).
    seen[src] = stamp
    tail = 0
    m = head[src]
    while m >= 0:
        for k in range(succ_ptr[m], succ_ptr[m + 1]):
            r = root[succ_idx[k]]
            if r != src and r != dst and seen[r] != stamp:
                seen[r] = stamp
                queue[tail] = r
                tail += 1
        m = nxt[m]
    front = 0
    visited = 0
    while front < tail:
        g = queue[front]
        front += 1
        m = head[g]
        while m >= 0:
            visited += 1
            if visited > limit:
                return True
            for k in range(succ_ptr[m], succ_ptr[m + 1]):
                r = root[succ_idx[k]]
                if r == dst:
                    return True
                if seen[r] != stamp:
                    seen[r] = stamp
                    queue[tail] = r
                    tail += 1
            m = nxt[m]
    return False


@njit(cache=True)
def creates_cycle_compiled(
    ra: int, rb: int, limit: int, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray,
    succ_ptr: np.ndarray, succ_idx: np.ndarray, head: np.ndarray, nxt: np.ndarray, seen: np.ndarray,
    stamp: np.ndarray, queue: np.ndarray,
) -> bool:
    """Would merging groups `ra` and `rb` (roots) create a cycle (or is the search unsure)?"""
    for direction in range(2):
        src, dst = (ra, rb) if direction == 0 else (rb, ra)
        if _preds_within(dst, src, root, pred_ptr, pred_idx, head, nxt):
            continue
        stamp[0] += 1
        if _reaches_through_third(src, dst, limit, root, succ_ptr, succ_idx, head, nxt, seen, stamp[0], queue):
            return True
    return False
