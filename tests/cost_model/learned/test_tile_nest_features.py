"""The whole-nest code features (seventeenth session): loop levels and trip counts on hand-written
assembly and on real matmuls compiled here, the per-kernel z-scores, the feature sets, and the
sixteenth session's 35 columns unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_model.learned.tile_code_features import (
    ALL_CODE_FEATURE_NAMES, CODE_FEATURE_NAMES, CODE_FEATURES, code_feature_set_names, code_feature_set_width, code_features, kernel_zscores,
)
from cost_model.learned.tile_nest_features import NEST_FEATURE_NAMES, NEST_FEATURES, nest_features, nest_stats
from tests.tile_ranker_history import assert_pinned_scores, ensemble_from_history

# A compute function with a two-deep nest: the outer loop counts %rdx from -8 up to 0 (8 trips),
# the inner one %rcx from 0 by 4 to 64 (16 trips); inner body: 2 zmm FMAs, a load operand each
# and a broadcast; outer's own body: a store and the counter updates.
ASM = """\
\t.type\tmain_compute_,@function
main_compute_:
\tmovq\t$-8, %rdx
.LBB0_1:
\txorl\t%ecx, %ecx
.LBB0_2:
\tvbroadcastss\t(%rdi,%rcx,4), %zmm4
\tvfmadd231ps\t(%rsi,%rcx,4), %zmm4, %zmm0
\tvfmadd231ps\t64(%rsi,%rcx,4), %zmm4, %zmm1
\taddq\t$4, %rcx
\tcmpq\t$64, %rcx
\tjne\t.LBB0_2
\tvmovups\t%zmm0, (%r8)
\taddq\t$1, %rdx
\tjne\t.LBB0_1
\tretq
"""


def _named(vector: np.ndarray, name: str) -> float:
    return float(vector[NEST_FEATURE_NAMES.index(name)])


def test_levels_and_trip_counts_of_a_hand_written_nest() -> None:
    outer, inner = sorted(nest_stats(ASM), key=lambda info: info.depth)
    assert (outer.depth, inner.depth, inner.parent) == (1, 2, 0)
    assert (outer.trip, inner.trip) == (8, 16)  # -8 -> 0 by 1; 0 -> 64 by 4
    assert (inner.instructions, inner.flops, inner.loads) == (6, 2 * 16 * 2, 3)  # 2 zmm FMAs = 64 float ops
    assert (outer.instructions, outer.stores) == (4, 1)  # xorl, vmovups, addq, jne: its own body only
    vector = nest_features(ASM)
    assert vector.shape == (NEST_FEATURES,)
    assert _named(vector, "log2_1p_nest0_trip") == pytest.approx(math.log2(17))
    assert _named(vector, "log2_1p_nest1_trip") == pytest.approx(math.log2(9))
    assert _named(vector, "log2_1p_nest2_loops") == 0.0  # a two-deep nest leaves the outer levels empty
    # executed: inner 6 x 16 x 8, outer 4 x 8, outside the loops movq and retq
    assert _named(vector, "log2_1p_dynamic_instructions") == pytest.approx(math.log2(1 + 6 * 16 * 8 + 4 * 8 + 2))
    assert _named(vector, "log2_1p_dynamic_flops") == pytest.approx(math.log2(1 + 64 * 16 * 8))
    assert _named(vector, "log2_1p_inner_chain_trip") == pytest.approx(math.log2(1 + 128))
    assert _named(vector, "trip_known_share") == 1.0


def test_a_loop_bounded_by_a_register_has_an_unknown_trip() -> None:
    text = ASM.replace("cmpq\t$64, %rcx", "cmpq\t%r9, %rcx")
    assert sorted((i.depth, i.trip) for i in nest_stats(text)) == [(1, 8), (2, 0)]
    assert _named(nest_features(text), "trip_known_share") == 0.5


def test_kernel_zscores_on_hand_computed_values() -> None:
    block = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 4.0], [5.0, 5.0, np.nan]])
    z = kernel_zscores(block)
    # column 0 over the two finite rows (1, 3): mean 2, std 1; column 1 constant: 0; the NaN row stays NaN
    np.testing.assert_allclose(z[:2], [[-1.0, 0.0, -1.0], [1.0, 0.0, 1.0]])
    assert np.isnan(z[2]).all()
    np.testing.assert_allclose(kernel_zscores(np.array([[2.0], [4.0], [9.0]]))[:, 0], (np.array([2, 4, 9]) - 5.0) / np.std([2, 4, 9]), rtol=1e-6)


def test_the_feature_sets_and_the_sixteenth_session_columns() -> None:
    assert CODE_FEATURES == 35 and ALL_CODE_FEATURE_NAMES[:35] == CODE_FEATURE_NAMES
    assert code_feature_set_width("s16") == 35 and code_feature_set_width("nest") == 35 + NEST_FEATURES
    assert code_feature_set_width("nest+z") == 2 * (35 + NEST_FEATURES) and code_feature_set_names("s16+z")[35] == "z_" + CODE_FEATURE_NAMES[0]
    with pytest.raises(ValueError, match="unknown code feature set"):
        code_feature_set_width("all")
    # the first 35 columns of the full vector are the s16 vector, computed as before
    np.testing.assert_array_equal(code_features(ASM, nest=True)[:35], code_features(ASM))
    np.testing.assert_array_equal(code_features(ASM, nest=True)[35 : 35 + NEST_FEATURES], nest_features(ASM))


tvm = pytest.importorskip("tvm")

from cost_model.learned.tile_code_features import config_asm  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec, build_kernel  # noqa: E402
from cost_model.measure.tile.space import TileConfig, TileSpace  # noqa: E402


def _trips_by_depth(space: TileSpace, config: TileConfig) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for info in nest_stats(config_asm(space, config)):
        out.setdefault(info.depth, set()).add(info.trip)
    return out


def test_two_and_three_level_tiled_matmuls_compiled_here_differ_in_depth_and_trips() -> None:
    space = TileSpace(build_kernel(KernelSpec("matmul", (256, 256, 64))))
    # order 0 = "S0 S1 R0 S2 R1", nothing vectorized or unrolled by the schedule
    two = _trips_by_depth(space, TileConfig(((32, 8, 1), (32, 8, 1), (64, 1)), order=0, vectorize=False))
    three = _trips_by_depth(space, TileConfig(((4, 8, 8), (4, 8, 8), (64, 1)), order=0, vectorize=False))
    # two levels: i0 32, j0 32, i1 8 (LLVM unrolls j1's 8 into 8 copies of the k loop, so 4 deep, not 5)
    assert max(two) == 4 and (two[1], two[3]) == ({32}, {8})
    # j0's trip is read off the code where it was written (znver4); the twenty-third session's Intel host
    # (LLVM's `rocketlake`) compiles that loop so that its bound is not read (trip 1 there): a limit of the reader
    from cost_model.measure.tile.runner import host_target_text
    from tests.tile_ranker_history import PINNED_HOST

    if host_target_text() == PINNED_HOST:
        assert two[2] == {32}
    # three levels: i0 4, j0 4, i1 8, j1 8 and the k loop of 64 around the 8 x 8 inner tile LLVM flattened
    assert max(three) == 5 and [three[d] for d in range(1, 5)] == [{4}, {4}, {8}, {8}]
    # the k loop's 64 is read on znver4; LLVM's `znver3` (the fifty-second session's CI host) compiles it so that
    # its bound is not read (trip 0, the reader's "unknown"): the same limit as j0's above
    assert three[5] == {64} if host_target_text() == PINNED_HOST else three[5] in ({64}, {0})
    # an untiled one: i 64, j 64, and k's 64 as one peeled iteration + the trips of an unrolled body
    # (3 x 21 on znver4, 7 x 9 on rocketlake)
    plain = nest_stats(config_asm(space.__class__(build_kernel(KernelSpec("matmul", (64, 64, 64)))),
                                  TileConfig(((64, 1, 1), (64, 1, 1), (64, 1)), order=0, vectorize=False)))
    inner = max(plain, key=lambda info: info.depth)
    assert sorted(info.trip for info in plain if info is not inner) == [64, 64]
    assert inner.trip * inner.flops / 2 + 1 == 64  # scalar FMAs: 2 float ops each


# the tile_gbdt_ens.json the sixteenth session shipped (35 "s16" code columns), in the repository's history
S16_ENSEMBLE_COMMIT = "a9ae283"


def test_the_sixteenth_session_ensemble_loads_and_ranks_exactly_as_before_the_nest_features(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.measure.tile.space import CONFIG_FEATURES

    ranker = ensemble_from_history(S16_ENSEMBLE_COMMIT, tmp_path, "the sixteenth session's tile_gbdt_ens.json")
    assert ranker.extra["code_features"] and "code_feature_set" not in ranker.extra  # a sixteenth-session file: the 35 "s16" columns
    assert all(m.extra["config_features"] == CONFIG_FEATURES + CODE_FEATURES for m in ranker.members)
    # the scores main's code (before this session) gave these candidates with the same file, on this host
    assert_pinned_scores(ranker, [-1.504522954669711, 3.3642612134869756, -0.45497772259343616, -1.4047605362238285])


def test_an_ensemble_on_the_nest_z_set_ranks_candidates_like_the_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.tile_code_features import fill_code_feature_cache, load_code_features, with_code_features
    from cost_model.learned.tpugraphs import KernelRecord
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.dataset import kernel_graph

    records, spaces = [], []
    for k, dims in enumerate([(64, 64, 64), (32, 128, 64), (128, 32, 32)]):
        space = TileSpace(build_kernel(KernelSpec("matmul", dims)))
        configs = kernel_configs(space, k, 5)
        feats, opcodes, edges = kernel_graph(space.kernel)
        runtime = np.random.default_rng(k).uniform(1e-5, 2e-5, len(configs))
        records.append(KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()),
                                    config_feat=np.stack([space.features(c) for c in configs]), config_text=[c.text() for c in configs],
                                    meta={"kind": "matmul", "dims": list(dims), "program": "p"}, path=str(tmp_path / f"p{k}:matmul:{k}.npz")))
        spaces.append((space, configs))
    fill_code_feature_cache(records, tmp_path / "cache", progress=False)
    s16, nest_z = load_code_features(records, tmp_path / "cache", "s16"), load_code_features(records, tmp_path / "cache", "nest+z")
    assert s16[0].shape == (5, 35) and nest_z[0].shape == (5, code_feature_set_width("nest+z"))
    np.testing.assert_array_equal(nest_z[0][:, :35], s16[0])
    np.testing.assert_allclose(nest_z[0][:, -(35 + NEST_FEATURES):], kernel_zscores(nest_z[0][:, : 35 + NEST_FEATURES]))
    joined = with_code_features(records, tmp_path / "cache", feature_set="nest+z")
    ranker = GbdtEnsembleTilePredictor.train(joined, rounds=5, code_features=True, code_feature_set="nest+z")
    loaded = GbdtEnsembleTilePredictor.load(ranker.save(tmp_path / "ens.json"))
    assert loaded.extra["code_feature_set"] == "nest+z" and loaded.members[0].extra["code_feature_set"] == "nest+z"
    space, configs = spaces[1]
    np.testing.assert_allclose(loaded.rank(space, configs), ranker.rank_rows(joined[1].node_feat, joined[1].node_opcode, joined[1].config_feat), rtol=1e-5)
