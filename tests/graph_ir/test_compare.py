"""The one output comparison behind the optimize check and the fusion autotuner's check."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from graph_ir.compare import close, epsilon, excess, tolerances


def test_epsilon_of_each_kind() -> None:
    assert epsilon(np.dtype(ml_dtypes.bfloat16)) == 2.0 ** -7
    assert epsilon(np.dtype(np.float32)) == 2.0 ** -23
    assert epsilon(np.dtype(np.complex64)) == 2.0 ** -23
    assert epsilon(np.dtype(np.int32)) == 0.0 and epsilon(np.dtype("U3")) == 0.0


def test_tolerances_rise_to_four_ulps_of_the_type() -> None:
    assert tolerances(np.dtype(np.float32), 1e-4, 1e-5) == (1e-4, 1e-5)
    assert tolerances(np.dtype(ml_dtypes.bfloat16), 1e-4, 1e-5) == (4 * 2.0 ** -7, 4 * 2.0 ** -7)


def test_ratio_is_the_error_over_its_tolerance() -> None:
    want = np.array([1.0, 10.0], np.float32)
    ratio, gap = excess(want, np.array([1.0, 10.002], np.float32), 1e-4, 1e-5)
    # |10.002 - 10| / (1e-5 + 1e-4 * 10) = 0.002 / 0.00101
    assert math.isclose(gap, 0.002, rel_tol=1e-3) and math.isclose(ratio, 0.002 / 0.00101, rel_tol=1e-3)
    assert not close(want, np.array([1.0, 10.002], np.float32), 1e-4, 1e-5)
    assert close(want, np.array([1.0, 10.0005], np.float32), 1e-4, 1e-5)


def test_a_bf16_ulp_is_within_and_a_bf16_step_of_ten_ulps_is_not() -> None:
    want = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert close(want, np.array([1.0078125, 2.0], ml_dtypes.bfloat16), 1e-4, 1e-5)  # one ulp at 1
    assert not close(want, np.array([1.078125, 2.0], ml_dtypes.bfloat16), 1e-4, 1e-5)  # ten


def test_nan_equals_nan_and_infinities_must_be_the_same() -> None:
    want = np.array([np.nan, np.inf, -np.inf])
    assert close(want, want.copy(), 1e-4, 1e-5)
    assert not close(want, np.array([np.nan, -np.inf, -np.inf]), 1e-4, 1e-5)
    assert not close(np.array([1.0]), np.array([np.nan]), 1e-4, 1e-5)


def test_integers_booleans_and_strings_must_be_equal() -> None:
    assert excess(np.array([3, 4]), np.array([3, 4]), 1e-4, 1e-5) == (0.0, 0.0)
    assert excess(np.array([3, 4]), np.array([3, 5]), 1e-4, 1e-5) == (math.inf, 1.0)
    assert close(np.array([True, False]), np.array([True, False]), 0.5, 0.5)
    assert not close(np.array([True, False]), np.array([True, True]), 0.5, 0.5)
    assert excess(np.array(["a", "b"]), np.array(["a", "b"]), 1e-4, 1e-5) == (0.0, 0.0)
    ratio, gap = excess(np.array(["a", "b"]), np.array(["a", "c"]), 1e-4, 1e-5)
    assert ratio == math.inf and math.isnan(gap)


def test_shapes_must_match_and_empty_arrays_agree() -> None:
    assert not close(np.zeros(3), np.zeros((3, 1)), 1e-4, 1e-5)
    assert close(np.zeros((0, 2)), np.zeros((0, 2)), 1e-4, 1e-5)


def test_complex_numbers_compare_their_imaginary_part() -> None:
    want = np.array([1 + 1j], np.complex64)
    assert not close(want, np.array([1 + 1.5j], np.complex64), 1e-4, 1e-5)
    assert close(want, want.copy(), 1e-4, 1e-5)
