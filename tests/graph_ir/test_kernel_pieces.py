"""`spanning_groups` against a plain set-based reference, on dense and sparse group ids."""

import numpy as np
import pytest

from graph_ir.kernel_pieces import spanning_groups


def _reference(group: np.ndarray, device: np.ndarray) -> list[int]:
    devices: dict[int, set[int]] = {}
    for g, d in zip(group.tolist(), device.tolist()):
        if g >= 0:
            devices.setdefault(g, set()).add(d)
    return sorted(g for g, ds in devices.items() if len(ds) > 1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("id_scale", [1, 10**9])
def test_spanning_groups_matches_reference(seed: int, id_scale: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    group = rng.integers(-1, max(n // 4, 1), size=n)
    group = np.where(group >= 0, group * id_scale, -1)  # id_scale 1e9: ids far beyond the node count
    device = rng.integers(0, int(rng.integers(1, 9)), size=n)
    # Most groups on one device, as placements keep them; a few spread.
    keep = rng.random(n) < 0.8
    first_device = {g: d for g, d in zip(group.tolist(), device.tolist())}
    device = np.where(keep & (group >= 0), [first_device.get(g, 0) for g in group.tolist()], device)
    got = spanning_groups(group, device)
    assert got.tolist() == _reference(group, device)
    assert got.dtype == np.int64


def test_spanning_groups_empty_and_ungrouped() -> None:
    assert spanning_groups(np.full(5, -1), np.arange(5)).size == 0
    assert spanning_groups(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).size == 0
    assert spanning_groups(np.array([3, 3, 3]), np.array([1, 1, 1])).size == 0
    assert spanning_groups(np.array([3, -1, 3]), np.array([1, 0, 2])).tolist() == [3]
    # Large values are compared exactly (no arithmetic on them).
    big = 2**40
    assert spanning_groups(np.array([5, 5, 7, 7]), np.array([big, big + 1, big, big])).tolist() == [5]
