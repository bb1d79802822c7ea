"""The autotuner on a synthetic kernel whose cost is known: it finds the optimum measuring only
the top-k, with far fewer measurements than random search needs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from passes.autotune.search import GATE_TAU, agreement, random_search_measurements, tune_candidates


def _cost(config: tuple[int, int, int]) -> float:
    # A bowl with its minimum at tile (16, 4, 2) in log2 space, plus a ridge the model does not see.
    a, b, c = (np.log2(v) for v in config)
    return 1e-4 * (1 + (a - 4) ** 2 + 0.5 * (b - 2) ** 2 + 0.25 * (c - 1) ** 2 + 0.05 * ((a + b) % 2))


CANDIDATES = list(itertools.product([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 16], [1, 2, 4, 8]))


def test_finds_the_known_best_with_top_k_measurements() -> None:
    rng = np.random.default_rng(0)
    noise = {c: rng.normal(0, 0.02) for c in CANDIDATES}
    measured: list[tuple[int, int, int]] = []

    def rank(cs):  # type: ignore[no-untyped-def]
        return [np.log(_cost(c)) + noise[c] for c in cs]  # a good but imperfect model

    def measure(cs):  # type: ignore[no-untyped-def]
        measured.extend(cs)
        return [_cost(c) for c in cs]

    outcome = tune_candidates(CANDIDATES, rank=rank, measure=measure, top_k=5)
    optimum = min(CANDIDATES, key=_cost)
    assert outcome.best == optimum == (16, 4, 2)
    assert outcome.measurements == len(measured) == 5
    random_needs = random_search_measurements([_cost(c) for c in CANDIDATES], _cost(optimum) * 1.02)
    assert random_needs >= 3 * outcome.measurements  # the goal: a third of random search's measurements


def test_a_bad_model_still_keeps_the_best_it_measured() -> None:
    outcome = tune_candidates(CANDIDATES, rank=lambda cs: [-_cost(c) for c in cs], measure=lambda cs: [_cost(c) for c in cs], top_k=3)
    assert outcome.best_seconds == min(outcome.measured.values())
    assert outcome.best_seconds > min(_cost(c) for c in CANDIDATES)


def test_the_gate_measures_more_only_where_the_top_k_disagree_with_the_ranker() -> None:
    """Twenty-first session: a ranker that orders its own top 5 backwards (tau -1 on them) while the
    best sits 7th in its order gets the next 5 measured and the best found; a ranker whose top 5
    measure in its order is left at 5 measurements."""
    costs = [float(c) for c in (5, 4, 3, 2, 1.5, 9, 0.5, 8, 7, 6, 10, 11)]  # index 6 is the best

    def measure_into(log):  # type: ignore[no-untyped-def]
        def measure(cs):  # type: ignore[no-untyped-def]
            log.append(list(cs))
            return [costs[c] for c in cs]
        return measure

    backwards: list[list[int]] = []
    outcome = tune_candidates(list(range(12)), rank=lambda cs: [float(c) for c in cs], measure=measure_into(backwards), top_k=5, extra_k=5)
    assert outcome.agreement == pytest.approx(-1.0) and outcome.extra_measured == 5 and outcome.measurements == 10
    assert backwards == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]] and outcome.best == 6 and outcome.best_seconds == 0.5

    ordered: list[list[int]] = []
    rank = [0.0, 1, 2, 3, 4, 9, 10, 5, 6, 7, 8, 11]  # its top 5 are indices 0-4; their costs now rise in its order
    costs[:5] = [1.0, 1.5, 2.0, 2.5, 3.0]
    outcome = tune_candidates(list(range(12)), rank=lambda cs: [rank[c] for c in cs], measure=measure_into(ordered), top_k=5, extra_k=5)
    assert outcome.agreement == pytest.approx(1.0) and outcome.extra_measured == 0 and ordered == [[0, 1, 2, 3, 4]] and outcome.best == 0
    assert outcome.agreement >= GATE_TAU > 0.0


def test_the_gate_is_off_by_default_and_opens_on_undefined_agreement() -> None:
    flat = tune_candidates(list(range(8)), rank=lambda cs: [0.0] * len(cs), measure=lambda cs: [1.0] * len(cs), top_k=3)
    assert flat.measurements == 3 and flat.extra_measured == 0 and np.isnan(flat.agreement)  # extra_k 0: no gate
    flat = tune_candidates(list(range(8)), rank=lambda cs: [0.0] * len(cs), measure=lambda cs: [1.0] * len(cs), top_k=3, extra_k=2)
    assert flat.measurements == 5 and flat.extra_measured == 2  # constant scores: tau undefined, the gate opens
    few = tune_candidates([1, 2, 3], rank=lambda cs: [0.0, 0.0, 1.0], measure=lambda cs: [2.0] * len(cs), top_k=3, extra_k=5)
    assert few.measurements == 3 and few.extra_measured == 0  # nothing left to measure
    assert agreement([1.0], [2.0]) != agreement([1.0], [2.0])  # NaN for fewer than 2
    assert agreement([1, 2, 3], [10, 30, 20]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="extra_k"):
        tune_candidates([1, 2], rank=lambda cs: [0.0, 1.0], measure=lambda cs: [1.0] * len(cs), top_k=1, extra_k=-1)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no candidates"):
        tune_candidates([], rank=lambda cs: [], measure=lambda cs: [], top_k=1)
    with pytest.raises(ValueError, match="scores"):
        tune_candidates([1, 2], rank=lambda cs: [0.0], measure=lambda cs: [1.0], top_k=1)


def test_autotune_tiles_pass_is_registered_and_names_a_bad_model_file(repo_root, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    import graph_ir
    from graph_ir.errors import CompilerOptError
    from passes.autotune import AutotuneTiles
    from passes.infra.registry import get_pass_class

    assert get_pass_class("autotune-tiles") is AutotuneTiles
    graph = graph_ir.load(str(repo_root / "examples" / "small_cnn.onnx"))
    bad = tmp_path / "missing.pt"
    with pytest.raises(CompilerOptError, match="missing.pt"):
        AutotuneTiles(model=str(bad))(graph)


def test_the_tile_tuner_measures_past_the_top_k_for_real_when_the_gate_opens(repo_root, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A ranker with one score for every candidate tells nothing (agreement undefined): the gate
    opens, TVM compiles and times `extra_k` more, and the kept config is the fastest of all measured."""
    pytest.importorskip("tvm")
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.measure.tile.kernels import KernelSpec
    from cost_model.profiling.cache import ProfileCache
    from passes.autotune.tile import TileTuner
    from passes.infra.base import PassError

    class Flat:
        def rank(self, space, configs):  # type: ignore[no-untyped-def]
            return np.zeros(len(configs))

    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1, retest_fraction=0.0)
        tuner = TileTuner(Flat(), harness, budget=8, top_k=2, extra_k=2)
        outcome = tuner.tune(KernelSpec("matmul", (16, 24, 8)))
    assert tuner.seconds["measure_s"] > 0.0 and tuner.seconds["rank_s"] >= 0.0  # where a kernel's tuning time went
    assert outcome.measurements == 4 and outcome.extra_measured == 2 and np.isnan(outcome.agreement)
    assert outcome.best_seconds == min(outcome.measured.values()) and sorted(outcome.measured) == [0, 1, 2, 3]
    import graph_ir
    from passes.autotune import AutotuneTiles

    with pytest.raises(PassError, match="extra_k"):
        AutotuneTiles(extra_k=-1)(graph_ir.load(str(repo_root / "examples" / "small_cnn.onnx")))


