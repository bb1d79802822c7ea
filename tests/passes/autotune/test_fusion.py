"""Fusion autotuning: candidates are legal and leave the graph alone; the tuner ranks with the
packaged layout model, runs only the top-k (+ the default fusion) for real, keeps the fastest
measured, writes its groups, and a rerun measures nothing (the cache)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

pytest.importorskip("torch_geometric")
pytest.importorskip("onnxruntime")

from cost_model.decisions import node_order  # noqa: E402
from cost_model.learned.predictor import FusionPredictor  # noqa: E402
from cost_model.profiling.cache import ProfileCache  # noqa: E402
from cost_model.profiling.calibration import kernel_groups  # noqa: E402
from passes.autotune.fusion import FusionTuner, default_fusion, draw_fusions, fusion_harness  # noqa: E402


@pytest.fixture()
def onnx_basic(onnx_backend_data, tmp_path):  # type: ignore[no-untyped-def]
    """pytorch-operator/test_operator_basic (Add, Mul, Tanh, Sigmoid, Neg) moved from opset 6, which
    onnxruntime no longer runs, to 13."""
    import onnx
    from onnx import version_converter

    model = version_converter.convert_version(onnx.load(onnx_backend_data / "pytorch-operator" / "test_operator_basic" / "model.onnx"), 13)
    path = tmp_path / "basic.onnx"
    onnx.save(model, path)
    return path


def test_candidates_are_legal_distinct_and_leave_the_graph_alone(onnx_basic) -> None:  # type: ignore[no-untyped-def]
    import graph_ir

    graph = graph_ir.load(str(onnx_basic))
    nodes = node_order(graph)
    before = [n.fusion_group for n in nodes]
    drawn = draw_fusions(graph, nodes, np.random.default_rng(0), 50)
    assert [n.fusion_group for n in nodes] == before
    assert 2 <= len(drawn) <= 50 and len(set(drawn)) == len(drawn)
    for decisions in [default_fusion(graph, nodes), *drawn.values()]:
        kernels, _ = kernel_groups(decisions)
        position = {i: k for k, members in enumerate(kernels) for i in members}
        for i, node in enumerate(nodes):  # every producer's kernel runs before its consumer's
            for value in node.inputs:
                if value is not None and value.producer in nodes:
                    assert position[nodes.index(value.producer)] <= position[i]
    assert (default_fusion(graph, nodes).fusion_group >= 0).all()  # five elementwise ops: one loop fusion


@pytest.mark.parametrize("ranker", ["additive", "gnn"])
def test_autotune_an_onnx_model_measures_top_k_and_resumes(onnx_basic, tmp_path, ranker: str) -> None:  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker

    graph = graph_ir.load(str(onnx_basic))
    cache_path = tmp_path / "tune.sqlite"
    predictor = load_fusion_ranker(ranker=ranker)  # the packaged additive model (default) or GraphSAGE layout model
    with ProfileCache(cache_path) as cache:
        tuning = FusionTuner(predictor, fusion_harness(cache, repeats=2), budget=20, top_k=3).tune(graph)
    assert 2 <= tuning.outcome.measurements <= 4  # the top 3 and the default fusion
    assert tuning.checked and tuning.outcome.best_seconds == min(tuning.outcome.measured.values())
    assert tuning.outcome.best_seconds <= tuning.default_seconds
    graph.verify()
    best = np.array(__import__("json").loads(tuning.outcome.best))
    assert [n.fusion_group if n.fusion_group is not None else -1 for n in node_order(graph)] == best.tolist()
    out = tmp_path / "tuned.onnx"
    graph_ir.save(graph, str(out))
    feeds = {i.name: np.random.default_rng(1).standard_normal([1]).astype(np.float32) for i in ort.InferenceSession(str(onnx_basic)).get_inputs()}
    want = ort.InferenceSession(str(onnx_basic)).run(None, feeds)
    got = ort.InferenceSession(str(out)).run(None, feeds)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    rows = sqlite3.connect(cache_path).execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
    with ProfileCache(cache_path) as cache:
        again = FusionTuner(predictor, fusion_harness(cache, repeats=2), budget=20, top_k=3).tune(graph_ir.load(str(onnx_basic)))
    assert sqlite3.connect(cache_path).execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == rows
    assert again.outcome.best == tuning.outcome.best


def test_a_tile_model_is_refused_for_fusion() -> None:
    from cost_model.learned.predictor import PACKAGED_MODEL

    with pytest.raises(ValueError, match="tile-form model"):
        FusionPredictor.load(PACKAGED_MODEL)


@pytest.mark.slow
def test_cli_autotunes_a_jax_program_on_xla(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("jax")
    import graph_ir
    from compiler_opt.cli.main import main
    from compiler_opt.costmodel.fusion_graphs import fusion_graphs

    source = tmp_path / "attention.hlo"
    graph_ir.save(fusion_graphs((1,), names={"attention@1"})["attention@1"], str(source))
    out = tmp_path / "tuned.hlo"
    args = ["autotune", str(source), "--task", "fusion", "--budget", "30", "--top-k", "4", "--cache", str(tmp_path / "c.sqlite"), "-o", str(out), "--no-progress"]
    assert main(args) == 0
    text = capsys.readouterr().out
    import re

    ranked, measured = (int(x) for x in re.search(r"(\d+) candidates ranked, (\d+) measured", text).groups())
    assert 20 <= ranked <= 31 and measured <= 5 and "outputs match the original graph" in text
    tuned = graph_ir.load(str(out))  # fused computations in the written HLO
    assert "fused_computation" in out.read_text() and len(list(tuned)) < len(list(graph_ir.load(str(source))))


def test_weights_made_by_nodes_get_types_before_groups_run(onnx_backend_data, tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    """The onnx package's light models make every weight with a ConstantOfShape node and store no
    value types: each group runs as its own onnxruntime model, so the tuner infers types first
    (before, every group failed to load: "Model input (conv1_w_0) does not have type
    information"). Convs the ranker cannot time alone are reported in one line, not one per node."""
    import logging

    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker

    graph = graph_ir.load(str(onnx_backend_data / "light" / "light_squeezenet.onnx"))
    with ProfileCache(tmp_path / "cache.sqlite") as cache, caplog.at_level(logging.WARNING):
        tuning = FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=4, top_k=2).tune(graph)
    assert tuning.outcome.measurements >= 2 and tuning.checked
    assert sum("not timed alone" in r.getMessage() for r in caplog.records) <= 1
    graph.verify()


