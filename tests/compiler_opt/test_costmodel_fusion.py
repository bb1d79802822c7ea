"""Random legal fusion configurations, run for real through XLA, as layout-form dataset files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from cost_model.decisions import node_order  # noqa: E402
from cost_model.devices import DeviceSpec, Topology  # noqa: E402
from compiler_opt.costmodel.fusion_collect import collect_fusion_dataset, random_fusion  # noqa: E402
from compiler_opt.costmodel.fusion_graphs import fusion_graphs  # noqa: E402
from cost_model.profiling.calibration import kernel_groups  # noqa: E402
from cost_model.simulator import SimulationProblem, simulate  # noqa: E402


@pytest.fixture(scope="module")
def mlp():  # type: ignore[no-untyped-def]
    return fusion_graphs((1,))["mlp@1"]


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
