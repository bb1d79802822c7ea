"""Coarsened decoding (policy/coarsen.py): stages merged in the answer's own topological order."""

from __future__ import annotations

import numpy as np

from compiler_opt.policy.coarsen import coarsened_placements


def test_stages_merge_in_topological_order_down_to_one_device() -> None:
    # Four stages in row order: device 3, then 1, then 0, then 2 (not the ordinal order).
    device = np.array([3, 3, 1, 1, 0, 0, 2, 2])
    mask = np.ones((8, 4), dtype=bool)
    two, one = coarsened_placements(device, mask)
    assert two.tolist() == [3, 3, 3, 3, 0, 0, 0, 0]  # stages (3, 1) and (0, 2), each on its first device
    assert one.tolist() == [3] * 8


def test_a_node_keeps_its_device_where_the_merged_one_is_masked() -> None:
    device = np.array([0, 0, 1, 1])
    mask = np.ones((4, 2), dtype=bool)
    mask[3, 0] = False  # node 3 may not run on device 0 (memory)
    (one,) = coarsened_placements(device, mask)
    assert one.tolist() == [0, 0, 0, 1]


def test_odd_stage_counts_and_nothing_to_merge() -> None:
    device = np.array([0, 1, 1, 2, 2, 2])  # three stages: u // 2 = 1 stage
    assert [c.tolist() for c in coarsened_placements(device, np.ones((6, 3), dtype=bool))] == [[0] * 6]
    assert coarsened_placements(np.zeros(5, dtype=np.int64), np.ones((5, 2), dtype=bool)) == []
    # Eight stages: 4, 2 and 1, every candidate distinct from the answer and from each other.
    device = np.repeat(np.arange(8), 3)
    got = coarsened_placements(device, np.ones((24, 8), dtype=bool))
    assert [sorted(set(c.tolist())) for c in got] == [[0, 2, 4, 6], [0, 4], [0]]
