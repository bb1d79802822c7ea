"""The `go` pass in pipeline strings, its registration, and zero-shot on a large generated graph."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import compiler_opt.rl.go_pass  # noqa: F401 - registers `go` (the shared venv predates its entry point)
from compiler_opt.policy import GoPolicy, PolicyConfig, policy_inputs, save_checkpoint
from compiler_opt.workloads.synthetic import random_onnx_dag
from cost_model.decisions import Decisions
from cost_model.devices.loader import load_topology
from cost_model.simulator import SimulationProblem
from graph_ir.io.onnx_import import import_onnx
from passes import run_pipeline
from passes.infra.base import PassError
from passes.infra.registry import get_pass_class

SMALL = PolicyConfig(hidden=16, heads=2, segment=16, sage_layers=1, attention_layers=1)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(tmp_path_factory.mktemp("go") / "policy.pt", GoPolicy(SMALL), command="test")


def test_go_is_registered_and_declared_as_an_entry_point() -> None:
    from compiler_opt.rl.go_pass import GoPass

    assert get_pass_class("go") is GoPass
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert 'go = "compiler_opt.rl.go_pass:GoPass"' in pyproject


@pytest.mark.parametrize("mode", ["zero-shot", "fine-tune", "one"])
def test_go_runs_in_a_pipeline_string(mode: str, checkpoint: Path) -> None:
    graph = import_onnx(random_onnx_dag(60, seed=1))
    result = run_pipeline(graph, 'go{mode=%s,checkpoint="%s",budget=2,samples=2,devices=2xV100}' % (mode, checkpoint))
    assert result.modified
    graph.verify()
    topology = load_topology("2xV100")
    decisions = Decisions.from_graph(graph, topology)
    gpus = {i for i, d in enumerate(topology.devices) if d.kind != "cpu"}
    assert set(np.unique(decisions.device).tolist()) <= gpus
    assert all(node.device is not None and node.priority is not None for node in graph)


@pytest.mark.parametrize("decodings", ["all", "off"])
def test_go_decodings_option_picks_zero_shots_candidates(decodings: str, checkpoint: Path) -> None:
    from compiler_opt.policy import load_checkpoint
    from compiler_opt.rl import GraphEnvironment, zero_shot
    from cost_model.costs import Target

    target = Target.resolve(devices="4xV100")
    graph = import_onnx(random_onnx_dag(80, seed=3))
    env = GraphEnvironment(graph.name or "graph", graph, target.topology, problem=target.problem(graph))
    policy, _ = load_checkpoint(checkpoint)
    extra = {} if decodings == "all" else {"smoothing": (), "coarsen": False, "partition": ()}
    expected = zero_shot(policy, env, 0, seed=0, **extra).decisions.device
    run_pipeline(graph, 'go{mode=zero-shot,budget=0,checkpoint="%s",decodings=%s}' % (checkpoint, decodings), target=target)
    written = Decisions.from_graph(graph, target.topology, nodes=env.problem.nodes).device
    assert np.array_equal(written, expected)


def test_go_zero_shot_polish_seconds_reach_the_written_answer(checkpoint: Path) -> None:
    from cost_model.costs import Target
    from cost_model.simulator import simulate

    target = Target.resolve(devices="4xV100")
    steps = {}
    for seconds in (0, 0.5):
        graph = import_onnx(random_onnx_dag(80, seed=3))
        run_pipeline(graph, 'go{mode=zero-shot,budget=2,checkpoint="%s",decodings=off,polish-seconds=%g}' % (checkpoint, seconds), target=target)
        graph.verify()
        problem = target.problem(graph)
        steps[seconds] = simulate(problem, Decisions.from_graph(graph, target.topology, nodes=problem.nodes)).step_time_s
    assert steps[0.5] < steps[0]  # the untrained policy's own answer (no decodings) leaves moves for the search


def test_go_rejects_bad_options() -> None:
    with pytest.raises(PassError, match="polish_seconds"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{polish-seconds=-1}")
    with pytest.raises(PassError, match="seed_seconds"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{seed-seconds=-1}")
    with pytest.raises(PassError, match="seed_seconds"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{mode=one,seed-seconds=3}")
    with pytest.raises(PassError, match="polish_seconds"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{mode=fine-tune,polish-seconds=2}")
    with pytest.raises(PassError, match="decodings"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{decodings=some}")
    with pytest.raises(PassError, match="mode"):
        run_pipeline(import_onnx(random_onnx_dag(5, seed=0)), "go{mode=sometimes}")


def test_zero_shot_on_a_20k_node_graph_stays_within_memory() -> None:
    graph = import_onnx(random_onnx_dag(20_000, seed=0))
    problem = SimulationProblem.from_graph(graph, load_topology("8xV100"))
    torch.manual_seed(0)
    policy = GoPolicy().eval()  # the shipped size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    began = time.perf_counter()
    sampled = policy.sample(policy_inputs(problem), 1, greedy=True)
    seconds = time.perf_counter() - began
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert sampled.actions.shape == (policy.config.iterations, 1, 20_000, 3)
    assert grown_mib < 2048, f"greedy inference on 20k nodes grew the peak RSS by {grown_mib:.0f} MiB"
    assert seconds < 60, f"greedy inference on 20k nodes took {seconds:.1f} s"


def test_the_shipped_checkpoint_works_zero_shot() -> None:
    from compiler_opt.policy import DEFAULT_CHECKPOINT, load_checkpoint

    assert DEFAULT_CHECKPOINT.is_file() and DEFAULT_CHECKPOINT.stat().st_size < 8 * 2**20
    _, meta = load_checkpoint()
    # Imitation pretraining (rl/imitation.py) from the PPO-pretrained checkpoint before it
    # (WORKSPACE.md "Pretraining record"), on the training split only.
    assert meta["command"].startswith("compiler-opt train --mode imitate") and meta["train_config"]["mode"] == "imitate"
    held_out = {"inception-v3", "amoebanet", "rnnlm-8", "gnmt-8"}
    trained_on = {w.split(":")[0] for w in meta["train_config"]["workloads"]}
    imitated = {label.split(":")[0].split("@")[0] for label in meta["extra"]["imitation"]}
    assert trained_on and imitated == trained_on and not trained_on & held_out
    graph = import_onnx(random_onnx_dag(40, seed=9))
    run_pipeline(graph, "go{mode=zero-shot,budget=1,devices=4xV100}")
    graph.verify()
    assert all(node.device is not None for node in graph)


def test_go_takes_the_pipeline_target_and_refuses_a_contradicting_option() -> None:
    import graph_ir
    from cost_model.costs import Target
    from passes.infra.context import TargetConflictError

    graph = graph_ir.load("examples/small_cnn.onnx")
    run_pipeline(graph, "go{mode=zero-shot,budget=0}", target=Target.resolve(devices="2xV100"))
    assert {n.device for n in graph} <= {"gpu0", "gpu1"}
    with pytest.raises(TargetConflictError, match="pass 'go' option devices=8xA100 contradicts the target"):
        run_pipeline(graph, "go{mode=zero-shot,budget=0,devices=8xA100}", target=Target.resolve(devices="2xV100"))
