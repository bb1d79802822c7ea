"""StableHLO import: the real files in shared/testdata, JAX-lowered modules, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jaxlib")

from graph_ir.errors import CompilerOptError, EmptyModelError, UnsupportedOpError  # noqa: E402
from graph_ir.io.stablehlo_import import import_stablehlo_text, load_stablehlo  # noqa: E402
from graph_ir.io.stablehlo_quant import hide_quant_types  # noqa: E402
from graph_ir.io.xla_bridge import HloSyntaxError  # noqa: E402
from graph_ir.op_kinds import OpKind  # noqa: E402
from graph_ir.types import TensorType, TupleType  # noqa: E402

TESTDATA = Path(__file__).resolve().parents[3].parent / "shared" / "testdata" / "external" / "stablehlo"


def _ops_in_source(module) -> int:
    """Ops in an MLIR module, counted by walking it (terminators and func.func excluded)."""
    count = 0

    def walk(op):
        nonlocal count
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    if inner.name not in ("func.return", "stablehlo.return", "func.func", "builtin.module"):
                        count += 1
                    walk(inner)

    walk(module.operation)
    return count


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="shared/testdata is not beside this checkout")
def test_every_testdata_file_imports_or_fails_clearly():
    from jaxlib.mlir import ir

    from graph_ir.io.xla_bridge import mlir_context

    files = sorted(TESTDATA.glob("*.mlir"))
    assert len(files) >= 40
    failures = {}
    for path in files:
        try:
            graph = load_stablehlo(path)
        except CompilerOptError as err:
            assert str(path) in str(err)
            failures[path.name] = type(err)
            continue
        graph.verify()
        context = mlir_context()
        context.allow_unregistered_dialects = True  # StableHLO's `check` test dialect
        with context:
            module = ir.Module.parse(hide_quant_types(path.read_text())[0])
        imported = sum(1 for _ in graph.all_nodes()) + sum(sum(1 for _ in f.graph.all_nodes()) for f in graph.functions.values())
        assert imported == _ops_in_source(module), path.name
    # Quantized modules (no `quant` dialect in jaxlib) and multi-module interpreter tests import too.
    assert not failures, failures


def test_jax_lowered_module_with_regions():
    import jax
    import jax.numpy as jnp

    def fn(x):
        def body(i, carry):
            return carry * 2.0 + jnp.sum(x)

        y = jax.lax.fori_loop(0, 3, body, x)
        return jax.lax.cond(jnp.sum(y) > 0, lambda v: v + 1.0, lambda v: v - 1.0, y), jnp.max(y, axis=0)

    text = jax.jit(fn).lower(np.ones((4, 3), np.float32)).as_text()
    graph = import_stablehlo_text(text)
    graph.verify()
    kinds = {n.kind for n in graph.all_nodes()}
    assert OpKind.LOOP in kinds and OpKind.IF in kinds and OpKind.REDUCE in kinds
    loop = next(n for n in graph.all_nodes() if n.kind is OpKind.LOOP)
    regions = loop.attrs["regions"].value
    assert len(regions) == 2  # cond, body
    assert [v.type for v in graph.outputs] == [TensorType(v.dtype, v.shape) for v in graph.outputs]
    assert graph.outputs[0].shape == (4, 3) and graph.outputs[1].shape == (3,)


def test_constants_dynamic_dims_and_tuples():
    text = """
func.func @main(%arg0: tensor<?x3xf32>, %arg1: tuple<tensor<f32>, tensor<i32>>) -> tensor<?x3xf32> {
  %c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %b = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
  %e = stablehlo.get_tuple_element %arg1[0] : (tuple<tensor<f32>, tensor<i32>>) -> tensor<f32>
  %r = "stablehlo.add"(%arg0, %arg0) : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
"""
    graph = import_stablehlo_text(text)
    graph.verify()
    assert graph.inputs[0].shape == (None, 3)
    assert isinstance(graph.inputs[1].type, TupleType)
    constant = next(n for n in graph if n.op_type == "stablehlo.constant")
    np.testing.assert_array_equal(constant.attr("value").numpy(), [1.0, 2.0, 3.0])
    broadcast = next(n for n in graph if n.kind is OpKind.BROADCAST)
    assert broadcast.attr("broadcast_dimensions") == (1,)


def test_unknown_dialect_and_bad_text(tmp_path):
    unknown = tmp_path / "unknown.mlir"
    unknown.write_text('func.func @main() {\n  "mydialect.frob"() : () -> ()\n  return\n}\n')
    with pytest.raises(UnsupportedOpError, match=r"unknown\.mlir:2:\d+: unknown MLIR dialect"):
        load_stablehlo(unknown)
    broken = tmp_path / "broken.mlir"
    broken.write_text("func.func @main(%a: tensor<f32>) -> tensor<f32> {\n  %0 = stablehlo.add %a : tensor<f32>\n}\n")
    with pytest.raises(HloSyntaxError, match=r"broken\.mlir:2:\d+"):
        load_stablehlo(broken)
    wrong_shape = tmp_path / "shape.mlir"
    wrong_shape.write_text(
        "func.func @main(%a: tensor<2xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.add %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<3xf32>\n"
        "  return %0 : tensor<3xf32>\n}\n"
    )
    with pytest.raises(HloSyntaxError, match=r"shape\.mlir:2:\d+"):
        load_stablehlo(wrong_shape)
    empty = tmp_path / "empty.mlir"
    empty.write_text("")
    with pytest.raises(EmptyModelError):
        load_stablehlo(empty)
