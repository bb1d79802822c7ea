"""benchmarks/bench_fidelity.py: its source records, ratio math, sizes, and one pair end to end."""

from __future__ import annotations

import math

import pytest

from compiler_opt.workloads.registry import get_workload
from tests.benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_fidelity") as module:
        yield module


def test_source_records_are_complete(bench) -> None:
    keys = [p["key"] for p in bench.PAIRS]
    assert len(keys) == len(set(keys))
    for pair in bench.PAIRS:
        assert pair["published"] > 0 and pair["unit"] in ("img/s", "seq/s", "tok/s")
        assert pair["device"] in bench.DEVICES and pair["precision"] in ("fp32", "tf32", "amp")
        assert pair["framework"] in bench.STEP_OVERHEAD_S
        source = pair["source"]
        # Repository file, table, GPU and batch are named in every record.
        assert "DeepLearningExamples" in source and "README.md" in source, pair["key"]
        assert ("V100" in source) == pair["device"].startswith("V100"), pair["key"]
        assert ("A100" in source) == pair["device"].startswith("A100"), pair["key"]
        if pair["unit"] != "img/s" or pair["mode"] == "inference":
            assert f"batch {pair['sizes']['batch']}" in source, pair["key"]
        assert pair["precision"] != "tf32" or pair["device"].startswith("A100")
    # At least six pairs beyond ResNet-50, on both GPUs, and held-out pairs of every model.
    assert sum(p["workload"] != "resnet-50" for p in bench.PAIRS) >= 6
    for workload in {p["workload"] for p in bench.PAIRS}:
        assert any(not p["fit"] for p in bench.PAIRS if p["workload"] == workload), workload


def test_pair_sizes_are_valid_overrides(bench) -> None:
    for pair in bench.PAIRS:
        workload = get_workload(pair["workload"])
        workload.check_mode(pair["mode"])
        sizes = workload.sizes(pair["sizes"])
        assert all(sizes[k] == v for k, v in pair["sizes"].items()), pair["key"]


def test_items_and_ratio_math(bench) -> None:
    by_key = {p["key"]: p for p in bench.PAIRS}
    assert bench.items_per_step(by_key["rn50-train-v100-fp32"]) == 112
    assert bench.items_per_step(by_key["gnmt-train-v100-fp32"]) == 128 * (24 + 24)
    assert bench.items_per_step(by_key["txl-train-v100-fp32"]) == 16 * 192
    assert bench.ratio(150.0, 100.0) == pytest.approx(1.5)
    assert bench.geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert bench.geomean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        bench.ratio(0.0, 1.0)
    with pytest.raises(ValueError):
        bench.items_per_step({**by_key["rn50-train-v100-fp32"], "unit": "frames/s"})


def test_fitted_constants_are_fractions(bench) -> None:
    assert set(bench.EFFICIENCY) == {"fp32", "tensor", "conv_fp32", "conv_tensor", "memory"}
    assert all(0.0 < v <= 1.0 for v in bench.EFFICIENCY.values())
    assert all(0.0 <= v < 0.05 for v in bench.STEP_OVERHEAD_S.values())


def test_one_pair_end_to_end(bench) -> None:
    """The smallest pair builds at its published sizes; the simulator and the fit's per-kernel sum agree."""
    pair = next(p for p in bench.PAIRS if p["key"] == "bert-base-infer-a100-amp")
    graph, fusion = bench.build(pair)
    assert fusion.name == "xla-gpu" and fusion.groups > 0
    tokens = next(v for v in graph.inputs if v.type.shape and v.type.shape[-1] == pair["sizes"]["seq_len"])
    assert tokens.type.shape[0] == pair["sizes"]["batch"]
    problem, decisions = bench.problem_for(graph, pair)
    terms = bench.kernel_terms(problem, decisions)
    for efficiency, overhead in ((bench.EFFICIENCY, bench.STEP_OVERHEAD_S), ({k: 1.0 for k in bench.EFFICIENCY}, {})):
        step = bench.simulate_step(problem, decisions, pair, dict(efficiency), dict(overhead))
        assert step == pytest.approx(bench.analytic_step(terms, pair, dict(efficiency), dict(overhead)), rel=1e-6)
    slow = bench.simulate_step(problem, decisions, pair, {k: 0.5 for k in bench.EFFICIENCY}, {})
    assert slow > step and math.isfinite(slow)


def test_eager_fusion_gives_library_calls_no_epilogue(bench) -> None:
    """PyTorch rows: convs/matmuls stay alone (cuDNN/cuBLAS calls), elementwise chains still fuse."""
    from compiler_opt.workloads.registry import build_workload
    from graph_ir.op_kinds import ELEMENTWISE_KINDS
    from passes.fusion.rules import HEAVY_KINDS

    graph = build_workload("resnet-50", "inference", batch=2, image_size=64)
    fusion = bench.eager_fusion(graph)
    assert fusion.name == "pytorch-eager" and fusion.groups > 0
    heavy = [n for n in graph if n.kind in HEAVY_KINDS]
    assert heavy and all(n.fusion_group is None for n in heavy)
    assert any(n.fusion_group is not None for n in graph if n.kind in ELEMENTWISE_KINDS)
    xla = build_workload("resnet-50", "inference", batch=2, image_size=64)
    bench.apply_default_fusion(xla)
    assert any(n.fusion_group is not None for n in xla if n.kind in HEAVY_KINDS)  # XLA's epilogues


def test_host_bound_step_agrees_with_the_fit_path(bench) -> None:
    """A PyTorch pair: the simulator's timeline with the host bound equals the per-kernel form the
    fit uses, at a host time that binds and at one that does not; the bound never shortens a step."""
    pair = next(p for p in bench.PAIRS if p["key"] == "rn50-infer-v100-amp")
    graph, fusion = bench.build(pair)
    assert fusion.name == "pytorch-eager"
    problem, decisions = bench.problem_for(graph, pair)
    terms = bench.kernel_terms(problem, decisions)
    assert terms["host_ops"].sum() == terms["launch"].size - (terms["host_ops"] == 0).sum() > 0
    efficiency = dict(bench.EFFICIENCY)
    device = bench.simulate_step(problem, decisions, pair, efficiency, {})
    for per_kernel in (1e-7, 500e-6):
        host = {"pytorch": per_kernel}
        step = bench.simulate_step(problem, decisions, pair, efficiency, {}, host, terms)
        assert step == pytest.approx(bench.analytic_step(terms, pair, efficiency, {}, host), rel=1e-9)
        assert step >= device * (1 - 1e-12)
    assert step >= terms["host_ops"].sum() * 500e-6  # host-bound: every dispatch is paid
    with pytest.raises(ValueError):
        bench.simulate_step(problem, decisions, pair, efficiency, {}, {"pytorch": 1e-5})
    # --breakdown: the kernel classes partition the kernels and their times add up to the device step.
    rows = bench.breakdown(terms, pair, efficiency)
    assert sum(r[1] for r in rows) == terms["launch"].size
    assert sum(r[2] + r[3] + r[4] for r in rows) == pytest.approx(device, rel=1e-9)
    assert {r[0] for r in rows} >= {"conv", "elementwise/data"}
