"""The basic passes on XLA HLO graphs: results must still compile and compute the same values."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jaxlib")
pytest.importorskip("tensorflow", reason="the HLO proto schema ships with the TensorFlow wheel")

import passes  # noqa: E402
from graph_ir.io.hlo_export import export_hlo_proto, export_hlo_text  # noqa: E402
from graph_ir.io.hlo_import import import_hlo_text  # noqa: E402


def _run(graph, *args):
    """Compile and run an IR graph through XLA on the CPU (HLO proto -> StableHLO -> executable)."""
    from graph_ir.io.xla_bridge import run_hlo_module

    return run_hlo_module(export_hlo_proto(graph), *args)


def test_cse_keeps_same_op_same_input_with_different_result_shapes():
    # broadcast(a) to two shapes: same opcode, operand and attributes, different results.
    text = """HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b1 = f32[2,3] broadcast(a), dimensions={}
  b2 = f32[4] broadcast(a), dimensions={}
  b3 = f32[2,3] broadcast(a), dimensions={}
  total = f32[2,3] add(b1, b3)
  ROOT out = (f32[2,3], f32[4]) tuple(total, b2)
}
"""
    graph = import_hlo_text(text)
    result = passes.run_pipeline(graph, "cse", verify_each=True)
    names = [n.name for n in result.graph]
    assert "b2" in names and sum(n in names for n in ("b1", "b3")) == 1
    import_hlo_text(export_hlo_text(result.graph)).verify()  # XLA's verifier accepts the result


def test_cse_does_not_merge_elided_constants():
    text = """HloModule m
ENTRY e {
  c1 = f32[8] constant({...})
  c2 = f32[8] constant({...})
  ROOT r = f32[8] add(c1, c2)
}
"""
    graph = import_hlo_text(text)
    result = passes.run_pipeline(graph, "cse")
    assert {n.name for n in result.graph} == {"c1", "c2", "r"}


def test_dce_cse_on_a_jax_function_keep_its_outputs():
    import jax
    import jax.numpy as jnp

    def fn(x, w):
        a = jnp.tanh(x @ w)
        b = jnp.tanh(x @ w)  # a duplicate for CSE
        unused = jnp.exp(x) * 3.0  # dead code for DCE  # noqa: F841
        return a + b, jnp.sum(a * b)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    graph = import_hlo_text(jax.jit(fn).lower(x, w).as_text(dialect="hlo"))
    before = _run(graph, x, w)
    count = sum(1 for _ in graph.all_nodes())
    result = passes.run_pipeline(graph, "dce,cse,dce", verify_each=True)
    assert sum(1 for _ in result.graph.all_nodes()) <= count
    after = _run(result.graph, x, w)
    for got, expected in zip(after, before):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
