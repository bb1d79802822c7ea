"""`fuse` groupings (random size limits) and random placements, in either order, on JAX functions' HLO: the module
XLA compiles from the exported fusions computes what the JAX function does (the HLO half of
tests/graph_ir/test_fusion_placement_compose.py; TensorFlow is imported at collection, as in
test_apply_decisions_hlo.py, because importing it after onnxruntime ran aborts the process)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jaxlib")
pytest.importorskip("tensorflow", reason="the HLO proto schema ships with the TensorFlow wheel")

import graph_ir  # noqa: E402
from cost_model.decisions import Decisions  # noqa: E402
from cost_model.devices import load_topology  # noqa: E402
from cost_model.simulator import SimulationProblem, simulate  # noqa: E402
from passes.fusion import Fuse  # noqa: E402

TOPOLOGY = "4xV100"
RTOL, ATOL = 1e-5, 1e-5  # the same XLA CPU compiler on both sides


def _random_placement(graph: graph_ir.Graph, rng: random.Random, devices: int) -> None:
    for node in graph:
        node.device = f"gpu{rng.randrange(devices)}"


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), fuse_first=st.booleans(), case=st.sampled_from(["mlp", "convnet"]))
def test_random_fusion_and_placement_compose_on_jax_hlo(seed, fuse_first, case):
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    graph, args, expected = _jax_case(case)
    rng = random.Random(seed)
    # XLA-legal groupings from the `fuse` pass (its size limit drawn at random): arbitrary random
    # groupings can make the HLO exporter write a fusion XLA:CPU aborts on ("Check failed:
    # has_layout()", found with this test, independent of placement), which kills the process.
    steps = [lambda: Fuse(max_nodes=rng.choice([2, 4, 8, 32]))(graph), lambda: _random_placement(graph, rng, 3)]
    for step in steps if fuse_first else steps[::-1]:
        step()
    _drop_unfusable_hlo(graph)
    topology = load_topology(TOPOLOGY)
    simulate(SimulationProblem.from_graph(graph, topology), Decisions.from_graph(graph, topology))
    got = run_hlo_module(export_hlo_proto(graph, materialize_fusions=True), *args)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


_JAX_CACHE: dict[str, tuple[str, list[np.ndarray], list[np.ndarray]]] = {}



def _jax_case(name: str):
    import jax
    import jax.numpy as jnp

    from graph_ir.io.hlo_import import import_hlo_text

    if name not in _JAX_CACHE:

        def mlp(x, w1, b1, w2):
            h = jax.nn.relu(x @ w1 + b1)
            return jnp.sum(jnp.tanh(h @ w2) * 2.0, axis=1), jnp.max(h)

        def convnet(x, k1, w):
            y = jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            y = jnp.tanh(jax.nn.relu(y + 0.1)) * 0.5
            return jnp.mean(y, axis=(1, 2)) @ w

        fn, shapes = {"mlp": (mlp, [(4, 8), (8, 16), (16,), (16, 8)]), "convnet": (convnet, [(2, 8, 8, 3), (3, 3, 3, 4), (4, 5)])}[name]
        rng = np.random.default_rng(0)
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        expected = [np.asarray(e) for e in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
        _JAX_CACHE[name] = (text, args, expected)
    text, args, expected = _JAX_CACHE[name]
    return import_hlo_text(text), args, expected


def _drop_unfusable_hlo(graph: graph_ir.Graph) -> None:
    """XLA refuses some instructions inside a fusion (parameters, tuples...); the IR's fusion
    rules already keep those out, this only guards the random grouping's corners."""
    from graph_ir.io.hlo_export import _NOT_FUSIBLE  # the exporter's own list

    for node in graph:
        if node.op_type in _NOT_FUSIBLE:
            node.fusion_group = None
