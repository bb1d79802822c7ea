"""Hardware features of tile configurations, against values worked out by hand on small kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_model.learned.tile_hw_features import HW_FEATURES, HostCaches, access_pattern, hardware_features, host_caches, working_sets
from cost_model.measure.tile.space import CONFIG_FEATURES, TileConfig, config_features

HOST = HostCaches(l1=32 * 1024, l2=512 * 1024, l3=32 * 1024 * 1024, line=64, lanes=8, threads=1, registers=16)


def test_matmul_64_cube_by_hand() -> None:
    # order "S0 S1 R0 S2 R1": nest i4 j2 | i2 j4 | k16 | i8 j8 | k4
    config = TileConfig(((4, 2, 8), (2, 4, 8), (16, 4)), order=0, vectorize=True, unroll=0, parallel=False)
    f = hardware_features(config, (False, False, True), (64, 64, 64), "matmul", (64, 64, 64), HOST)
    assert f.shape == (HW_FEATURES,)
    # A, B, C are 16 KiB each (48 KiB compulsory). Inside the outer i loop (i16 j64 k64): A 4 KiB + B 16 KiB + C 4 KiB = 24 KiB
    # fits L1; the outer i loop re-walks A and C tiles (4 x 4 KiB each) and keeps B (not indexed by i): traffic 48 KiB.
    flops = 2 * 64**3
    # registers (16 x 8 x 4 = 512 B): the i8 j8 k4 block (A 32 + B 32 + C 64 floats = 512 B); outside it k16 walks A and B
    # (1024 trips of the five outer loops), C keeps its tile across k16 (64 trips): 128 KiB + 128 KiB + 16 KiB
    assert f[0] == pytest.approx(math.log2(278_528 / 49_152), abs=1e-5)
    assert f[1] == pytest.approx(math.log2(flops / 278_528), abs=1e-5) and f[2] == pytest.approx(0.0)
    # A, B, C are 16 KiB each (48 KiB compulsory). Inside the outer i loop (i16 j64 k64): A 4 KiB + B 16 KiB + C 4 KiB = 24 KiB
    # fits L1; the outer i loop re-walks A and C tiles (4 x 4 KiB each) and keeps B (not indexed by i): traffic 48 KiB.
    assert f[3] == pytest.approx(0.0)
    assert f[4] == pytest.approx(math.log2(flops / (48 * 1024)), abs=1e-5)
    assert f[5] == pytest.approx(math.log2(24 / 32), abs=1e-5)
    # the whole kernel fits L2 and L3: traffic = compulsory, fill = 48 KiB over the cache
    assert f[6] == pytest.approx(0.0) and f[8] == pytest.approx(math.log2(48 / 512), abs=1e-5)
    # innermost loop k4: A stride 1, B stride 64 (row of B), C stride 0 (accumulates in place)
    assert list(f[12:16]) == [1.0, 1.0, 1.0, 0.0]
    # the innermost loop is a reduction: no vectorize applied
    assert list(f[16:20]) == [0.0, 0.0, 0.0, 0.0]
    # L1 tile rows: A and B 64 floats = 256 B = 4 lines, C 64 floats
    assert f[20] == pytest.approx(2.0) and f[21] == pytest.approx(2.0)
    assert f[22] == 0.0 and f[23] == pytest.approx(math.log2(flops))
    # loop iterations: 4 + 8 + 16 + 64 + 1024 + 8192 + 65536 + 262144 over 262144 points
    assert f[24] == pytest.approx(math.log2(336_988 / 262_144), abs=1e-5)
    assert f[25] == pytest.approx(18.0)
    assert list(f[26:29]) == [0.0, 0.0, 0.0]  # no unrolling: a block of one point, 2 FLOPs per 2 input elements
    assert list(f[-7:]) == [15.0, 19.0, 25.0, 8.0, 16.0, 1.0, 1.0]


def test_unrolled_block() -> None:
    config = TileConfig(((4, 2, 8), (2, 4, 8), (16, 4)), order=0, vectorize=False, unroll=64, parallel=False)
    f = hardware_features(config, (False, False, True), (64, 64, 64), "matmul", (64, 64, 64), HOST)
    # k4 x j8 = 32 <= 64 unrolled (i8 would make 256): 8 accumulators of C, 2 FLOPs x 32 points over 4 + 32 input floats
    assert f[26] == pytest.approx(5.0) and f[27] == pytest.approx(3.0) and f[28] == pytest.approx(math.log2(64 / 36), abs=1e-5)


def test_vectorized_innermost_spatial_loop_and_remainder_lanes() -> None:
    # order 2 = "S0 S1 R0 R1 S2": innermost j12 (stride 1 in B and C), a vector of 12 = 1.5 AVX2 vectors
    config = TileConfig(((8, 8, 1), (4, 1, 12), (8, 8)), order=2, vectorize=True, unroll=0, parallel=True)
    f = hardware_features(config, (False, False, True), (64, 48, 64), "matmul", (64, 48, 64), HOST)
    assert list(f[16:20]) == [1.5, 0.5, 1.0, 0.0]  # 12 lanes over 8, remainder 4 of 8, applied, no gather (A is loop-invariant in j)
    assert list(f[12:16]) == [2.0, 1.0, 0.0, 1.0]  # B and C stride 1, A stride 0 (a register); output stride 1 -> log2(1 + 1)
    # parallel over the fused S0 loops: 8 x 4 = 32 chunks on 1 thread
    assert f[22] == pytest.approx(5.0)


def test_reduce_vectorized_over_rows_gathers() -> None:
    # reduce(rows=64, cols=32), order 3 "S0 S1 S2 R0 R1" has the reduction innermost; order 1 "S0 R0 S1 R1 S2" vectorizes rows
    config = TileConfig(((4, 2, 8), (4, 8)), order=1, vectorize=True, unroll=0, parallel=False)
    f = hardware_features(config, (False, True), (64, 32), "reduce", (64, 32), HOST)
    assert f[18] == 1.0 and f[19] == 1.0  # X[i, r] read along i with stride 32: a gather


def test_conv_window_footprint() -> None:
    # conv2d_nhwc n1 h8 w8 c4 f4 k3 stride 2: a 2x2 output tile with the whole 3x3 window reads (2-1)*2 + 3 = 5 padded rows/columns
    pattern = access_pattern("conv2d_nhwc", (1, 8, 8, 4, 4, 3, 3, 2))
    x_indices = pattern[0][2]
    from cost_model.learned.tile_hw_features import index_spans

    assert index_spans(x_indices, [1, 2, 2, 1, 4, 3, 3]) == [1, 5, 5, 4]
    nest = [("S0", 1, 2), ("S2", 1, 2)]
    sets = working_sets(nest, [pattern[0]], 7)
    # y runs 4, 2, 1 values at one window tap: (4-1)*2 + 1 = 7, 3, 1 input rows
    assert sets == [[4 * 7], [4 * 3], [4]]


def test_unknown_kind_gives_zeros_but_the_machine() -> None:
    config = TileConfig(((2, 2, 2), (4, 2)), order=0)
    f = hardware_features(config, (False, True), (8, 8), "softmax", (8, 8), HOST)
    assert not f[:-7].any() and f[-1] == 0.0 and f[-4] == 8.0


def test_config_features_carry_the_hardware_block() -> None:
    config = TileConfig(((4, 2, 8), (2, 4, 8), (16, 4)), order=0)
    full = config_features(config, (False, False, True), (64, 64, 64), kind="matmul", dims=(64, 64, 64), host=HOST)
    assert full.shape == (CONFIG_FEATURES,)
    assert np.array_equal(full[-HW_FEATURES:], hardware_features(config, (False, False, True), (64, 64, 64), "matmul", (64, 64, 64), HOST))


def test_host_caches_are_plausible() -> None:
    host = host_caches()
    assert 8 * 1024 <= host.l1 <= host.l2 <= host.l3 and host.lanes in (4, 8, 16) and host.line >= 32
    assert HostCaches.from_dict(HOST.to_dict()) == HOST