def test_a_group_onnxruntime_cannot_run_on_random_data_is_named(onnx_backend_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An input that is an Expand's target shape gets random integers, which onnxruntime refuses
    at run time: a ProfilingError naming the group, not an internal error."""
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker
    from cost_model.profiling.subgraph import ProfilingError

    graph = graph_ir.load(str(onnx_backend_data / "simple" / "test_expand_shape_model1" / "model.onnx"))
    with ProfileCache(tmp_path / "cache.sqlite") as cache, pytest.raises(ProfilingError, match=r"cannot run group \[test\] on seeded random inputs"):
        FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=4, top_k=2).tune(graph)


def test_bf16_outputs_are_compared_to_a_few_ulps(shared_testdata, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """XLA's bf16 layer-norm benchmark: the unfused graph rounds to bf16 between kernels, a fusion
    keeps f32 inside, so they differ by an ulp (0.0156 at 2-4). The tuner's check allows a few ulps
    of the output's type (before: "output 0 of the chosen fusion differs ... 0.015625")."""
    pytest.importorskip("jax")
    import ml_dtypes

    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker
    from graph_ir.compare import epsilon

    assert epsilon(np.dtype(ml_dtypes.bfloat16)) == 2.0 ** -7 and epsilon(np.dtype(np.int32)) == 0.0
    path = shared_testdata / "external" / "hlo" / "openxla-xla__xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the shared testdata")
    with ProfileCache(tmp_path / "cache.sqlite") as cache:
        tuning = FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=12, top_k=3).tune(graph_ir.load(str(path)))
    assert tuning.checked


def test_xla_thunk_coverage_module_tunes_past_its_rng_state(shared_testdata, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """XLA's thunk-coverage module: a while loop's tuple crosses kernels, and output 15 is the
    RNG state, which moves on every run (5.98e18 apart). Outputs on which two runs of the
    unfused plan disagree are not compared; the rest must match."""
    pytest.importorskip("jax")
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker

    path = shared_testdata / "external" / "hlo" / "openxla-xla__xla__backends__cpu__tests__thunk_coverage__cpu.hlo"
    if not path.exists():
        pytest.skip(f"{path.name} is not in the shared testdata")
    with ProfileCache(tmp_path / "cache.sqlite") as cache:
        tuning = FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=6, top_k=2).tune(graph_ir.load(str(path)))
    assert tuning.checked and tuning.outcome.measurements >= 1


