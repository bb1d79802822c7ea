"""GO on the profiled placement workloads: inputs, masks, repaired decisions, the paper's objective."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from compiler_opt.policy import GoPolicy, PolicyConfig
from compiler_opt.rl import TrainConfig, run_training, zero_shot
from compiler_opt.rl.profiled_env import ProfiledEnvironment
from cost_model.profiled import load_profiled_workload
from passes.placement.profiled import place_profiled

TINY = PolicyConfig(hidden=16, heads=2, segment=8, sage_layers=1, attention_layers=1)


@pytest.fixture()
def bert(shared_testdata: Path) -> Path:
    path = shared_testdata / "placement" / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    if not path.is_file():
        pytest.skip(f"missing {path}")
    return path


def test_inputs_masks_and_objective_match_the_classical_context(bert: Path) -> None:
    torch.set_num_threads(1)
    workload = load_profiled_workload(bert)
    env = ProfiledEnvironment("bert24", workload)
    inputs, ctx = env.inputs, env.context
    assert inputs.num_nodes == workload.num_nodes and inputs.num_devices == workload.accelerators + 1
    assert torch.isfinite(inputs.node_x).all() and inputs.device_x[0, 7] == 1  # device 0 is the CPU
    mask = inputs.device_mask.numpy()
    assert (mask[:, 1:] == ctx.supported[:, None]).all() and (mask[:, 0] == ~ctx.supported).all()
    # The human-expert reference scores what place_profiled reports for it.
    assert env.reference_step_s == pytest.approx(place_profiled(workload, "human-expert").value)
    # A sampled placement is repaired to the file's constraints before scoring.
    torch.manual_seed(0)
    found = zero_shot(GoPolicy(TINY), env, 4, seed=0)
    assert ctx.violations(found.decisions) == []
    assert found.score.step_time_s == pytest.approx(ctx._objective(found.decisions)[0])
    assert found.score.step_time_s >= ctx.lower_bound() * (1 - 1e-9)


def test_fine_tune_runs_on_a_profiled_workload(bert: Path) -> None:
    torch.set_num_threads(1)
    env = ProfiledEnvironment("bert24", load_profiled_workload(bert))
    torch.manual_seed(0)
    config = TrainConfig(mode="go-one", workloads=["bert24"], devices=["6acc"], iterations=3, samples_per_graph=4, seed=0)
    result = run_training(config, envs=[env], policy=GoPolicy(TINY), progress=False, save=False)
    best = result.best[env.label]
    assert len(result.history) == 3 and all(np.isfinite(h["reward_mean"]) for h in result.history)
    assert env.context.violations(best.decisions) == [] and np.isfinite(best.score.step_time_s)