def test_the_prefilter_hands_a_compiling_ranker_only_the_code_blind_models_best(repo_root) -> None:  # type: ignore[no-untyped-def]
    """With prefilter 0.5 a ranker that compiles candidates ranks only the half the packaged code-blind
    model puts first; its order decides among them, the rest follow in the code-blind order."""
    pytest.importorskip("tvm")
    pytest.importorskip("xgboost")
    from cost_model.learned.predictor import load_tile_ranker
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace
    from passes.autotune.tile import TileTuner, compiles_candidates
    from passes.infra.base import PassError

    class Compiling:  # stands in for a gbdt-ens file with code features: records what it is asked
        extra = {"code_features": True}

        def __init__(self) -> None:
            self.asked: list[str] = []

        def rank(self, space, configs):  # type: ignore[no-untyped-def]
            self.asked += [c.text() for c in configs]
            return -np.arange(len(configs), dtype=float)  # reverses whatever it is given

    space = TileSpace(build_kernel(KernelSpec("matmul", (16, 24, 8))))
    configs = kernel_configs(space, 0, 10)
    blind = np.argsort(load_tile_ranker("gbdt", None).rank(space, configs), kind="stable")
    ranker = Compiling()
    assert compiles_candidates(ranker) and not compiles_candidates(load_tile_ranker("gbdt", None))
    scores = TileTuner(ranker, None, top_k=2, prefilter=0.5).rank(space, configs)
    assert ranker.asked == [configs[i].text() for i in blind[:5]]  # half, in the code-blind order
    order = np.argsort(scores, kind="stable")
    assert order.tolist() == blind[:5][::-1].tolist() + blind[5:].tolist()
    ranker.asked.clear()  # keeping at least top_k + extra_k: here all ten, so no prefilter at all
    TileTuner(ranker, None, top_k=6, extra_k=4, prefilter=0.5).rank(space, configs)
    assert ranker.asked == [c.text() for c in configs]
    with pytest.raises(ValueError, match="prefilter"):
        TileTuner(ranker, None, prefilter=0.0)
    import graph_ir
    from passes.autotune import AutotuneTiles

    with pytest.raises(PassError, match="prefilter"):
        AutotuneTiles(prefilter=1.5)(graph_ir.load(str(repo_root / "examples" / "small_cnn.onnx")))


