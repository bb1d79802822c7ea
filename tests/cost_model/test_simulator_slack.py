"""Slack of a simulated step (cost_model/simulator/slack.py) against hand-computed timelines."""

from __future__ import annotations

import numpy as np
import pytest

import cost_model.simulator.slack as slack_module
from cost_model.simulator import SimulationProblem, simulate
from cost_model.simulator.slack import node_slack, task_slack
from tests.cost_model.test_simulator import RELU, US, decide, diamond, topology


def _by_name(result, values: np.ndarray) -> dict[str, float]:
    return {node.name: float(values[i]) for i, node in enumerate(result.problem.nodes)}


def test_diamond_on_two_devices() -> None:
    # A [0, 9] d0; B [9, 18] d0; A -> C crosses [9, 14]; C [14, 23] d1; C -> D crosses [23, 28];
    # D [28, 41] d0 (test_simulator's timeline). A, both hops, C and D are the critical path;
    # B could end as late as D's start (28 us, D follows it on d0): 10 us of slack.
    problem = SimulationProblem.from_graph(diamond().graph, topology(2))
    result = simulate(problem, decide(problem, [0, 0, 1, 0]))
    got = _by_name(result, node_slack(result))
    step = 41 * US
    assert got == pytest.approx({"A": 0.0, "B": 10 * US / step, "C": 0.0, "D": 0.0}, abs=1e-12)
    tasks = task_slack(result)
    assert tasks.shape == (result.tasks.num_tasks,)
    assert np.all(tasks >= -1e-15)
    assert np.sum(np.abs(tasks) < 1e-15) == 5  # A, the two hops, C, D


def test_one_device_chain_is_all_critical_and_a_side_branch_is_not() -> None:
    # On one device everything is serial: the queue order makes every task critical.
    problem = SimulationProblem.from_graph(diamond().graph, topology(1))
    result = simulate(problem, decide(problem, [0, 0, 0, 0]))
    assert node_slack(result) == pytest.approx(np.zeros(4), abs=1e-12)
    # On two devices with C's branch short enough, C's slack is what D's wait leaves it.
    problem2 = SimulationProblem.from_graph(diamond().graph, topology(2))
    result2 = simulate(problem2, decide(problem2, [0, 1, 0, 0]))  # B moves instead of C
    got = _by_name(result2, node_slack(result2) * result2.step_time_s)
    assert got["A"] == pytest.approx(0.0, abs=1e-15) and got["D"] == pytest.approx(0.0, abs=1e-15)
    assert got["C"] > RELU / 2  # C [9, 18] on d0 waits for nothing; D waits for B's round trip


def test_python_and_compiled_kernels_agree(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("numba")
    from compiler_opt.workloads.synthetic import random_onnx_dag
    from cost_model.devices.loader import load_topology
    from graph_ir.io.onnx_import import import_onnx

    problem = SimulationProblem.from_graph(import_onnx(random_onnx_dag(150, seed=5)), load_topology("4xV100"))
    rng = np.random.default_rng(0)
    result = simulate(problem, decide(problem, rng.integers(0, 4, problem.num_nodes).tolist()))
    monkeypatch.setattr(slack_module, "_kernel", ("numba", slack_module._compiled()))
    compiled = task_slack(result)
    monkeypatch.setattr(slack_module, "_kernel", ("python", slack_module._python_slack))
    python = task_slack(result)
    np.testing.assert_array_equal(compiled, python)
    assert compiled.min() >= -1e-12 * result.step_time_s and (np.abs(compiled) < 1e-15).any()
