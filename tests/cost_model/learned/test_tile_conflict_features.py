"""Cache-set conflict features of tile configurations (`cost_model/learned/tile_conflict_features.py`)."""

from __future__ import annotations

import numpy as np

from cost_model.learned.tile_conflict_features import CONFLICT_FEATURE_NAMES, CONFLICT_FEATURES, CacheGeometry, conflict_features
from cost_model.measure.tile.space import TileConfig

L1 = CacheGeometry(48 * 1024, 12)  # 64 sets: lines 4 KiB apart share a set
L2 = CacheGeometry(2 * 1024 * 1024, 16)


def _reduce(rows: int, cols: int, row_tile: int) -> np.ndarray:
    """A row reduction whose innermost loop walks `row_tile` rows of `cols` floats, one element of each
    (order 1 = S0 R0 S1 R1 S2: the rows loop innermost)."""
    config = TileConfig(((rows // row_tile, 1, row_tile), (cols, 1)), order=1, vectorize=False)
    return conflict_features(config, (False, True), (rows, cols), "reduce", (rows, cols), caches=(L1, L2))


def test_rows_a_page_apart_share_a_set_and_odd_rows_do_not() -> None:
    named = dict(zip(CONFLICT_FEATURE_NAMES, range(CONFLICT_FEATURES)))
    aligned = _reduce(64, 1024, 64)  # rows of 4 KiB: the 64 rows' first lines all map to one L1 set
    odd = _reduce(64, 1040, 64)  # rows of 4160 bytes: the same lines spread over the sets
    assert aligned.shape == (CONFLICT_FEATURES,) and np.isfinite(aligned).all()
    worst = named["l1_fit_set_over_ways_worst"]
    assert aligned[worst] > np.log2(64 / 12) - 1e-6  # at least 64 lines in one 12-way set
    assert odd[worst] <= 0.0  # no set over its ways
    assert aligned[named["l1_fit_share_over_ways"]] > 0.5 and odd[named["l1_fit_share_over_ways"]] == 0.0


def test_an_unknown_kind_gives_zeros() -> None:
    config = TileConfig(((4, 1, 1), (8, 1)), order=0, vectorize=False)
    assert not conflict_features(config, (False, True), (4, 8), "no_such_kind", (4, 8), caches=(L1, L2)).any()
