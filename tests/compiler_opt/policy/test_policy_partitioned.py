"""Partitioned decoding (policy/partitioned.py): the placement distributions read as co-location
and cut by METIS."""

from __future__ import annotations

import numpy as np
import pytest

from compiler_opt.policy.partitioned import edge_agreement, partitioned_placements
from passes.placement.partition import metis_parts


def test_edge_agreement_by_hand() -> None:
    prob = np.array([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]])
    src, dst = np.array([0, 1, 0]), np.array([1, 2, 2])
    assert edge_agreement(prob, src, dst) == pytest.approx([0.5, 0.2, 0.5])


def _two_chains(confident: bool) -> dict:
    # Two chains 0..5 and 6..11 joined by one heavy edge 5 -> 6, which plain METIS on bytes never
    # cuts; a third device column no node may use (a host).
    edges = [(i, i + 1) for i in range(5)] + [(i, i + 1) for i in range(6, 11)] + [(5, 6), (2, 9)]
    src, dst = np.array(edges).T
    nbytes = np.ones(len(edges))
    nbytes[-2] = 1000.0  # the bridge
    prob = np.full((12, 3), 1e-6)
    lean = 0.98 if confident else 0.4
    prob[:6, 1], prob[6:, 0] = lean, lean
    prob[:6, 0], prob[6:, 1] = 1 - lean, 1 - lean
    prob[3] = [0.5, 0.44, 1e-6]  # unsure: its argmax leaves its chain
    prob /= prob.sum(axis=1, keepdims=True)
    mask = np.ones((12, 3), dtype=bool)
    mask[:, 2] = False
    return dict(
        log_prob=np.log(prob), edge_index=np.stack([src, dst]), edge_bytes=nbytes,
        node_time=np.ones((12, 3)), mask=mask, fallback=prob.argmax(axis=1),
    )


def test_cuts_where_the_policy_expects_a_change_and_labels_parts_by_its_mass() -> None:
    args = _two_chains(confident=True)
    # Plain METIS on bytes keeps the heavy bridge and cuts the chains elsewhere.
    plain = metis_parts(2, *args["edge_index"], args["edge_bytes"], np.ones(12))
    assert plain[5] == plain[6]
    out = partitioned_placements(**args, exponents=(4.0,))
    halves = np.r_[np.full(6, 1), np.full(6, 0)]
    assert args["fallback"][3] == 0  # the per-node argmax splits the first chain
    assert any(np.array_equal(device, halves) for device in out)
    for device in out:
        assert not np.isin(device, [2]).any()  # never the device nobody may use
        assert not np.array_equal(device, args["fallback"])  # the policy's own answer is not repeated


def test_a_node_keeps_its_own_device_where_its_parts_device_is_masked() -> None:
    args = _two_chains(confident=True)
    args["mask"][0, 1] = False
    args["fallback"][0] = 0
    out = partitioned_placements(**args, exponents=(4.0,))
    assert out and all(device[0] == 0 for device in out)
    assert any(np.array_equal(device[1:], np.r_[np.full(5, 1), np.full(6, 0)]) for device in out)


def test_without_bytes_or_times_every_edge_and_node_counts_one() -> None:
    # A profiled problem's policy inputs carry neither (PolicyInputs: None).
    args = _two_chains(confident=True)
    unit = dict(args, edge_bytes=np.ones(args["edge_bytes"].size), node_time=np.ones((12, 3)))
    assert [d.tolist() for d in partitioned_placements(**dict(args, edge_bytes=None, node_time=None))] == [
        d.tolist() for d in partitioned_placements(**unit)
    ]


def test_one_usable_device_or_one_node_gives_nothing() -> None:
    args = _two_chains(confident=False)
    args["mask"][:, 1] = False
    assert partitioned_placements(**args) == []
    single = dict(
        log_prob=np.zeros((1, 2)), edge_index=np.zeros((2, 0), dtype=np.int64), edge_bytes=np.zeros(0),
        node_time=np.ones((1, 2)), mask=np.ones((1, 2), dtype=bool), fallback=np.zeros(1, dtype=np.int64),
    )
    assert partitioned_placements(**single) == []


def test_one_cut_sizes_its_parts_by_the_policys_expected_load() -> None:
    # A chain of 12 unit nodes; the policy runs about 70% of the work on device 0 (its argmax
    # sends node 4 to device 1, so its own answer is not the cut).
    src = np.arange(11)
    prob = np.tile([0.9, 0.1], (12, 1))
    prob[9:] = [0.1, 0.9]
    prob[4] = [0.45, 0.55]
    args = dict(
        log_prob=np.log(prob), edge_index=np.stack([src, src + 1]), edge_bytes=np.ones(11),
        node_time=np.ones((12, 2)), mask=np.ones((12, 2), dtype=bool), fallback=prob.argmax(axis=1),
    )
    sizes = {tuple(np.bincount(device, minlength=2)) for device in partitioned_placements(**args, exponents=(1.0,))}
    assert (6, 6) in sizes  # the equal cut
    assert any(first >= 8 for first, _ in sizes)  # the cut shaped by the policy's load


def test_the_load_sized_cut_leaves_out_devices_the_policy_barely_uses() -> None:
    # Three devices; the policy gives the third ~0.3% of the load: the equal 3-way cut uses it,
    # the load-sized cut does not (a part of almost no weight is one METIS cannot fill).
    src = np.arange(11)
    prob = np.tile([0.897, 0.1, 0.003], (12, 1))
    prob[9:] = [0.1, 0.897, 0.003]
    prob[4] = [0.45, 0.547, 0.003]
    args = dict(
        log_prob=np.log(prob), edge_index=np.stack([src, src + 1]), edge_bytes=np.ones(11),
        node_time=np.ones((12, 3)), mask=np.ones((12, 3), dtype=bool), fallback=prob.argmax(axis=1),
    )
    out = partitioned_placements(**args, exponents=(1.0,))
    assert any(set(device.tolist()) == {0, 1, 2} for device in out)
    assert any(set(device.tolist()) == {0, 1} and np.bincount(device)[0] >= 8 for device in out)