def test_prefiltered_scores_by_hand() -> None:
    from passes.autotune.tile import prefiltered_scores

    first = np.array([0.3, 0.1, 0.9, 0.2, 0.5])  # prefilter order: 1, 3, 0, 4, 2
    seen = []
    scores = prefiltered_scores(first, lambda kept: seen.append(kept.tolist()) or np.array([5.0, 1.0, 3.0]), 3)
    assert seen == [[1, 3, 0]]  # the three the prefilter puts first, in its order
    assert np.argsort(scores, kind="stable").tolist() == [3, 0, 1, 4, 2]  # the ranker's order among them, then the prefilter's


def test_prefilter_keep_by_hand() -> None:
    from passes.autotune.tile import prefilter_keep

    assert prefilter_keep(200, 0.75, 7) == 150
    assert prefilter_keep(10, 0.5, 7) == 7  # never fewer than will be measured
    assert prefilter_keep(5, 0.5, 7) == 5  # never more than there are
    assert prefilter_keep(9, 0.5, 1) == 5  # rounded up


_TWO_DOTS = """HloModule two_dots

ENTRY main {
  a = f32[16,24] parameter(0)
  b = f32[24,8] parameter(1)
  small = f32[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = f32[1024,1024] parameter(2)
  big = f32[1024,1024] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[16,8], f32[1024,1024]) tuple(small, big)
}
"""


