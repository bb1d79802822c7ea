"""Compiled-code features of tile configurations: the assembly parse, a real kernel compiled here, the cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost_model.learned.tile_code_features import CODE_FEATURE_NAMES, CODE_FEATURES, asm_stats, code_features

# A hand-written module in LLVM's x86-64 AT&T form: a wrapper (left out), a compute function with
# a two-deep loop nest whose inner body holds 2 zmm FMAs, a ymm add, a broadcast, a spill and a
# reload, and two backward branches to its header (a `continue` edge and the latch: one loop);
# a scalar multiply and a parallel launch outside the loops.
ASM = """\
\t.text
\t.globl\t__tvm_ffi_main
\t.type\t__tvm_ffi_main,@function
__tvm_ffi_main:
\tvfmadd231ps\t%zmm1, %zmm2, %zmm3
\tmovq\t8(%rsi), %rax
\tretq
\t.type\tmain_compute_,@function
main_compute_:
\tsubq\t$40, %rsp
\tmovq\t__TVMBackendParallelLaunch@GOTPCREL(%rip), %rax
\tcallq\t*(%rax)
\tvmulss\t(%rdi), %xmm0, %xmm0
.LBB1_1:
\txorl\t%ecx, %ecx
.LBB1_2:
\tvbroadcastss\t(%rdi,%rcx,4), %zmm4
\tvfmadd231ps\t(%rsi,%rcx,4), %zmm4, %zmm0
\tvfmadd231ps\t64(%rsi,%rcx,4), %zmm4, %zmm1
\tvaddps\t%ymm2, %ymm3, %ymm3
\tje\t.LBB1_2
\tvmovups\t%zmm1, 8(%rsp)
\tvmovups\t16(%rsp), %zmm5
\taddq\t$1, %rcx
\tcmpq\t$16, %rcx
\tjne\t.LBB1_2
\taddq\t$1, %rdx
\tjne\t.LBB1_1
\tvmovups\t%zmm0, (%rdx)
\tretq
.Lfunc_end1:
\t.size\tmain_compute_, .Lfunc_end1-main_compute_
"""


def test_the_parse_counts_a_known_module_exactly() -> None:
    stats = asm_stats(ASM)
    c = stats.counts
    assert c["instructions"] == 19  # the wrapper's 3 are not counted
    assert (c["fma_zmm"], c["fma_ymm"], c["add_ymm"], c["mul_scalar"], c["fma_scalar"]) == (2, 0, 1, 1, 0)
    assert (c["broadcasts"], c["calls"], c["spills"], c["reloads"]) == (1, 1, 1, 1)
    # loads: GOT entry, the call's pointer, vmulss, broadcast, 2 FMA operands, the reload, and the
    # read-modify-write operand of none (addq to registers); stores: the spill and the final vmovups
    assert (c["loads"], c["stores"]) == (7, 2)
    assert (c["loops"], c["loop_depth"], c["inner_loops"]) == (2, 2, 1)  # not 3 loops 3 deep: both branches close one loop
    assert c["inner_instructions"] == 10  # .LBB1_2 .. its last backward branch
    assert c["inner_flops"] == 2 * 16 * 2 + 8  # two zmm FMAs + a ymm add
    assert (c["inner_loads"], c["inner_stores"], c["inner_spill_traffic"]) == (4, 1, 2)
    assert stats.parallel_launch and stats.stack_bytes == 40 and stats.inner_lanes == 16
    vector = code_features(ASM)
    assert vector.shape == (CODE_FEATURES,) == (len(CODE_FEATURE_NAMES),)
    assert vector[CODE_FEATURE_NAMES.index("log2_1p_fma_zmm")] == pytest.approx(np.log2(3))
    assert vector[CODE_FEATURE_NAMES.index("inner_vector_lanes_log2")] == 4.0


def test_a_module_without_a_compute_function_is_an_error() -> None:
    with pytest.raises(ValueError, match="no compute function"):
        asm_stats(ASM.split("\t.type\tmain_compute_")[0])


tvm = pytest.importorskip("tvm")

from cost_model.learned.tile_code_features import (  # noqa: E402
    cache_path, cached_asm, config_code_features, fill_code_feature_cache, load_code_features, with_code_features,
)
from cost_model.learned.tpugraphs import DatasetError, KernelRecord  # noqa: E402
from cost_model.measure.tile.dataset import kernel_graph  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec, build_kernel  # noqa: E402
from cost_model.measure.tile.space import TileConfig, TileSpace  # noqa: E402

SPEC = KernelSpec("matmul", (64, 64, 64))
# loops (i, j, k); "S0 R0 S1 R1 S2": j's innermost tile of 16 is the vectorized loop
VECTORIZED = TileConfig(((64, 1, 1), (4, 1, 16), (1, 64)), order=1, vectorize=True)
# "S0 S1 S2 R0 R1" with inner spatial tiles of 1: the reduction over k is innermost and float sums
# are not reassociated, so nothing is vectorized. (Not the knob alone: with an inner j tile of 16
# outside a short k loop LLVM unrolls k and vectorizes j itself, vectorize=False or not.)
SCALAR = TileConfig(((64, 1, 1), (64, 1, 1), (1, 64)), order=3, vectorize=False)


def _value(features: np.ndarray, name: str) -> float:
    return float(features[CODE_FEATURE_NAMES.index(name)])


def test_a_vectorized_matmul_config_compiles_to_packed_fmas_and_a_scalar_one_does_not() -> None:
    space = TileSpace(build_kernel(SPEC))
    vec, scalar = config_code_features(space, VECTORIZED), config_code_features(space, SCALAR)
    packed = [f"log2_1p_{op}_{w}" for op in ("fma", "mul", "add") for w in ("zmm", "ymm", "xmm")]
    assert sum(_value(vec, n) for n in packed) > 0 and _value(vec, "inner_vector_lanes_log2") >= 2  # >= 4 float lanes
    assert sum(_value(scalar, n) for n in packed) == 0 and _value(scalar, "inner_vector_lanes_log2") == 0
    assert _value(scalar, "log2_1p_fma_scalar") + _value(scalar, "log2_1p_mul_scalar") > 0
    # the same float work in wider operations: more float ops per instruction in the hot loop
    assert _value(vec, "inner_flops_per_instruction") > _value(scalar, "inner_flops_per_instruction")


def _record(space: TileSpace, configs: list[TileConfig], path: str) -> KernelRecord:
    feats, opcodes, edges = kernel_graph(space.kernel)
    runtime = np.linspace(1e-5, 2e-5, len(configs))
    return KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()),
                        config_feat=np.stack([space.features(c) for c in configs]), config_text=[c.text() for c in configs],
                        meta={"kind": space.kernel.spec.kind, "dims": list(space.kernel.spec.dims), "program": "p"}, path=path)


def test_the_cache_round_trips_and_a_stale_file_is_recompiled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    space = TileSpace(build_kernel(SPEC))
    record = _record(space, [VECTORIZED, SCALAR], str(tmp_path / "p:matmul:abc.npz"))
    first = fill_code_feature_cache([record], tmp_path / "cache", progress=False)
    assert first["kernels_compiled"] == 1 and first["configs_compiled"] == 2 and cache_path(tmp_path / "cache", record).is_file()
    (loaded,) = load_code_features([record], tmp_path / "cache")
    assert loaded is not None and loaded.shape == (2, CODE_FEATURES)
    np.testing.assert_array_equal(loaded[0], config_code_features(space, VECTORIZED))
    again = fill_code_feature_cache([record], tmp_path / "cache", progress=False)
    assert again["kernels_compiled"] == 0 and again["kernels_cached_before"] == 1  # nothing recompiled
    (joined,) = with_code_features([record], tmp_path / "cache")
    assert joined.config_feat.shape == (2, record.config_feat.shape[1] + CODE_FEATURES)
    np.testing.assert_array_equal(joined.config_feat[:, -CODE_FEATURES:], loaded)
    # the same file name with other configurations: the cached rows are stale, not used
    other = _record(space, [SCALAR, VECTORIZED], record.path)
    assert load_code_features([other], tmp_path / "cache") == [None]
    with pytest.raises(DatasetError, match="no cached code features"):
        with_code_features([other], tmp_path / "cache")
    assert with_code_features([other], tmp_path / "cache", require=False) == []
    # a file of another feature version keeps its assembly: re-parsed, not compiled
    path = cache_path(tmp_path / "cache", record)
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    assert cached_asm(path, record) is not None and "main_compute_" in cached_asm(path, record)[0]
    np.savez(path, **(arrays | {"version": np.array(0), "features": np.zeros_like(arrays["features"])}))
    assert load_code_features([record], tmp_path / "cache") == [None]
    third = fill_code_feature_cache([record], tmp_path / "cache", progress=False)
    assert (third["kernels_compiled"], third["kernels_reparsed"]) == (0, 1)
    np.testing.assert_array_equal(load_code_features([record], tmp_path / "cache")[0], loaded)


def test_a_compile_over_the_timeout_gets_missing_features(tmp_path) -> None:  # type: ignore[no-untyped-def]
    space = TileSpace(build_kernel(SPEC))
    record = _record(space, [VECTORIZED, SCALAR], str(tmp_path / "p:matmul:abc.npz"))
    # a millisecond: the child process has not even imported TVM, so both compiles are abandoned
    summary = fill_code_feature_cache([record], tmp_path / "cache", progress=False, timeout=1e-3)
    assert summary["timed_out"] == 2 and summary["kernels_compiled"] == 1
    (loaded,) = load_code_features([record], tmp_path / "cache")
    assert loaded is not None and np.isnan(loaded).all()  # XGBoost's missing value, not a zero count


def test_the_ensemble_ranker_with_code_features_compiles_candidates_like_the_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.measure.tile.collect import kernel_configs

    records, spaces = [], []
    for k, dims in enumerate([(64, 64, 64), (32, 128, 64), (128, 32, 32)]):
        space = TileSpace(build_kernel(KernelSpec("matmul", dims)))
        configs = kernel_configs(space, k, 6)
        record = _record(space, configs, str(tmp_path / f"p{k}:matmul:{k}.npz"))
        record.config_runtime = np.random.default_rng(k).uniform(1e-5, 2e-5, len(configs))
        records.append(record)
        spaces.append((space, configs))
    fill_code_feature_cache(records, tmp_path / "cache", progress=False)
    joined = with_code_features(records, tmp_path / "cache")
    ranker = GbdtEnsembleTilePredictor.train(joined, rounds=5, code_features=True)
    assert all(m.extra["code_features"] and m.extra["config_features"] == records[0].config_feat.shape[1] + CODE_FEATURES for m in ranker.members)
    space, configs = spaces[1]
    # rank() compiles the candidates here: the same scores as the rows built from the cache
    np.testing.assert_allclose(ranker.rank(space, configs), ranker.rank_rows(joined[1].node_feat, joined[1].node_opcode, joined[1].config_feat), rtol=1e-6)
    loaded = GbdtEnsembleTilePredictor.load(ranker.save(tmp_path / "ens.json"))
    assert loaded.extra["code_features"] and loaded.members[0].extra["code_features"]
    np.testing.assert_allclose(loaded.rank(space, configs), ranker.rank(space, configs), rtol=1e-6)
    assert np.isfinite(loaded.finetune(space, configs, records[1].config_runtime, steps=2))
    # `costmodel evaluate` reads the kernels with the cache's block, as the ranker was trained
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from cost_model.learned.tpugraphs import DatasetError, save_npz
    from cost_model.learned.train import evaluate_saved

    for record in records:
        save_npz(record, tmp_path / "data" / Path(record.path).name)
    report = evaluate_saved(str(tmp_path / "ens.json"), str(tmp_path / "data"), split="all", code_features=str(tmp_path / "cache"))
    want = mean_metrics(kernel_metrics(ranker.rank_rows(j.node_feat, j.node_opcode, j.config_feat), j.config_runtime) for j in joined)
    assert report["model_kind"] == "gbdt-ens" and report["kernels_without_code_features"] == 0
    assert report["metrics"] == {k: v for k, v in want.items() if k != "mape"}
    with pytest.raises(DatasetError, match="ens.json.*pass --code-features"):
        evaluate_saved(str(tmp_path / "ens.json"), str(tmp_path / "data"), split="all")
    with pytest.raises(ValueError, match="config features"):  # the plain rows are refused: 35 columns short
        from cost_model.learned.gbdt_predictor import GbdtTilePredictor

        GbdtTilePredictor(ranker.members[0].gbdt, {"code_features": True, "config_features": records[0].config_feat.shape[1]})


def test_a_kernel_another_fill_wrote_meanwhile_is_not_compiled_again(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # two fills on one cache in other orders split the work: B's file appears while A compiles
    import shutil

    from cost_model.learned import tile_code_features as tcf

    space = TileSpace(build_kernel(SPEC))
    a = _record(space, [VECTORIZED], str(tmp_path / "p:matmul:aaa.npz"))
    b = _record(space, [SCALAR], str(tmp_path / "p:matmul:bbb.npz"))
    fill_code_feature_cache([b], tmp_path / "other", progress=False)
    original = tcf.CompileProbe.asm

    def asm_and_other_run_writes_b(self, *args):  # type: ignore[no-untyped-def]
        shutil.copy(cache_path(tmp_path / "other", b), cache_path(tmp_path / "shared", b))
        return original(self, *args)

    monkeypatch.setattr(tcf.CompileProbe, "asm", asm_and_other_run_writes_b)
    report = fill_code_feature_cache([a, b], tmp_path / "shared", progress=False)
    assert (report["kernels_compiled"], report["kernels_filled_by_another_run"], report["kernels_left"]) == (1, 1, 0)
    assert report["configs_compiled"] == 1 and all(f is not None for f in load_code_features([a, b], tmp_path / "shared"))
