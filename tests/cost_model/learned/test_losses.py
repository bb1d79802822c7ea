"""Losses and metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cost_model.learned.losses import listmle, loss_fn, mse_log, mse_relative, pairwise_hinge, pairwise_logistic
from cost_model.learned.metrics import best_seconds_error, kendall_tau, label_spread, mape, top_k_slowdown

PRED = torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64)
RUNTIME = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)


def test_mse_on_log_runtime() -> None:
    expected = ((0 - 0) ** 2 + (1 - math.log(2)) ** 2 + (3 - math.log(3)) ** 2) / 3
    assert float(mse_log(PRED, RUNTIME)) == pytest.approx(expected)


def test_mse_on_the_per_kernel_normalised_target() -> None:
    logs = [0.0, math.log(2), math.log(3)]
    centred_pred = [p - 4 / 3 for p in (0.0, 1.0, 3.0)]
    centred_target = [t - sum(logs) / 3 for t in logs]
    expected = sum((p - t) ** 2 for p, t in zip(centred_pred, centred_target)) / 3
    assert float(mse_relative(PRED, RUNTIME)) == pytest.approx(expected)
    assert float(mse_relative(PRED + 7.0, RUNTIME * 3.0)) == pytest.approx(expected)  # blind to a kernel's absolute time
    assert float(mse_relative(torch.log(RUNTIME) - 1.0, RUNTIME)) == pytest.approx(0.0)


def test_pairwise_hinge() -> None:
    # Pairs (faster, slower): (0,1) diff 1, (0,2) diff 3, (1,2) diff 2; margin 1.5 -> 0.5, 0, 0.
    assert float(pairwise_hinge(PRED, RUNTIME, margin=1.5)) == pytest.approx(0.5 / 3)
    # A wrong order is penalised: swap the predictions of 0 and 2 -> diffs -2, -3, -1 (margin 1).
    swapped = torch.tensor([3.0, 1.0, 0.0], dtype=torch.float64)
    assert float(pairwise_hinge(swapped, RUNTIME, margin=1.0)) == pytest.approx((3 + 4 + 2) / 3)


def test_pairwise_logistic() -> None:
    expected = (math.log1p(math.exp(-1)) + math.log1p(math.exp(-3)) + math.log1p(math.exp(-2))) / 3
    assert float(pairwise_logistic(PRED, RUNTIME)) == pytest.approx(expected)


def test_listmle() -> None:
    s = [0.0, -1.0, -3.0]  # scores = -pred in the true order
    terms = [math.log(sum(math.exp(v) for v in s[i:])) - s[i] for i in range(3)]
    assert float(listmle(PRED, RUNTIME)) == pytest.approx(sum(terms) / 3)
    # Shuffling the inputs together changes nothing: the loss reads the true order from runtime.
    perm = torch.tensor([2, 0, 1])
    assert float(listmle(PRED[perm], RUNTIME[perm])) == pytest.approx(sum(terms) / 3)


def test_rank_losses_are_gradients_toward_the_right_order() -> None:
    pred = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64, requires_grad=True)  # exactly backwards
    for name in ("hinge", "logistic", "listmle"):
        pred.grad = None
        loss_fn(name)(pred, RUNTIME).backward()
        assert pred.grad[0] > 0 and pred.grad[2] < 0, name  # push the fastest down, the slowest up


def test_combined_loss_and_unknown_name() -> None:
    combined = loss_fn("listmle", mse_weight=0.5)
    assert float(combined(PRED, RUNTIME)) == pytest.approx(float(listmle(PRED, RUNTIME)) + 0.5 * float(mse_log(PRED, RUNTIME)))
    with pytest.raises(ValueError, match="unknown loss"):
        loss_fn("nope")


def test_metrics() -> None:
    runtime = np.array([4.0, 1.0, 2.0, 3.0])
    assert top_k_slowdown(np.array([0.0, 1.0, 2.0, 3.0]), runtime, 1) == pytest.approx(3.0)  # picks 4.0
    assert top_k_slowdown(np.array([0.0, 1.0, 2.0, 3.0]), runtime, 2) == pytest.approx(0.0)
    assert top_k_slowdown(np.zeros(4), runtime, 1) == pytest.approx(2.5 / 1.0 - 1)  # ties: expected value
    assert kendall_tau(runtime, runtime) == pytest.approx(1.0)
    assert kendall_tau(-runtime, runtime) == pytest.approx(-1.0)
    assert kendall_tau(np.ones(4), runtime) == 0.0
    assert mape(np.array([1.1, 1.0]), np.array([1.0, 1e-7]), min_runtime=1e-6) == pytest.approx(0.1)
    # the fastest predicted time (1.5, another configuration than the measured best) against the fastest measured (1.0)
    assert best_seconds_error(np.log(np.array([3.0, 2.0, 1.5, 5.0])), runtime) == pytest.approx(0.5)
    assert best_seconds_error(np.log(np.array([0.5, 9.0])), np.array([2.0, 1.0])) == pytest.approx(0.5)  # too fast counts too


def test_label_spread() -> None:
    # median 2.0; |r / 2 - 1| = 0.5, 0.05, 0, 0.05, 1.0 -> median 0.05
    assert label_spread(np.array([1.0, 1.9, 2.0, 2.1, 4.0])) == pytest.approx(0.05)
    assert label_spread(np.full(7, 3e-5)) == 0.0


def test_pair_agreement_by_gap_counts_hand_computed_pairs() -> None:
    from cost_model.learned.metrics import pair_agreement_by_gap

    runtime = np.array([1.0, 1.005, 1.2, 2.0])  # gaps: 0.005 | 0.18, 0.18 | 0.69, 0.69, 0.51
    pred = np.array([0.0, 1.0, 1.0, 0.5])  # orders (0,1), (0,2), (0,3) right, ties (1,2), orders (1,3), (2,3) wrong
    agree, pairs = pair_agreement_by_gap(pred, runtime)
    assert pairs.tolist() == [1, 0, 0, 2, 3]
    assert agree.tolist() == [1.0, 0.0, 0.0, 1.5, 1.0]


def test_pair_agreement_by_gap_leaves_out_equal_runtimes_and_rejects_bad_input() -> None:
    from cost_model.learned.metrics import pair_agreement_by_gap

    agree, pairs = pair_agreement_by_gap(np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 1.5]), edges=(0.0, 0.1, np.inf))
    assert pairs.tolist() == [0, 2] and agree.tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="1-D of one length"):
        pair_agreement_by_gap(np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match="positive"):
        pair_agreement_by_gap(np.zeros(2), np.array([1.0, 0.0]))
