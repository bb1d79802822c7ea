"""The sixteenth session's loop columns read from natural loops (eighteenth session, feature sets
"s18" / "nest18"): hand-written assembly where the text ranges over-count, a real kernel compiled
here against `natural_loops`, the cache versions each set is served from, and the old sets unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_model.learned.tile_code_features import (
    ALL_CODE_FEATURE_NAMES, CODE_FEATURE_NAMES, CODE_FEATURE_SETS, CODE_FEATURE_VERSION, NATURAL_LOOP_FEATURE_NAMES, _read_cache, code_feature_set_names,
    code_feature_set_width, code_features, compute_functions, load_code_features, natural_loop_counts,
)
from cost_model.learned.tile_nest_features import NEST_FEATURES, nest_features, natural_loops
from tests.tile_ranker_history import assert_pinned_scores, ensemble_from_history

# A cold block laid out at the end branches back to the join point above it: a backward branch, but
# no loop (the join does not dominate the cold block). The text ranges read it as a loop around
# the real one (2 loops, 2 deep); the control-flow graph has 1 loop, 1 deep.
COLD_BLOCK = """\
\t.type\tmain_compute_,@function
main_compute_:
\ttestq\t%rdi, %rdi
\tje\t.LBB0_3
.LBB0_1:
\txorl\t%ecx, %ecx
.LBB0_2:
\tvaddps\t(%rsi,%rcx,4), %zmm0, %zmm0
\taddq\t$16, %rcx
\tcmpq\t$256, %rcx
\tjne\t.LBB0_2
\tvmovups\t%zmm0, (%rdx)
\tretq
.LBB0_3:
\tmovq\t%r8, %rsi
\tjmp\t.LBB0_1
"""

# Loop A's latch block is laid out below loop B, which runs after A: the text range of A holds B
# (2 loops, 2 deep, B the only innermost loop); in the graph A and B are side by side (2 loops, 1
# deep, both innermost: A's 6 instructions with 1 zmm add, B's 4 with a store and no float op).
INTERLEAVED = """\
\t.type\tmain_compute_,@function
main_compute_:
\txorl\t%ecx, %ecx
.LBB0_1:
\tvaddps\t(%rdi,%rcx,4), %zmm0, %zmm0
\taddq\t$16, %rcx
\tcmpq\t$256, %rcx
\tjb\t.LBB0_4
\txorl\t%edx, %edx
.LBB0_2:
\tvmovups\t%zmm0, (%rsi,%rdx,4)
\taddq\t$16, %rdx
\tcmpq\t$256, %rdx
\tjb\t.LBB0_2
\tretq
.LBB0_4:
\tprefetcht0\t64(%rdi,%rcx,4)
\tjmp\t.LBB0_1
"""


def _column(vector: np.ndarray, names: tuple[str, ...], name: str) -> float:
    return float(vector[names.index(name)])


def _raw(vector: np.ndarray, names: tuple[str, ...], name: str) -> float:
    """A log2(1 + n) count column back as n (float32: to 4 decimals)."""
    return round(2.0 ** _column(vector, names, name) - 1.0, 4)


def test_a_backward_branch_that_closes_no_loop_is_not_counted() -> None:
    old, new = code_features(COLD_BLOCK, "s16"), code_features(COLD_BLOCK, "s18")
    names, new_names = code_feature_set_names("s16"), code_feature_set_names("s18")
    # the text-range columns, as before: the cold block's jmp opens a loop around the real one
    assert (_raw(old, names, "log2_1p_loops"), _raw(old, names, "log2_1p_loop_depth")) == (2.0, 2.0)
    assert (_raw(new, new_names, "log2_1p_natural_loops"), _raw(new, new_names, "log2_1p_natural_loop_depth")) == (1.0, 1.0)
    # the innermost loop is the same one either way: 4 instructions, one zmm add (16 float ops), one load
    counts = natural_loop_counts(COLD_BLOCK)
    assert (counts["inner_loops"], counts["inner_instructions"], counts["inner_flops"], counts["inner_loads"], counts["inner_lanes"]) == (1, 4, 16, 1, 16)
    assert _column(new, new_names, "natural_inner_flops_per_instruction") == pytest.approx(4.0)
    assert _column(new, new_names, "natural_inner_flops_per_instruction") == _column(old, names, "inner_flops_per_instruction")


def test_interleaved_block_layout_is_read_as_two_loops_side_by_side() -> None:
    old, new = code_features(INTERLEAVED, "s16"), code_features(INTERLEAVED, "s18")
    names, new_names = code_feature_set_names("s16"), code_feature_set_names("s18")
    assert [_raw(old, names, f"log2_1p_{c}") for c in ("loops", "loop_depth", "inner_loops", "inner_instructions", "inner_flops")] == [2, 2, 1, 4, 0]
    counts = natural_loop_counts(INTERLEAVED)
    assert (counts["loops"], counts["loop_depth"], counts["inner_loops"]) == (2, 1, 2)
    assert (counts["inner_instructions"], counts["inner_flops"], counts["inner_loads"], counts["inner_stores"]) == (6 + 4, 16, 1, 1)  # a prefetch is no load
    assert [_raw(new, new_names, f"log2_1p_natural_{c}") for c in ("loops", "loop_depth", "inner_loops", "inner_instructions")] == [2, 1, 2, 10]
    # every other column is the s16 one
    same = [i for i, name in enumerate(names) if name == new_names[i]]
    assert len(same) == len(names) - len(NATURAL_LOOP_FEATURE_NAMES)
    np.testing.assert_array_equal(new[same], old[same])


def test_the_feature_sets_and_their_columns() -> None:
    assert CODE_FEATURE_VERSION == 5 and len(ALL_CODE_FEATURE_NAMES) == 35 + NEST_FEATURES + 11
    assert {"s16", "nest", "s18", "nest18", "nest18+z"} <= set(CODE_FEATURE_SETS)
    assert code_feature_set_width("s18") == 35 and code_feature_set_width("nest18") == 35 + NEST_FEATURES
    assert code_feature_set_width("nest18+z") == 2 * (35 + NEST_FEATURES)
    assert code_feature_set_names("s16") == CODE_FEATURE_NAMES and code_feature_set_names("nest") == ALL_CODE_FEATURE_NAMES[: 35 + NEST_FEATURES]
    assert code_feature_set_names("nest18") == code_feature_set_names("s18") + code_feature_set_names("nest")[35:]
    assert code_feature_set_names("s18")[CODE_FEATURE_NAMES.index("log2_1p_loop_depth")] == "log2_1p_natural_loop_depth"
    for asm in (COLD_BLOCK, INTERLEAVED):
        every = code_features(asm, nest=True)
        np.testing.assert_array_equal(code_features(asm, "nest"), every[: 35 + NEST_FEATURES])
        np.testing.assert_array_equal(code_features(asm, "nest")[35:], nest_features(asm))
        np.testing.assert_array_equal(code_features(asm, "nest18"), np.concatenate([code_features(asm, "s18"), nest_features(asm)]))
        np.testing.assert_array_equal(code_features(asm), code_features(asm, "s16"))


def _fake_record(tmp_path, configs: int):  # type: ignore[no-untyped-def]
    from cost_model.learned.tpugraphs import KernelRecord

    runtime = np.linspace(1e-5, 2e-5, configs)
    return KernelRecord(np.zeros((1, 4), np.float32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64), runtime, runtime.copy(),
                        config_feat=np.zeros((configs, 3), np.float32), config_text=[f"c{k}" for k in range(configs)],
                        meta={"kind": "matmul", "dims": [8, 8, 8], "program": "p"}, path=str(tmp_path / "p:matmul:0.npz"))


@pytest.mark.parametrize(("version", "width", "served"), [(2, 35, {"s16"}), (3, 65, {"s16"}), (4, 65, {"s16", "nest"}),
                                                          (5, 76, {"s16", "nest", "s18", "nest18"})])
def test_each_cache_version_serves_the_sets_whose_columns_it_holds(tmp_path, version: int, width: int, served: set[str]) -> None:  # type: ignore[no-untyped-def]
    record = _fake_record(tmp_path, 3)
    feats = np.arange(3 * width, dtype=np.float32).reshape(3, width)
    (tmp_path / "cache").mkdir()
    np.savez(tmp_path / "cache" / "p:matmul:0.npz", features=feats, config_text=np.array(record.config_text), version=np.array(version))
    for feature_set in ("s16", "nest", "s18", "nest18", "s18+z"):
        block = load_code_features([record], tmp_path / "cache", feature_set)[0]
        if feature_set.removesuffix("+z") not in served:
            assert block is None, (version, feature_set)
            continue
        assert block.shape == (3, code_feature_set_width(feature_set))
        columns = [ALL_CODE_FEATURE_NAMES.index(name) for name in code_feature_set_names(feature_set.removesuffix("+z"))]
        np.testing.assert_array_equal(block[:, : len(columns)], feats[:, columns])
    # only the current version counts as filled
    assert (_read_cache(tmp_path / "cache" / "p:matmul:0.npz", record) is None) == (version != CODE_FEATURE_VERSION)


tvm = pytest.importorskip("tvm")

from cost_model.learned.tile_code_features import config_asm  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec, build_kernel  # noqa: E402
from cost_model.measure.tile.space import TileConfig, TileSpace  # noqa: E402


@pytest.mark.parametrize("config", [TileConfig(((32, 8, 1), (32, 8, 1), (64, 1)), order=0, vectorize=False),
                                    TileConfig(((4, 8, 8), (4, 8, 8), (64, 1)), order=0, vectorize=False),
                                    TileConfig(((4, 4, 16), (4, 1, 64), (16, 4)), order=2, vectorize=True, unroll=16)])
def test_on_a_kernel_compiled_here_the_columns_equal_natural_loops(config: TileConfig) -> None:
    space = TileSpace(build_kernel(KernelSpec("matmul", (256, 256, 64))))
    asm = config_asm(space, config)
    count, depth = 0, 0
    for instrs, labels, _ in compute_functions(asm):
        loops = natural_loops(instrs, labels)
        count += len(loops)
        # a loop's depth: the loops whose bodies hold its body (itself included)
        depth = max([depth, *(sum(body <= other for _, _, other in loops) for _, _, body in loops)])
    assert count > 0
    vector, names = code_features(asm, "s18"), code_feature_set_names("s18")
    assert _raw(vector, names, "log2_1p_natural_loops") == pytest.approx(count)
    assert _raw(vector, names, "log2_1p_natural_loop_depth") == pytest.approx(depth)
    assert math.isclose(natural_loop_counts(asm)["loop_depth"], depth)


NEST_ENSEMBLE_COMMIT = "7d4ed22"  # the tile_gbdt_ens.json of the seventeenth session (feature set "nest", 280 synthetic kernels)


def test_the_seventeenth_session_nest_ensemble_ranks_exactly_as_before(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # that file from history (the packaged one was refitted with more kernels in the eighteenth session)
    ranker = ensemble_from_history(NEST_ENSEMBLE_COMMIT, tmp_path, "the seventeenth session's tile_gbdt_ens.json")
    assert ranker.extra["code_feature_set"] == "nest"
    # the scores main's code (before this session, commit 197fd98) gave these candidates with the same file, on this host
    assert_pinned_scores(ranker, [-1.7874642362285256, 3.3706592568245615, -0.5262684030776725, -1.0569266175183631])
