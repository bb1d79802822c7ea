"""`FusionGroups`' cycle check compiled with numba: the same search over flat arrays; and the
GO decoder's whole by-priority merge loop on the same arrays (`priority_merges_compiled`).

Imported only by `groups.select_cycle_engine` (never at `import passes`), because importing
numba costs ~0.5 s and it is an optional dependency (`pip install compiler-opt[fast]`).

The search is the pure-Python one of `groups.py` step for step: the same two directions, the same
cheap skip (every outside predecessor of the consumer side lies in the producer side), the same
breadth-first order over groups (members in merge order, kept as a linked list), the same count
of visited nodes against `limit`. So it refuses exactly the merges the Python search refuses,
`search_limit` refusals included. `cache=True` keeps the machine code in `__pycache__` (or
`NUMBA_CACHE_DIR`), so the compile (~1 s) is paid once per machine. The merge loop lives in this
file, not beside the decoder, because numba's disk cache does not notice a change to a compiled
function in another file that a cached one calls.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "AT_EARLIER", "AT_LATER", "CYCLE", "adopt_groups_compiled", "creates_cycle_compiled", "group_ids_compiled", "group_positions",
    "merge_if_acyclic_ordered", "ordered_check", "ordered_merge_slot", "priority_merges_compiled",
]


@njit(cache=True)
def _neighbours_within(group: int, other: int, root: np.ndarray, ptr: np.ndarray, idx: np.ndarray, head: np.ndarray, nxt: np.ndarray) -> bool:
    """Every neighbour of `group`'s members along (`ptr`, `idx`: predecessors or successors)
    outside the group lies in `other`."""
    m = head[group]
    while m >= 0:
        for k in range(ptr[m], ptr[m + 1]):
            r = root[idx[k]]
            if r != group and r != other:
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
        if _neighbours_within(dst, src, root, pred_ptr, pred_idx, head, nxt):
            continue
        stamp[0] += 1
        if _reaches_through_third(src, dst, limit, root, succ_ptr, succ_idx, head, nxt, seen, stamp[0], queue):
            return True
    return False


@njit(cache=True)
def _union(ra: int, rb: int, root: np.ndarray, head: np.ndarray, tail: np.ndarray, nxt: np.ndarray, size: np.ndarray, heroes: np.ndarray) -> int:
    """`FusionGroups._union` on arrays: the smaller group (ties: `rb`) joins the other, its
    members appended to the list in order; returns the surviving root."""
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    m = head[rb]
    while m >= 0:
        root[m] = ra
        m = nxt[m]
    nxt[tail[ra]] = head[rb]
    tail[ra] = tail[rb]
    size[ra] += size[rb]
    heroes[ra] += heroes[rb]
    return ra


@njit(cache=True)
def adopt_groups_compiled(
    order: np.ndarray, bounds: np.ndarray, root: np.ndarray, head: np.ndarray, tail: np.ndarray, nxt: np.ndarray,
    size: np.ndarray, heroes: np.ndarray,
) -> None:
    """`FusionGroups.adopt` for each group `order[bounds[k]:bounds[k + 1]]`: joined without
    legality checks, at most one hero counted."""
    for k in range(bounds.size - 1):
        first = order[bounds[k]]
        for j in range(bounds[k] + 1, bounds[k + 1]):
            ra, rb = root[first], root[order[j]]
            if ra != rb:
                _union(ra, rb, root, head, tail, nxt, size, heroes)
        r = root[first]
        if heroes[r] > 1:
            heroes[r] = 1


@njit(cache=True)
def priority_merges_compiled(
    visit: np.ndarray, score: np.ndarray, threshold: float, fuse_ptr: np.ndarray, fuse_idx: np.ndarray,
    epilogue_user: np.ndarray, device: np.ndarray, max_nodes: int, limit: int, root: np.ndarray,
    head: np.ndarray, tail: np.ndarray, nxt: np.ndarray, size: np.ndarray, heroes: np.ndarray,
    pred_ptr: np.ndarray, pred_idx: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray,
    seen: np.ndarray, stamp: np.ndarray, queue: np.ndarray, position: np.ndarray, backward: np.ndarray,
) -> int:
    """`fuse-by-priority`'s visit (`DecisionDecoder._priority_merges`) step for step: nodes in
    `visit` order while above `threshold`, each merged into its fusible users by descending score
    (ties: lower index first), then into its epilogue user (`epilogue_user` >= 0). A merge is
    legal as in `ArrayFusionGroups.legal`: other groups, one device, at most `max_nodes` members,
    one hero, no cycle (the search above, `limit` visited nodes; or, with a `position` per group
    (`group_positions`, not empty), exactly by `merge_if_acyclic_ordered`, `queue` and `backward`
    its scratch). Returns the merges made."""
    ordered = position.size > 0
    merges = 0
    users = np.empty(max(fuse_idx.size, 1), dtype=np.int64)
    for t in range(visit.size):
        node = visit[t]
        if score[node] <= threshold:
            break
        count = fuse_ptr[node + 1] - fuse_ptr[node]
        for j in range(count):  # insertion sort by (-score, index): the Python key
            u = fuse_idx[fuse_ptr[node] + j]
            k = j
            while k > 0 and (score[users[k - 1]] < score[u] or (score[users[k - 1]] == score[u] and users[k - 1] > u)):
                users[k] = users[k - 1]
                k -= 1
            users[k] = u
        last = count + (1 if epilogue_user[node] >= 0 else 0)
        for j in range(last):
            b = users[j] if j < count else epilogue_user[node]
            ra, rb = root[node], root[b]
            if ra == rb or device[node] != device[b]:
                continue
            if size[ra] + size[rb] > max_nodes or heroes[ra] + heroes[rb] > 1:
                continue
            if ordered:
                if merge_if_acyclic_ordered(ra, rb, position, root, pred_ptr, pred_idx, succ_ptr, succ_idx, head, tail, nxt, size, heroes, seen, stamp, queue, backward):
                    merges += 1
                continue
            if creates_cycle_compiled(ra, rb, limit, root, pred_ptr, pred_idx, succ_ptr, succ_idx, head, nxt, seen, stamp, queue):
                continue
            _union(ra, rb, root, head, tail, nxt, size, heroes)
            merges += 1
    return merges


@njit(cache=True)
def group_ids_compiled(root: np.ndarray, size: np.ndarray) -> np.ndarray:
    """`FusionGroups.group_ids`: groups of two or more numbered in order of their first node, else -1."""
    n = root.size
    out = np.full(n, -1, dtype=np.int32)
    ids = np.full(n, -1, dtype=np.int64)
    count = 0
    for i in range(n):
        r = root[i]
        if size[r] > 1:
            if ids[r] < 0:
                ids[r] = count
                count += 1
            out[i] = ids[r]
    return out


@njit(cache=True)
def _sorted_by_position(groups: np.ndarray, position: np.ndarray) -> np.ndarray:
    keys = np.empty(groups.size, dtype=np.int64)
    for i in range(groups.size):
        keys[i] = position[groups[i]]
    return groups[np.argsort(keys)]


@njit(cache=True)
def _expand(
    g: int, start: int, other: int, bound: int, later: bool, ptr: np.ndarray, idx: np.ndarray, position: np.ndarray,
    root: np.ndarray, head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, mark: int, opposite: int, out: np.ndarray,
    count: int, base: int, step: int,
) -> int:
    """One step of a window search from group `start`: the groups one edge (`ptr`, `idx`) from
    group `g`'s members, placed strictly between `start` and `bound` (`later`: below `bound`, else
    above it) and not yet marked, marked `mark` and stored at `out[base + step * i]`; returns the
    new count, or -1 when a path start -> third -> `other` exists: an edge into `other` from a
    group other than `start` (the pair's own edges merge), or a group marked `opposite` (the other
    end's search reached it: it reaches `other`; pass a mark never stored, -1, for none)."""
    m = head[g]
    while m >= 0:
        for k in range(ptr[m], ptr[m + 1]):
            r = root[idx[k]]
            if r == other:
                if g != start:
                    return -1
                continue
            found = seen[r]
            if found == opposite:
                return -1
            if found != mark and (position[r] < bound if later else position[r] > bound):
                seen[r] = mark
                out[base + step * count] = r
                count += 1
        m = nxt[m]
    return count


@njit(cache=True)
def _window(
    start: int, other: int, bound: int, later: bool, ptr: np.ndarray, idx: np.ndarray, position: np.ndarray, root: np.ndarray,
    head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, stamp: np.ndarray, out: np.ndarray,
) -> int:
    """The groups reached from group `start` along the edges (`ptr`, `idx`: successors or
    predecessors) through groups placed strictly between `start` and `bound` (`later`: placed
    after `start`, so below `bound`; else above it), into `out`: their count. Edges into `other`
    are not followed; from any group but `start` one is a path start -> third -> other, and then
    -1 is returned (merging the two would close a cycle)."""
    stamp[0] += 1
    mark = stamp[0]
    seen[start] = mark
    count = front = 0
    g = start
    while True:
        count = _expand(g, start, other, bound, later, ptr, idx, position, root, head, nxt, seen, mark, -1, out, count, 0, 1)
        if count < 0 or front == count:
            return count
        g = out[front]
        front += 1


@njit(cache=True)
def _reorder_window(a: int, b: int, count: int, back: int, position: np.ndarray, forward: np.ndarray, backward: np.ndarray) -> int:
    """Pearce and Kelly's reorder for merging a and b: on the positions of a, b and both windows,
    the groups that reach b first, then one slot for the merged group (returned), then those a
    reaches, each window in its old order."""
    before = _sorted_by_position(backward[:back].copy(), position)
    after = _sorted_by_position(forward[:count].copy(), position)
    slots = np.empty(back + count + 2, dtype=np.int64)
    slots[0], slots[1] = position[a], position[b]
    for i in range(back):
        slots[2 + i] = position[before[i]]
    for i in range(count):
        slots[2 + back + i] = position[after[i]]
    slots.sort()
    for i in range(back):
        position[before[i]] = slots[i]
    for i in range(count):
        position[after[i]] = slots[back + 1 + i]
    return slots[back]


@njit(cache=True)
def _forward_window_or_cycle(
    a: int, b: int, position: np.ndarray, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, succ_ptr: np.ndarray,
    succ_idx: np.ndarray, head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, stamp: np.ndarray, out: np.ndarray,
) -> int:
    """`_window(a, b, position[b], True, successors)` (a placed before b): a's forward window in
    `out[:count]`, its count returned, or -1 when a path a -> third -> b closes a cycle. The
    search for that path runs from both ends in lockstep, one group of each at a time: forward
    from a through groups placed before b, backward from b through groups placed after a (into
    the top of `out`; the two sets are disjoint unless they meet, so both fit). They meet, or
    one reaches the other end through a third group, exactly when the path exists; so the answer
    is `_window`'s, found in about twice the smaller side's work rather than the whole forward
    cone (a cycle's forward side is often most of an unrolled RNN's downstream, its backward side
    a few groups). Without a cycle the forward window is completed, the same set `_window` finds."""
    stamp[0] += 2
    fmark, bmark = stamp[0] - 1, stamp[0]
    seen[a], seen[b] = fmark, bmark
    top = out.size - 1  # backward entries grow down from here
    fcount = ffront = bcount = bfront = 0
    fg, bg = a, b  # the group each side expands next; bg -1: the backward side is done
    while True:  # ends when the forward window is complete or a cycle is found
        fcount = _expand(fg, a, b, position[b], True, succ_ptr, succ_idx, position, root, head, nxt, seen, fmark, bmark, out, fcount, 0, 1)
        if fcount < 0 or ffront == fcount:
            return fcount  # a cycle, or the forward window complete without one
        fg = out[ffront]
        ffront += 1
        if bg >= 0:
            bcount = _expand(bg, b, a, position[a], False, pred_ptr, pred_idx, position, root, head, nxt, seen, bmark, fmark, out, bcount, top, -1)
            if bcount < 0:
                return -1
            if bfront == bcount:
                bg = -1  # the backward window is complete without a cycle: finish the forward one alone
            else:
                bg = out[top - bfront]
                bfront += 1


# `ordered_check`'s answers besides a window size: the merge closes a cycle, or a cheap case where
# the merged group takes the earlier / the later group's place with no search and no reorder.
CYCLE = -1
AT_EARLIER = -2
AT_LATER = -3


@njit(cache=True)
def ordered_check(
    ra: int, rb: int, position: np.ndarray, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, succ_ptr: np.ndarray,
    succ_idx: np.ndarray, head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, stamp: np.ndarray, forward: np.ndarray,
) -> int:
    """Exactly: would merging groups `ra` and `rb` (roots) create a cycle? `position` is a
    topological order of the groups (one per root; for every edge between groups g -> h,
    position[g] < position[h]). With a before b only a path a -> third -> b can close one, and it
    passes only through groups placed between them, so the search stays inside that window (the
    unordered search explores b's whole downstream cone looking for a, and refuses as unsure past
    its limit); the search runs from both ends at once (`_forward_window_or_cycle`, forty-sixth
    session: GO decodes 1.9-2.5x faster on paper-size gnmt-8, where most checks that find a cycle
    used to walk most of a's downstream cone). Returns `CYCLE`; `AT_EARLIER` when every predecessor of b outside it is in a, or
    `AT_LATER` when every successor of a is in b (no third group can enter b, or be left from a);
    else the size of a's window, left in `forward` for `ordered_merge_slot`."""
    a, b = (ra, rb) if position[ra] < position[rb] else (rb, ra)
    if _neighbours_within(b, a, root, pred_ptr, pred_idx, head, nxt):
        return AT_EARLIER
    if _neighbours_within(a, b, root, succ_ptr, succ_idx, head, nxt):
        return AT_LATER
    return _forward_window_or_cycle(a, b, position, root, pred_ptr, pred_idx, succ_ptr, succ_idx, head, nxt, seen, stamp, forward)


@njit(cache=True)
def ordered_merge_slot(
    ra: int, rb: int, check: int, position: np.ndarray, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray,
    head: np.ndarray, nxt: np.ndarray, seen: np.ndarray, stamp: np.ndarray, forward: np.ndarray, backward: np.ndarray,
) -> int:
    """Before groups `ra` and `rb` merge, right after `ordered_check` answered `check` (not
    `CYCLE`) for them: the window between them reordered (`_reorder_window`, with the forward
    window `ordered_check` left in `forward`) and the merged group's position returned."""
    a, b = (ra, rb) if position[ra] < position[rb] else (rb, ra)
    if check == AT_EARLIER:
        return position[a]
    if check == AT_LATER:
        return position[b]
    # the groups that reach b from after a: disjoint from a's window, and never through a (no path a -> third -> b)
    back = _window(b, a, position[a], False, pred_ptr, pred_idx, position, root, head, nxt, seen, stamp, backward)
    return _reorder_window(a, b, check, back, position, forward, backward)


@njit(cache=True)
def merge_if_acyclic_ordered(
    ra: int, rb: int, position: np.ndarray, root: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray,
    succ_ptr: np.ndarray, succ_idx: np.ndarray, head: np.ndarray, tail: np.ndarray, nxt: np.ndarray, size: np.ndarray,
    heroes: np.ndarray, seen: np.ndarray, stamp: np.ndarray, forward: np.ndarray, backward: np.ndarray,
) -> bool:
    """Merge groups `ra` and `rb` (roots) unless that creates a cycle, decided exactly and with
    the order kept (`ordered_check`, `ordered_merge_slot`). True when merged."""
    check = ordered_check(ra, rb, position, root, pred_ptr, pred_idx, succ_ptr, succ_idx, head, nxt, seen, stamp, forward)
    if check == CYCLE:
        return False
    slot = ordered_merge_slot(ra, rb, check, position, root, pred_ptr, pred_idx, head, nxt, seen, stamp, forward, backward)
    merged = _union(ra, rb, root, head, tail, nxt, size, heroes)  # as FusionGroups: ties keep ra
    position[merged] = slot
    return True


@njit(cache=True)
def group_positions(root: np.ndarray, head: np.ndarray, nxt: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray) -> np.ndarray:
    """A topological order of the current groups (Kahn's algorithm on the contracted graph):
    one position per root, -1 for other nodes. Raises if the groups form a cycle."""
    n = root.size
    indegree = np.zeros(n, dtype=np.int64)
    for m in range(n):
        for k in range(succ_ptr[m], succ_ptr[m + 1]):
            r = root[succ_idx[k]]
            if r != root[m]:
                indegree[r] += 1
    position = np.full(n, -1, dtype=np.int64)
    ready = np.empty(n, dtype=np.int64)
    count = 0
    for g in range(n):
        if root[g] == g and indegree[g] == 0:
            ready[count] = g
            count += 1
    front = 0
    while front < count:
        g = ready[front]
        position[g] = front
        front += 1
        m = head[g]
        while m >= 0:
            for k in range(succ_ptr[m], succ_ptr[m + 1]):
                r = root[succ_idx[k]]
                if r != g:
                    indegree[r] -= 1
                    if indegree[r] == 0:
                        ready[count] = r
                        count += 1
            m = nxt[m]
    groups = 0
    for g in range(n):
        if root[g] == g:
            groups += 1
    if front != groups:
        raise ValueError("the fusion groups form a cycle")
    return position
