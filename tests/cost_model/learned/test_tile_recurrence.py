"""Dependence chains of innermost loops (`tile_recurrence`) on hand-written assembly whose chains are
counted by hand, and on a real TVM kernel compiled for this host."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cost_model.learned.tile_recurrence import RECURRENCE_FEATURE_NAMES, RECURRENCE_FEATURES, recurrence_features


def _loop(body: str) -> str:
    """One compute function, one loop over `body` stepping %rcx (64 trips)."""
    return ("\t.type\tmain_compute_,@function\nmain_compute_:\n\txorl\t%ecx, %ecx\n.LBB0_1:\n" + body
            + "\taddq\t$4, %rcx\n\tcmpq\t$256, %rcx\n\tjne\t.LBB0_1\n\tretq\n")


def _named(asm: str) -> dict[str, float]:
    """Counts back from log2(1 + n); flags and shares as they are."""
    vector = recurrence_features(asm)
    assert vector.shape == (RECURRENCE_FEATURES,) and vector.dtype == np.float32
    return {n: (2.0 ** float(x) - 1.0 if n.startswith("log2_1p") else float(x)) for n, x in zip(RECURRENCE_FEATURE_NAMES, vector)}


def test_a_nest_of_two_fma_accumulators() -> None:
    # inner loop: a broadcast load (5 + 3) feeds two FMAs into zmm0 / zmm1 (4 each): critical path 12,
    # two carried chains of 4 cycles; 6 instructions, 3 loads: resource bound 1.5 cycles; 64 flops
    asm = """\
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
    f = _named(asm)
    assert f["log2_1p_hot_recurrence"] == pytest.approx(4) and f["log2_1p_hot_carried_chains"] == pytest.approx(2)
    assert f["log2_1p_hot_critical_path"] == pytest.approx(12) and f["log2_1p_hot_resource_bound"] == pytest.approx(1.5)
    assert f["hot_recurrence_bound"] == 1.0 and f["hot_recurrence_through_memory"] == 0.0
    assert f["log2_1p_hot_flops_per_cycle"] == pytest.approx(64 / 4)
    assert f["log2_1p_est_cycles"] == pytest.approx(16 * 8 * 4) and f["est_recurrence_share"] == 1.0  # 16 inner x 8 outer trips


def test_one_accumulator_serialises_and_four_do_not_add_latency() -> None:
    one = _named(_loop("".join(f"\tvaddps\t{64 * k}(%rsi,%rcx,4), %zmm0, %zmm0\n" for k in range(4))))
    four = _named(_loop("".join(f"\tvaddps\t{64 * k}(%rsi,%rcx,4), %zmm{k}, %zmm{k}\n" for k in range(4))))
    assert one["log2_1p_hot_recurrence"] == pytest.approx(16) and one["log2_1p_hot_carried_chains"] == pytest.approx(1)
    assert four["log2_1p_hot_recurrence"] == pytest.approx(4) and four["log2_1p_hot_carried_chains"] == pytest.approx(4)
    assert one["log2_1p_hot_critical_path"] == pytest.approx(5 + 16) and four["log2_1p_hot_critical_path"] == pytest.approx(9)
    assert one["log2_1p_hot_flops_per_cycle"] == pytest.approx(64 / 16) and four["log2_1p_hot_flops_per_cycle"] == pytest.approx(64 / 4)


def test_an_accumulator_kept_in_memory_carries_through_the_store() -> None:
    # the sum lives at (%rdi), which the loop does not step: load (5) + add (4) + store (1) per trip
    f = _named(_loop("\tvaddss\t(%rdi), %xmm0, %xmm0\n\tvmovss\t%xmm0, (%rdi)\n\tvaddss\t(%rsi,%rcx,4), %xmm1, %xmm1\n"))
    assert f["log2_1p_hot_recurrence"] == pytest.approx(10) and f["hot_recurrence_through_memory"] == 1.0
    # the same store through a stepped pointer carries nothing
    g = _named(_loop("\tvaddss\t(%rdi,%rcx,4), %xmm0, %xmm0\n\tvmovss\t%xmm0, (%rdi,%rcx,4)\n"))
    assert g["log2_1p_hot_recurrence"] == pytest.approx(4) and g["hot_recurrence_through_memory"] == 0.0


def test_a_zeroing_idiom_starts_a_fresh_value_each_trip() -> None:
    f = _named(_loop("\tvxorps\t%xmm0, %xmm0, %xmm0\n\tvaddps\t(%rsi,%rcx,4), %ymm0, %ymm0\n\tvaddps\t32(%rsi,%rcx,4), %ymm0, %ymm0\n"
                     "\tvmovups\t%ymm0, (%rdx,%rcx,4)\n"))
    assert f["log2_1p_hot_recurrence"] == 0 and f["log2_1p_hot_carried_chains"] == 0 and f["hot_recurrence_bound"] == 0.0
    assert f["log2_1p_hot_critical_path"] == pytest.approx(5 + 4 + 4)  # a store through a stepped pointer makes no value a later load reads


def test_no_loop_gives_zeros() -> None:
    asm = "\t.type\tmain_compute_,@function\nmain_compute_:\n\tvaddps\t%zmm1, %zmm0, %zmm0\n\tretq\n"
    assert not recurrence_features(asm).any()


def test_a_real_kernel_compiled_for_this_host() -> None:
    pytest.importorskip("tvm")
    from cost_model.learned.tile_code_features import config_asm
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileConfig, TileSpace

    space = TileSpace(build_kernel(KernelSpec("reduce", (64, 256))))
    inner = TileConfig.from_text('{"tiles":[[1,8,8],[16,16]],"order":0,"vectorize":1,"unroll":0,"parallel":0}')
    f = _named(config_asm(space, inner))
    assert all(math.isfinite(v) for v in f.values())
    assert f["log2_1p_est_cycles"] > 0 and f["log2_1p_hot_resource_bound"] > 0
