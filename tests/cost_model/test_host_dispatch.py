"""Host-side launch serialization: the closed form against a step-by-step replay, and which
kernels of an eager graph the framework dispatches itself."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.host_dispatch import eager_host_ops, host_bound_step


def _replay(durations: np.ndarray, host_ops: np.ndarray, t_host: float) -> float:
    issued = end = 0.0
    for d, ops in zip(durations, host_ops):
        issued += ops * t_host
        end = max(end, issued) + d
    return end


def test_closed_form_equals_replay() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 60))
        durations = rng.exponential(20e-6, n) * rng.choice([0.1, 1.0, 10.0], n)
        ops = rng.integers(0, 3, n)
        t_host = float(rng.choice([0.0, 5e-6, 30e-6]))
        assert host_bound_step(durations, ops, t_host) == pytest.approx(_replay(durations, ops, t_host), rel=1e-12)


def test_bounds() -> None:
    d = np.full(100, 10e-6)
    ops = np.ones(100)
    assert host_bound_step(d, ops, 0.0) == pytest.approx(d.sum())
    assert host_bound_step(d, ops, 1e-6) == pytest.approx(d.sum() + 1e-6)  # GPU-bound: only the first issue shows
    assert host_bound_step(d, ops, 50e-6) == pytest.approx(100 * 50e-6 + 10e-6)  # host-bound
    assert host_bound_step(d, np.zeros(100), 50e-6) == pytest.approx(d.sum())  # library-launched
    with pytest.raises(ValueError):
        host_bound_step(d, ops[:5], 1e-6)
    with pytest.raises(ValueError):
        host_bound_step(d, ops, -1.0)


def _eager_problem(fn, *shapes):
    import jax
    import jax.numpy as jnp

    from cost_model.decisions import Decisions
    from cost_model.devices import load_topology
    from cost_model.simulator import SimulationProblem
    from cost_model.simulator.tasks import kernels
    from graph_ir.io.hlo_import import import_hlo_text
    from passes.fusion.eager import apply_eager_fusion

    graph = import_hlo_text(jax.jit(fn).lower(*[jnp.zeros(s, jnp.float32) for s in shapes]).as_text(dialect="hlo"))
    apply_eager_fusion(graph)
    topology = load_topology("1xV100")
    gpu = next(i for i, d in enumerate(topology.devices) if d.kind == "gpu")
    problem = SimulationProblem.from_graph(graph, topology)
    decisions = Decisions.from_graph(graph, topology, default_device=gpu, nodes=problem.nodes)
    kernel_of_node, first, _ = kernels(problem, np.asarray(decisions.device, dtype=np.int64), np.asarray(decisions.fusion_group))
    return problem, kernel_of_node, first


def test_recurrence_is_one_library_call_per_pass() -> None:
    """An RNN's per-step GEMMs and gate kernels are launched by one cuDNN call (per weight and
    pass); a feed-forward stack dispatches every kernel."""
    import jax
    import jax.numpy as jnp

    def rnn_loss(w, x):
        h = jnp.zeros((8, 16))
        for t in range(6):
            h = jnp.tanh(x[t] + h @ w)
        return h.sum()

    problem, kernel_of_node, first = _eager_problem(jax.grad(rnn_loss), (16, 16), (6, 8, 16))
    works = np.ones(first.size, dtype=bool)
    ops = eager_host_ops(problem, kernel_of_node, first, works)
    recurrent = {int(kernel_of_node[i]) for i, n in enumerate(problem.nodes) if n.meta.get("eager_recurrent_gemm")}
    assert len(recurrent) >= 10  # forward and backward h @ W per step
    assert all(ops[k] <= 1 for k in recurrent) and sum(ops[k] for k in recurrent) == 2  # one call per pass
    assert ops.sum() < first.size - len(recurrent)

    def mlp(w1, w2, x):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2)

    problem, kernel_of_node, first = _eager_problem(mlp, (16, 16), (16, 16), (8, 16))
    works = np.ones(first.size, dtype=bool)
    assert eager_host_ops(problem, kernel_of_node, first, works).tolist() == [1] * first.size


def test_sync_point_adds_the_optimizer_phase() -> None:
    """After a host sync the GPU queue is empty: a host-bound optimizer phase adds to a GPU-bound
    backward instead of hiding under it."""
    from cost_model.host_dispatch import optimizer_last

    d = np.concatenate([np.full(10, 1e-3), np.full(50, 1e-6)])  # long backward kernels, tiny updates
    ops = np.ones(60)
    overlapped = host_bound_step(d, ops, 20e-6)
    synced = host_bound_step(d, ops, 20e-6, sync_at=10)
    assert overlapped == pytest.approx(20e-6 + 10e-3 + 50e-6)  # the host ran ahead: GPU-bound
    assert synced > overlapped + 0.9e-3
    assert synced == pytest.approx(host_bound_step(d[:10], ops[:10], 20e-6) + host_bound_step(d[10:], ops[10:], 20e-6))
    assert synced == pytest.approx(20e-6 + 10e-3 + 50 * 20e-6 + 1e-6)
    order, sync = optimizer_last(np.array([3, 0, 2, 1]), np.array([True, False, True, False]))
    assert order.tolist() == [3, 1, 0, 2] and sync == 2
