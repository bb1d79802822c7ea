"""The workload suite: every workload builds in both modes, verifies, simulates; registry, cache, export.

Builds go to a per-session cache folder. The default run builds one size per model family;
the other sizes, Inception-V3 (TensorFlow) and DenseNet-121 (PyTorch export) are marked slow.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import numpy as np
import pytest

from compiler_opt.workloads import WorkloadError, build_workload, export_workload, get_workload, list_workloads
from compiler_opt.workloads.registry import cached_node_count, is_cached

pytest.importorskip("jax")

# Node-count ranges at default sizes (train, inference): wide enough for JAX version drift,
# narrow enough to catch a missing layer or an unrolled loop that stopped unrolling.
NODE_RANGES = {
    "rnnlm-2": ((900, 2500), (350, 1000)),
    "rnnlm": ((900, 2500), (350, 1000)),
    "randcell": ((2500, 9000), (800, 2600)),
    "gnmt-2": ((2500, 6000), (1000, 2500)),
    "transformer-xl": ((1400, 3500), (400, 1000)),
    "resnet-50": ((3000, 6500), (900, 2000)),
    "nasnet": ((3500, 8000), (1000, 2500)),
    "wavenet-2x18": ((1200, 2800), (220, 500)),
    "bert-base": ((4500, 10000), (1100, 2600)),
}
SLOW_RANGES = {
    "rnnlm-4": ((1800, 5000), (700, 2000)),
    "rnnlm-8": ((3500, 10000), (1400, 4000)),
    "gnmt-4": ((5000, 12000), (2000, 5000)),
    "gnmt-8": ((9000, 24000), (4000, 10000)),
    "amoebanet": ((3000, 8000), (900, 2500)),
    "wavenet-4x36": ((2400, 5500), (450, 1000)),
    "inception-v3": ((7000, 14000), (900, 2500)),
}


@pytest.fixture(scope="module", autouse=True)
def workload_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("workload-cache")
    old = os.environ.get("COMPILER_OPT_CACHE")
    os.environ["COMPILER_OPT_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("COMPILER_OPT_CACHE", None)
    else:
        os.environ["COMPILER_OPT_CACHE"] = old


def _simulate(graph):
    from cost_model.decisions import Decisions
    from cost_model.devices import load_topology
    from cost_model.lower_bound import step_time_lower_bound
    from cost_model.simulator import SimulationProblem, simulate

    topology = load_topology("4xV100")
    problem = SimulationProblem.from_graph(graph, topology)
    result = simulate(problem, Decisions.from_graph(graph, topology, nodes=problem.nodes))
    return result, step_time_lower_bound(problem)


def _check_workload(name: str, ranges: tuple[tuple[int, int], tuple[int, int]]) -> None:
    sizes = {}
    for mode, (low, high) in zip(("train", "inference"), ranges):
        graph = build_workload(name, mode)
        graph.verify()
        sizes[mode] = len(graph)
        assert low <= len(graph) <= high, f"{name} {mode}: {len(graph)} nodes outside [{low}, {high}]"
        assert graph.meta["workload"]["mode"] == mode
        result, bound = _simulate(graph)
        assert result.step_time_s > 0 and not result.any_oom
        assert bound <= result.step_time_s * (1 + 1e-9)
        assert int(result.peak_memory_bytes.max()) > 0
    assert sizes["train"] > sizes["inference"]


@pytest.mark.parametrize("name", sorted(NODE_RANGES))
def test_workload_builds_verifies_and_simulates(name: str) -> None:
    _check_workload(name, NODE_RANGES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_RANGES))
def test_larger_workload_builds_verifies_and_simulates(name: str) -> None:
    _check_workload(name, SLOW_RANGES[name])


def test_every_registered_workload_is_tested() -> None:
    tested = set(NODE_RANGES) | set(SLOW_RANGES) | {"densenet-121"}
    assert {w.name for w in list_workloads()} == tested


def test_registry_sizes_agree_with_model_modules() -> None:
    for workload in list_workloads():
        if workload.source_format != "hlo":
            continue
        module = importlib.import_module(workload.sources["hlo"].split(":")[0])
        assert set(workload.sizes()) == set(module.DEFAULT_SIZES), workload.name
        assert set(workload.paper_sizes) <= set(module.DEFAULT_SIZES), workload.name


def test_layer_count_scales_the_graph() -> None:
    two, four = len(build_workload("rnnlm-2", "inference")), len(build_workload("rnnlm-4", "inference"))
    fewer_steps = len(build_workload("rnnlm-2", "inference", steps="4"))  # coerced to int
    assert four > 1.6 * two and fewer_steps < 0.6 * two


def test_cache_is_reused_and_records_node_counts(workload_cache: Path) -> None:
    first = build_workload("wavenet-2x18", "inference", length=256)
    assert is_cached("wavenet-2x18", "inference", length=256)
    assert cached_node_count("wavenet-2x18", "inference", length=256) == len(first)
    assert cached_node_count("wavenet-2x18", "inference", length=512) is None
    files = sorted(p.name for p in (workload_cache / "workloads").iterdir())
    assert any(f.startswith("wavenet-2x18-inference-") and f.endswith(".hlo") for f in files)
    start = time.perf_counter()
    again = build_workload("wavenet-2x18", "inference", length=256)
    assert len(again) == len(first) and time.perf_counter() - start < 2.0


def test_bad_names_modes_and_sizes_are_clear_errors() -> None:
    with pytest.raises(WorkloadError, match="unknown workload 'resnet-51'.*resnet-50"):
        build_workload("resnet-51")
    with pytest.raises(WorkloadError, match="has no mode 'eval'"):
        build_workload("rnnlm-2", "eval")
    with pytest.raises(WorkloadError, match="has no mode 'train'"):
        build_workload("densenet-121", "train")
    with pytest.raises(WorkloadError, match="no size 'depth'.*batch"):
        build_workload("rnnlm-2", depth=3)
    with pytest.raises(WorkloadError, match="'layers' is fixed to 2 by the name 'rnnlm-2'"):
        build_workload("rnnlm-2", layers=4)
    with pytest.raises(WorkloadError, match="batch='many' is not a int"):
        build_workload("rnnlm-2", batch="many")
    with pytest.raises(WorkloadError, match="transformer-xl: d_model 250 must split into 4 heads"):
        build_workload("transformer-xl", "inference", d_model=250)


def test_spec_sizes_build_the_named_variant() -> None:
    from compiler_opt.rl.trainer import load_graph
    from compiler_opt.workloads.registry import parse_workload_spec, workload_spec_label, workload_spec_sizes

    spec = "rnnlm:inference@steps=4@layers=3"
    assert workload_spec_sizes(spec) == {"steps": 4, "layers": 3}
    assert workload_spec_label(spec) == "rnnlm:inference@layers=3@steps=4"
    label, graph = load_graph(spec)
    assert label == "rnnlm:inference@layers=3@steps=4"
    assert graph.meta["workload"]["sizes"]["layers"] == 3 and graph.meta["workload"]["sizes"]["steps"] == 4
    assert len(graph) == len(build_workload("rnnlm", "inference", layers=3, steps=4))
    assert workload_spec_sizes("rnnlm-4:inference") == {}
    for bad, message in (
        ("rnnlm-4@layers=5", "'layers' is fixed to 4"),
        ("rnnlm@depth=1", "no size 'depth'"),
        ("rnnlm@layers=x", "layers='x' is not a int"),
        ("rnnlm@layers", "'layers' in 'rnnlm@layers' is not KEY=VALUE"),
        ("rnnlm@batch=1@batch=2", "'batch' is given twice"),
    ):
        with pytest.raises(WorkloadError, match=message):
            parse_workload_spec(bad)


def test_random_cells_are_drawn_from_the_search_space_and_seeded() -> None:
    from compiler_opt.workloads.nasnet import GENOTYPES, RANDOM_OPS, random_genotype, resolve_genotype

    assert resolve_genotype("nasnet") is GENOTYPES["nasnet"]
    assert random_genotype(7) == resolve_genotype("random-7") and random_genotype(7) != random_genotype(8)
    for seed in range(20):
        genotype = random_genotype(seed)
        for kind in ("normal", "reduce"):
            ops = genotype[kind]
            assert len(ops) == 10 and all(name in RANDOM_OPS for name, _ in ops)
            assert all(0 <= source < 2 + j // 2 for j, (_, source) in enumerate(ops))  # only earlier states
            used = {source for _, source in ops}
            concat = genotype[f"{kind}_concat"]
            assert concat and all(2 <= i <= 6 for i in concat)
            assert concat == ([i for i in range(2, 7) if i not in used] or list(range(2, 7)))
    with pytest.raises(WorkloadError, match="random-<seed>"):
        build_workload("randcell", "inference", genotype="random-x")
    one, other = build_workload("randcell", "inference", genotype="random-1"), build_workload("randcell", "inference", genotype="random-2")
    assert one.meta["workload"]["sizes"]["genotype"] == "random-1" and len(one) != len(other)


def test_generated_variants_are_reproducible_distinct_and_build() -> None:
    from compiler_opt.workloads.registry import parse_workload_spec
    from compiler_opt.workloads.variants import random_variants

    specs = random_variants(6, seed=3)
    assert specs == random_variants(6, seed=3) and specs != random_variants(6, seed=4)
    assert len(set(specs)) == 6 and [s.split(":")[0] for s in specs] == ["randcell", "rnnlm"] * 3
    assert all(parse_workload_spec(s)[1] == "inference" for s in specs)
    assert random_variants(0) == []
    with pytest.raises(ValueError, match="families"):
        random_variants(2, families=("vgg",))
    assert len(random_variants(36, families=("rnnlm",))) == 36  # every rnnlm size combination
    with pytest.raises(ValueError, match="rnnlm has no more distinct sizes"):
        random_variants(37, families=("rnnlm",))


def test_export_hlo_round_trips_and_other_formats_are_refused(tmp_path: Path) -> None:
    import graph_ir

    path = export_workload("rnnlm-2", "inference", tmp_path / "rnnlm.hlo")
    assert len(graph_ir.load(str(path))) == len(build_workload("rnnlm-2", "inference"))
    with pytest.raises(WorkloadError, match=r"cannot be exported as \.onnx \(formats: \.hlo, \.txt\)"):
        export_workload("rnnlm-2", "inference", tmp_path / "rnnlm.onnx")
    assert get_workload("inception-v3").sources.keys() == {"graphdef", "hlo"}


def test_transformer_xl_relative_shift_aligns_distances() -> None:
    from compiler_opt.workloads.transformer_xl import rel_shift

    segment, memory = 3, 2
    # Column c of the unshifted scores holds distance M+T-1-c; after the shift, row i column j
    # must hold distance i+M-j wherever j <= i+M (the causal part).
    unshifted = np.broadcast_to(np.arange(memory + segment - 1, -1, -1.0), (segment, memory + segment))
    shifted = np.asarray(rel_shift(unshifted))
    for i in range(segment):
        for j in range(i + memory + 1):
            assert shifted[i, j] == i + memory - j


def test_wavenet_is_causal() -> None:
    import jax

    from compiler_opt.workloads import wavenet

    sizes = {"layers": 4, "residual_channels": 8, "skip_channels": 8, "classes": 16}
    specs = wavenet.param_specs(**sizes)
    rng = np.random.default_rng(0)
    # numpy, not jax.random: eager jax.random compiles per leaf shape (seconds).
    params = jax.tree.map(lambda s: (0.3 * rng.standard_normal(s.shape)).astype(np.float32), specs)
    samples = rng.integers(0, 16, (1, 32))
    changed = samples.copy()
    changed[0, 20:] = (changed[0, 20:] + 5) % 16
    forward = jax.jit(wavenet.forward, static_argnums=2)  # one compile instead of op-by-op dispatch
    before, after = forward(params, samples, 2), forward(params, changed, 2)
    np.testing.assert_allclose(before[:, :20], after[:, :20], rtol=1e-6)
    assert not np.allclose(before[:, 20], after[:, 20])


@pytest.mark.slow
def test_inception_v3_exports_graphdef_and_hlo(tmp_path: Path) -> None:
    import graph_ir

    pb = export_workload("inception-v3", "inference", tmp_path / "inception.pb")
    assert len(graph_ir.load(str(pb))) == len(build_workload("inception-v3", "inference"))
    hlo = export_workload("inception-v3", "inference", tmp_path / "inception.hlo")
    graph = graph_ir.load(str(hlo))
    graph.verify()
    assert any(node.op_type == "convolution" for node in graph)


@pytest.mark.slow
def test_densenet_workload_is_onnx_inference() -> None:
    graph = build_workload("densenet-121", "inference", image_size=64)
    graph.verify()
    assert sum(node.op_type == "Conv" for node in graph) == 120
    result, bound = _simulate(graph)
    assert bound <= result.step_time_s


def test_paper_sizes_build_the_larger_model() -> None:
    workload = get_workload("rnnlm-2")
    assert workload.sizes(paper=True) == {"layers": 2, "hidden": 2048, "vocab": 10000, "steps": 40, "batch": 64}
    assert workload.sizes({"steps": 10}, paper=True)["steps"] == 10
    small, paper = build_workload("rnnlm-2", "inference"), build_workload("rnnlm-2", "inference", paper=True)
    assert len(paper) > 4 * len(small)  # 40 unrolled steps instead of 8
    shapes = {tuple(v.type.shape) for node in paper if node.op_type == "dot" for v in node.outputs}
    assert (64, 4 * 2048) in shapes  # the LSTM gates of a 2048-unit layer