def test_cli_autotunes_a_stablehlo_program(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A .mlir model is lowered to HLO on load (before: "autotune-fusion runs HLO graphs ... this
    graph has ops of domains ['stablehlo']") and the result is written back as StableHLO."""
    jax = pytest.importorskip("jax")
    import graph_ir
    from compiler_opt.cli.main import main

    def block(x, w):  # type: ignore[no-untyped-def]
        h = jax.numpy.tanh(x @ w) * 2.0 + 1.0
        return jax.nn.softmax(h, axis=-1).sum(axis=0)

    source = tmp_path / "block.mlir"
    source.write_text(jax.jit(block).lower(np.ones((16, 32), np.float32), np.ones((32, 32), np.float32)).as_text())
    out = tmp_path / "tuned.mlir"
    args = ["autotune", str(source), "--task", "fusion", "--budget", "8", "--top-k", "2", "--cache", str(tmp_path / "c.sqlite"), "-o", str(out), "--no-progress"]
    assert main(args) == 0
    assert "outputs match the original graph" in capsys.readouterr().out
    assert "stablehlo." in out.read_text() and len(graph_ir.load(str(out))) >= 1


def test_string_outputs_are_compared_exactly(onnx_backend_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A StringNormalizer model: its outputs are strings, compared for equality (before: a
    TypeError from subtracting strings)."""
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker

    graph = graph_ir.load(str(onnx_backend_data / "simple" / "test_strnorm_model_nostopwords_nochangecase" / "model.onnx"))
    with ProfileCache(tmp_path / "cache.sqlite") as cache:
        tuning = FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=2, top_k=1).tune(graph)
    assert tuning.checked


def test_kernel_priorities_are_a_topological_order_of_kernels(onnx_backend_data) -> None:  # type: ignore[no-untyped-def]
    """On a real graph with random legal fusions: one priority per kernel (a group, or a single
    node), and every data edge between two kernels runs producer first."""
    import graph_ir
    from passes.autotune.fusion import random_fusion, topological_priorities

    graph = graph_ir.load(str(onnx_backend_data / "light" / "light_inception_v1.onnx"))
    nodes = node_order(graph)
    index = {n: i for i, n in enumerate(nodes)}
    rng = np.random.default_rng(3)
    for _ in range(3):
        groups = random_fusion(graph, nodes, rng).fusion_group
        priority = topological_priorities(nodes, groups, index)
        kernel = np.where(groups >= 0, groups, -1 - np.arange(len(nodes)))
        assert len(set(priority.tolist())) == len(set(kernel.tolist()))
        for k in set(kernel.tolist()):
            assert len(set(priority[kernel == k].tolist())) == 1
        for i, node in enumerate(nodes):
            for value in node.inputs:
                producer = getattr(value, "producer", None) if value is not None else None
                if producer in index and kernel[index[producer]] != kernel[i]:
                    assert priority[index[producer]] > priority[i]


def test_inputs_that_would_not_fit_are_refused_before_the_work(onnx_basic, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """gemma4-2b's 10.4 GiB of parameters, drawn and copied per configuration, got the tuner
    killed by the kernel; a graph whose random inputs would not fit is a PassError up front."""
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker
    from cost_model.profiling import host_memory
    from passes.infra.base import PassError

    monkeypatch.setattr(host_memory, "available_memory_bytes", lambda: 16)  # this machine with 16 bytes free
    with ProfileCache(tmp_path / "cache.sqlite") as cache, pytest.raises(PassError, match="GiB available"):
        FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=2, top_k=1).tune(graph_ir.load(str(onnx_basic)))


def test_the_progress_bar_counts_the_groups_to_compile(onnx_basic, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`uncompiled` names the groups a plan still needs, `on_compile` fires once per group built,
    and the tuner's bar ends at that count (one configuration of a large graph is thousands of
    executables: a bar per configuration sat at 0 for minutes)."""
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker
    from cost_model.profiling.ort_groups import OrtGroupExecutor

    graph = graph_ir.load(str(onnx_basic))
    nodes = node_order(graph)
    executor = OrtGroupExecutor(graph, nodes)
    unfused = default_fusion(graph, nodes)
    unfused.fusion_group[:] = -1
    built: list[int] = []
    executor.on_compile = lambda: built.append(1)
    assert len(executor.uncompiled(unfused)) == len(nodes)
    executor.plan(unfused)
    assert len(built) == len(nodes) and executor.uncompiled(unfused) == set()
    assert len(executor.uncompiled(default_fusion(graph, nodes))) == 1  # one loop fusion, not built yet
    with ProfileCache(tmp_path / "cache.sqlite") as cache:
        FusionTuner(load_fusion_ranker(None), fusion_harness(cache, repeats=2), budget=6, top_k=2).tune(graph_ir.load(str(onnx_basic)), progress=True)
    err = capsys.readouterr().err
    import re

    last = err.replace("\r", "\n").strip().splitlines()[-1]
    done, total = map(int, re.search(r"\| (\d+)/(\d+) groups compiled \[", last).groups())
    assert last.startswith("autotune fusion: timing") and "configurations" in last and "/s" not in last  # no rate while timing
    assert done == total >= 1  # every group the bar announced was compiled
