"""Random legal fusion configurations, run for real through XLA, as layout-form dataset files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from cost_model.decisions import node_order  # noqa: E402
from cost_model.devices import DeviceSpec, Topology  # noqa: E402
from compiler_opt.costmodel.fusion_collect import collect_fusion_dataset, random_fusion, scale_to_seconds  # noqa: E402
from compiler_opt.costmodel.fusion_graphs import (  # noqa: E402
    EXTRA_PROGRAMS, FIFTH_KIND_PROGRAMS, FIRST_PROGRAMS, FOURTH_KIND_PROGRAMS, GROUPED_PROGRAMS, SECOND_KIND_PROGRAMS, THIRD_KIND_PROGRAMS, fusion_graph, fusion_graph_names,
    fusion_graphs)
from cost_model.profiling.calibration import kernel_groups  # noqa: E402
from cost_model.simulator import SimulationProblem, simulate  # noqa: E402


@pytest.fixture(scope="module")
def mlp():  # type: ignore[no-untyped-def]
    return fusion_graphs((1,), names={"mlp@1"})["mlp@1"]


def test_random_fusions_are_legal_and_schedulable(mlp) -> None:  # type: ignore[no-untyped-def]
    nodes = node_order(mlp)
    problem = SimulationProblem.from_graph(mlp, Topology("one", [DeviceSpec("cpu0", "cpu", {"fp32": 1e11}, mem_bandwidth=1e10, memory_bytes=1e10, launch_overhead_s=1e-5)]))
    rng = np.random.default_rng(0)
    before = [n.fusion_group for n in nodes]
    sizes = set()
    for _ in range(6):
        decisions = random_fusion(mlp, nodes, rng)
        assert [n.fusion_group for n in nodes] == before  # the graph is left as it was
        kernels, _ = kernel_groups(decisions)
        position = {i: k for k, members in enumerate(kernels) for i in members}
        for i, node in enumerate(nodes):  # producers' kernels come first in the schedule
            for value in node.inputs:
                if value is not None and value.producer in nodes:
                    assert position[nodes.index(value.producer)] <= position[i]
        assert simulate(problem, decisions).step_time_s > 0
        sizes.add(len(kernels))
    assert len(sizes) > 1  # the draws differ


@pytest.mark.slow
def test_collect_writes_layout_form_files_and_resumes(mlp, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.profiling.cache import ProfileCache

    with ProfileCache(tmp_path / "c.sqlite") as cache:
        summary = collect_fusion_dataset({"mlp@1": mlp}, tmp_path / "f", cache=cache, configs=4, repeats=2, progress=False)
        rows = len(cache)
        collect_fusion_dataset({"mlp@1": mlp}, tmp_path / "f", cache=cache, configs=4, repeats=2, progress=False)
        assert len(cache) == rows  # nothing measured twice
    assert summary["kernels"] == 1
    (record,) = load_dir(tmp_path / "f")
    assert record.layout_form and record.num_configs == 4 and (record.config_runtime > 0).all()
    assert record.node_config_feat.shape == (4, len(node_order(mlp)), 4)
    assert len(record.meta["roofline_s"]) == 4


def test_graphs_by_name_without_building_the_rest(mlp) -> None:  # type: ignore[no-untyped-def]
    names = fusion_graph_names((1, 2))
    assert len(names) == 124 and len(set(names)) == 124 and names[-2:] == ["mlp_grad@1", "mlp_grad@2"] and "mlp@1" in names and "norm_gelu@2" in names and "bcast_chain@2" in names
    first = fusion_graph_names((1, 2), programs=FIRST_PROGRAMS)  # fusion_s8's 30 graphs, in the order they were collected
    assert len(first) == 30 and first[:2] == ["swiglu@1", "swiglu@2"] and first[-1] == "norm_gelu@2"
    extra = fusion_graph_names((1, 2), programs=EXTRA_PROGRAMS)  # fusion_s10_new's 28
    assert len(extra) == 28 and extra == names[30:58] and fusion_graph_names((1, 2), programs=GROUPED_PROGRAMS) == names[58:66]
    assert fusion_graph_names((1, 2), programs=SECOND_KIND_PROGRAMS) == names[66:74]  # the twelfth session's, after the 66 of fusion_s12
    assert fusion_graph_names((1, 2), programs=THIRD_KIND_PROGRAMS) == names[74:82]  # the thirteenth session's, after fusion_s12c's 74
    assert fusion_graph_names((1, 2), programs=FOURTH_KIND_PROGRAMS) == names[82:104]  # the seventeenth session's, after fusion_s13's 82
    assert fusion_graph_names((1, 2), programs=FIFTH_KIND_PROGRAMS) == names[104:]  # the twenty-first session's
    assert [n.op_type for n in node_order(fusion_graph("mlp@1"))] == [n.op_type for n in node_order(mlp)]  # the builder a spawned process calls
    with pytest.raises(KeyError, match="no fusion program"):
        fusion_graph("nope@1")


def test_reference_ratios_become_seconds_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.tpugraphs import KernelRecord, load_npz, save_npz

    ratios = np.array([1.5, 0.5, 2.0])
    record = KernelRecord(np.zeros((2, 3), np.float32), np.zeros(2, np.int32), np.zeros((1, 2), np.int64), ratios, np.full(3, 0.5),
                          node_config_ids=np.arange(2), node_config_feat=np.zeros((3, 2, 4), np.float32), config_text=["a", "b", "c"],
                          meta={"reference": {"graph": "mlp@1", "scale": None}, "retest": [[1.5, 1.6]], "config_runtime_median": [1.5, 0.5, 2.0]})
    path = save_npz(record, tmp_path / "g.npz")
    scale_to_seconds(path, 2e-4)
    scale_to_seconds(path, 2e-4)  # a second call leaves a scaled file alone
    back = load_npz(path)
    np.testing.assert_allclose(back.config_runtime, ratios * 2e-4)
    np.testing.assert_allclose(back.config_runtime_normalizers, np.full(3, 1e-4))
    np.testing.assert_allclose(back.meta["retest"], [[3e-4, 3.2e-4]])
    np.testing.assert_allclose(back.meta["config_runtime_median"], ratios * 2e-4)
    assert back.meta["reference"]["scale"] == 2e-4


@pytest.mark.slow
def test_isolated_collection_with_a_paired_reference_labels_in_seconds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import functools

    from cost_model.learned.tpugraphs import load_dir
    from cost_model.profiling.cache import ProfileCache

    with ProfileCache(tmp_path / "c.sqlite") as cache:
        summary = collect_fusion_dataset({"mlp@1": functools.partial(fusion_graph, "mlp@1")}, tmp_path / "f", cache=cache, configs=3, repeats=3,
                                         retest_fraction=0.5, reference_graph="mlp@1", isolate=True, progress=False)
    assert summary["kernels"] == 1 and summary["machine"]["xla_isolated"] is True
    assert summary["xla_timing"]["child_async_dispatch"] is False  # the spawned process set XLA up for timing
    scale = summary["reference"]["scale_s"]
    assert 1e-6 < scale < 1e-1 and summary["reference"]["per_graph_s"]["mlp@1"] == pytest.approx(scale)  # one graph: its own time
    (record,) = load_dir(tmp_path / "f")
    assert record.meta["reference"]["scale"] == pytest.approx(scale) and record.meta["statistic"] == "median"
    assert record.meta["machine"]["xla_async_dispatch"] is False
    runtime = np.asarray(record.config_runtime)
    # labels are ratios to a fusion of the same graph times its time: seconds of the right order
    assert record.num_configs == 3 and (runtime > 0.2 * scale).all() and (runtime < 5 * scale).all()
    assert len(record.meta["retest"]) == 2 and summary["noise_floor"]["pairs"] == 2


def test_add_conv_times_writes_each_conv_nodes_seconds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`costmodel conv-times`' library call: every file gains node_conv_time (the conv nodes' seconds
    from the timer, 0 elsewhere, an all-zero column for a graph without convs); the labels stay; a
    file whose graph no longer rebuilds the same is refused before anything is written."""
    from compiler_opt.costmodel.fusion_collect import fusion_record
    from compiler_opt.costmodel.fusion_merge import add_conv_times
    from cost_model.decisions import Decisions
    from cost_model.learned.tpugraphs import DatasetError, load_npz, save_npz
    from cost_model.measure.conv_timing import ConvTimer, conv_spec

    def seconds_of(runner) -> float:  # type: ignore[no-untyped-def]
        return runner.seconds

    def fake_runner(spec):  # type: ignore[no-untyped-def]
        return type("R", (), {"seconds": 1e-9 * float(np.prod(spec.lhs_shape)) * spec.feature_group_count})()

    folder = tmp_path / "f"
    folder.mkdir()
    nodes = {}
    for name in ("dw_sep@1", "mlp@1"):
        nodes[name] = node_order(fusion_graph(name))
        configs = [Decisions.default(len(nodes[name])), Decisions.default(len(nodes[name]))]
        configs[1].fusion_group[:] = 0
        save_npz(fusion_record(name, nodes[name], configs, [2e-4, 1e-4], {}), folder / f"{name}.npz")
    summary = add_conv_times(folder, ConvTimer(None, timer=seconds_of, runner=fake_runner))
    assert summary["files"] == 2 and summary["convs"] == summary["measured"] == 2  # dw_sep: a depthwise and a 1x1 conv
    dw = load_npz(folder / "dw_sep@1.npz")
    convs = [i for i, n in enumerate(nodes["dw_sep@1"]) if n.kind.value == "conv"]
    np.testing.assert_allclose(dw.node_conv_time[convs], [fake_runner(conv_spec(nodes["dw_sep@1"][i])).seconds for i in convs])
    assert dw.node_conv_time.sum() == pytest.approx(dw.node_conv_time[convs].sum()) and dw.config_runtime.tolist() == [2e-4, 1e-4]
    assert dw.meta["conv_times"]["backend"] == "xla-conv-alone/batched"
    mlp_record = load_npz(folder / "mlp@1.npz")
    assert mlp_record.node_conv_time is not None and not mlp_record.node_conv_time.any()
    bad = load_npz(folder / "dw_sep@1.npz")
    bad.node_opcode = np.roll(bad.node_opcode, 1)
    bad.node_conv_time = None
    save_npz(bad, folder / "dw_sep@1.npz")
    mlp_record.node_conv_time = None
    save_npz(mlp_record, folder / "mlp@1.npz")
    with pytest.raises(DatasetError, match="cannot time its convs"):
        add_conv_times(folder, ConvTimer(None, timer=seconds_of, runner=fake_runner))
    assert load_npz(folder / "mlp@1.npz").node_conv_time is None  # nothing written