def test_a_kernel_too_large_for_free_memory_is_left_untuned_and_named(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """An LLM's logits matmul (4096 x 128256 x 4096) needs 4 GiB per buffer set; measuring its top-k
    at once got the process killed. Such a kernel is skipped before any allocation, named with the
    reason, and the graph's other kernels are still tuned (here free memory is set small so a
    1024^3 matmul plays the LLM's part)."""
    pytest.importorskip("tvm")
    from compiler_opt.cli.main import main
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.profiling import host_memory
    from cost_model.profiling.cache import ProfileCache
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.autotune.tile import KernelTooLarge, TileTuner

    class Flat:
        def rank(self, space, configs):  # type: ignore[no-untyped-def]
            return np.arange(len(configs), dtype=float)

    monkeypatch.setattr(host_memory, "available_memory_bytes", lambda: 40 * 2**20)
    graph = import_hlo_text(_TWO_DOTS)
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1, retest_fraction=0.0)
        tuner = TileTuner(Flat(), harness, budget=4, top_k=1)
        tunings = tuner.tune_graph(graph)
        with pytest.raises(KernelTooLarge, match="needs about 48 MiB"):  # refused before any buffer is drawn
            tuner.tune(KernelSpec("matmul", (1024, 1024, 1024)))
    by_name = {n.name: n for n in graph}
    assert [t.nodes for t in tunings] == [["small"]] and by_name["small"].tile is not None and by_name["big"].tile is None
    (why,) = tuner.skipped.values()
    assert "matmul(1024,1024,1024)" in next(iter(tuner.skipped)) and "needs about 48 MiB" in why and "the 40 MiB available" in why
    assert tuner.memory_need(build_kernel(tunings[0].spec)) < 2**20
    model = tmp_path / "two.hlo"
    model.write_text(_TWO_DOTS)
    assert main(["autotune", str(model), "--task", "tile", "--budget", "4", "--top-k", "1", "--ranker", "gbdt", "--prefilter", "1",
                 "--cache", str(tmp_path / "cli.sqlite"), "-o", str(tmp_path / "out.hlo"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "not tuned: measuring 1 configuration(s) of tvm-tile:matmul(1024,1024,1024)" in out and "1 kernels tuned, 1 left untuned (above)" in out
    assert (tmp_path / "out.hlo").exists()


def test_each_op_is_tuned_in_its_own_element_types_and_the_rest_are_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An LLM's bf16 dots get bf16 kernels (float32 sums, as XLA's CPU backend does), a bf16 dot with a
    float32 result its own kind; the ranker, fitted on float32 kernels, is shown the float32 twin. Integer
    dots and operands of two types have no kernel: they are left untuned and named."""
    pytest.importorskip("tvm")
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.profiling.cache import ProfileCache
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.autotune.tile import TileTuner

    class Flat:
        def __init__(self) -> None:
            self.shown: set[str] = set()
            self.tuned_on: list[str] = []

        def rank(self, space, configs):  # type: ignore[no-untyped-def]
            self.shown.add(space.kernel.spec.signature)
            return np.arange(len(configs), dtype=float)

        def finetune(self, space, configs, seconds, steps):  # type: ignore[no-untyped-def]
            self.tuned_on.append(space.kernel.spec.signature)

    graph = import_hlo_text("""HloModule mixed

ENTRY main {
  a = f32[16,24] parameter(0)
  b = f32[24,8] parameter(1)
  single = f32[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = bf16[16,24] parameter(2)
  d = bf16[24,8] parameter(3)
  half = bf16[16,8] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  widened = f32[16,8] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = s32[16,24] parameter(4)
  j = s32[24,8] parameter(5)
  ints = s32[16,8] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[16,8], bf16[16,8], f32[16,8], s32[16,8]) tuple(single, half, widened, ints)
}
""")
    ranker = Flat()
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1, retest_fraction=0.0)
        tuner = TileTuner(ranker, harness, budget=4, top_k=2, finetune_steps=1)
        tunings = tuner.tune_graph(graph)
    by_name = {n.name: n for n in graph}
    assert {t.spec.signature: t.nodes for t in tunings} == {"tvm-tile:matmul(16,8,24):float32": ["single"],
                                                           "tvm-tile:matmul(16,8,24):bfloat16": ["half"],
                                                           "tvm-tile:matmul(16,8,24):bfloat16->float32": ["widened"]}
    assert all(by_name[n].tile is not None for n in ("single", "half", "widened")) and by_name["ints"].tile is None
    assert ranker.shown == {"tvm-tile:matmul(16,8,24):float32"}  # every kernel ranked as its float32 twin
    assert ranker.tuned_on == ["tvm-tile:matmul(16,8,24):float32"]  # and fine-tuned on float32 timings only
    assert tuner.skipped == {"matmul(16,8,24), values of type i32": "1 node(s) (ints): the tile kernels build f32, f64, bf16, f16 only"}


class _SeenRanker:
    """A ranker that keeps the signature of every kernel it is asked to rank (in the given order)."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def rank(self, space, configs):  # type: ignore[no-untyped-def]
        self.shown.append(space.kernel.spec.signature)
        return np.arange(len(configs), dtype=float)


def test_a_ranker_fitted_on_a_type_ranks_that_types_own_kernels(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`type_rankers`: where a ranker fitted on f16 kernels exists, an f16 kernel's candidates are ranked
    on the f16 kernel itself by it (its code features read the f16 code); other types keep the twin."""
    pytest.importorskip("tvm")
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.profiling.cache import ProfileCache
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.autotune.tile import TileTuner

    graph = import_hlo_text("""HloModule typed

ENTRY main {
  a = f16[16,24] parameter(0)
  b = f16[24,8] parameter(1)
  half = f16[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = bf16[16,24] parameter(2)
  d = bf16[24,8] parameter(3)
  brain = bf16[16,8] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f16[16,8], bf16[16,8]) tuple(half, brain)
}
""")
    main, f16 = _SeenRanker(), _SeenRanker()
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1, retest_fraction=0.0)
        tunings = TileTuner(main, harness, budget=4, top_k=2, type_rankers=lambda dtype: f16 if dtype == "float16" else None).tune_graph(graph)
    assert sorted(t.spec.signature for t in tunings) == ["tvm-tile:matmul(16,8,24):bfloat16", "tvm-tile:matmul(16,8,24):float16"]
    assert f16.shown == ["tvm-tile:matmul(16,8,24):float16"] and main.shown == ["tvm-tile:matmul(16,8,24):float32"]
    # what `autotune` prints beside each kernel: how it was ranked
    assert {t.spec.dtype: t.ranked_as for t in tunings} == {"float16": "its own float16 code, by the float16 ranker", "bfloat16": "as its float32 twin"}


def test_a_kernel_past_the_work_limit_is_left_untuned_and_named(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An LLM's 16 x 4096^3 bf16 dot (2.2 TFLOP a run) kept the tuner busy for hours (its unscheduled reference
    run alone): a kernel past `max_gflop` is skipped before anything is built, named with the reason, and the
    rest of the graph is tuned; the CLI takes --max-gflop, and refuses it for fusion or when not positive."""
    pytest.importorskip("tvm")
    from compiler_opt.cli.main import main
    from cost_model.measure.harness import Harness, per_call_timer
    from cost_model.measure.tile.kernels import KernelSpec
    from cost_model.profiling.cache import ProfileCache
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.autotune.tile import KernelTooLarge, TileTuner

    class Flat:
        def rank(self, space, configs):  # type: ignore[no-untyped-def]
            return np.arange(len(configs), dtype=float)

    graph = import_hlo_text(_TWO_DOTS)  # small: 16 x 8 x 24; big: 1024^3 = 2.1 GFLOP
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1, retest_fraction=0.0)
        tuner = TileTuner(Flat(), harness, budget=4, top_k=1, max_gflop=1.0)
        tunings = tuner.tune_graph(graph)
        with pytest.raises(KernelTooLarge, match="2 GFLOP a run, more than the 1 GFLOP"):
            tuner.tune(KernelSpec("matmul", (1024, 1024, 1024), dtype="bfloat16"))
    assert [t.nodes for t in tunings] == [["small"]]
    (why,) = tuner.skipped.values()
    assert "more than the 1 GFLOP a kernel may be (--max-gflop)" in why
    with pytest.raises(ValueError, match="max_gflop"):
        TileTuner(Flat(), None, max_gflop=0)
    model = tmp_path / "two.hlo"
    model.write_text(_TWO_DOTS)
    assert main(["autotune", str(model), "--task", "tile", "--max-gflop", "0", "-o", str(tmp_path / "x.hlo")]) == 2
    assert main(["autotune", str(model), "--task", "fusion", "--max-gflop", "5", "-o", str(tmp_path / "x.hlo")]) == 2
    assert "--max-gflop must be positive" in capsys.readouterr().err and not (tmp_path / "x.hlo").exists()


def test_the_cli_hands_the_packaged_type_rankers_to_the_packaged_default_only(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`autotune` without a model file ranks an f16 kernel with the package's f16 ranker; with a model file
    the user chose, every type is ranked by that file (as the float32 twin)."""
    pytest.importorskip("tvm")
    from compiler_opt.cli.costmodel_lib import autotune_model
    from cost_model.learned import predictor

    main, f16 = _SeenRanker(), _SeenRanker()
    monkeypatch.setattr(predictor, "load_tile_ranker", lambda kind, path=None: main)
    monkeypatch.setattr(predictor, "packaged_type_ranker", lambda dtype: f16 if dtype == "float16" else None)
    model = tmp_path / "half.hlo"
    model.write_text("""HloModule half

ENTRY main {
  a = f16[16,24] parameter(0)
  b = f16[24,8] parameter(1)
  ROOT half = f16[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")
    autotune_model(str(model), str(tmp_path / "out.hlo"), budget=4, top_k=1, cache_path=str(tmp_path / "c.sqlite"))
    assert f16.shown == ["tvm-tile:matmul(16,8,24):float16"] and main.shown == []
    f16.shown.clear()
    autotune_model(str(model), str(tmp_path / "out2.hlo"), cost_model=str(tmp_path / "mine.json"), budget=4, top_k=1, cache_path=str(tmp_path / "c.sqlite"))
    assert f16.shown == [] and main.shown == ["tvm-tile:matmul(16,8,24):float32"]


def test_kernel_types_by_hand() -> None:
    from types import SimpleNamespace

    from graph_ir.op_kinds import OpKind
    from passes.autotune.tile import kernel_types

    def value(short: str | None) -> SimpleNamespace:
        return SimpleNamespace(type=SimpleNamespace(dtype=None if short is None else SimpleNamespace(short_name=short)))

    def node(kind: OpKind, inputs: list, output: str | None) -> SimpleNamespace:
        return SimpleNamespace(kind=kind, inputs=[value(t) for t in inputs], outputs=[value(output)])

    assert kernel_types(node(OpKind.MATMUL, ["bf16", "bf16"], "bf16")) == ("bfloat16", "")
    assert kernel_types(node(OpKind.MATMUL, ["bf16", "bf16"], "f32")) == ("bfloat16", "float32")
    assert kernel_types(node(OpKind.MATMUL, [None, None], None)) == ("float32", "")  # a graph without types: float32, as before
    assert kernel_types(node(OpKind.REDUCE, ["f64", "s64"], "f64")) == ("float64", "")  # a reduction's axes / init do not count
    assert kernel_types(node(OpKind.MATMUL, ["bf16", "f32"], "f32")) == "operands of two element types (bf16/f32)"
    assert kernel_types(node(OpKind.MATMUL, ["c64", "c64"], "c64")) == "values of type c64"
    assert kernel_types(node(OpKind.MATMUL, ["f8e4m3fn", "f8e4m3fn"], "f32")) == "values of type f8e4m3fn"


def test_a_reduction_with_integer_axes_is_still_a_float32_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ONNX's ReduceSum (opset 13+) and TF's Sum take their axes as an int tensor: only the data and the
    result decide the element type (the first gate skipped all 55 Sums of a Keras ImageNet graph)."""
    import onnx
    from onnx import TensorProto, helper

    import graph_ir
    from passes.autotune.tile import _element_types

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="sum")], "g", [x], [y], [axes])
    path = tmp_path / "sum.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    (node,) = [n for n in graph_ir.load(str(path)) if n.op_type == "ReduceSum"]
    assert _element_types(node) == ({"f32"}, "f32")
