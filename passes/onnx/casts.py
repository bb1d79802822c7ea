"""`simplify-casts`: CastLike with a typed target becomes Cast; Cast of a lossless Cast skips the
middle type.

- CastLike(x, y) -> Cast(x, to=dtype(y)) when y's element type is known (torch exports write
  CastLike for every Python scalar; `eliminate-noops` then drops the ones to x's own type and
  constant folding the rest when x is constant).
- Cast(Cast(x, T1), T2) -> Cast(x, T2) when every value of x's type is exactly representable in T1
  (numpy's "safe" casting: float widening, integer widening, small integers to floats), so the
  middle cast loses nothing. Narrowing in the middle (f32 -> f16 -> f32) changes values: kept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.attrs import Attr
from graph_ir.core import Node
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import RewriteState, is_onnx, onnx_graphs, replace_with_nodes

if TYPE_CHECKING:
    from graph_ir.dtypes import DType
    from graph_ir.graph import Graph

__all__ = ["SimplifyCasts", "lossless_cast"]

logger = logging.getLogger(__name__)


def lossless_cast(source: DType, target: DType) -> bool:
    """Every value of `source` survives a round trip through `target`."""
    try:
        a, b = source.numpy, target.numpy
    except TypeError:
        return False  # no numpy equivalent: assume lossy
    if a.kind not in "biuf" or b.kind not in "biuf" or a.type.__module__ != "numpy" or b.type.__module__ != "numpy":
        return False  # ml_dtypes' bf16/f8 types: assume lossy
    return bool(np.can_cast(a, b, casting="safe"))


@register_pass
@dataclass(frozen=True)
class SimplifyCasts(Pass):
    """CastLike -> Cast; Cast after a lossless Cast reads the original (module docstring)."""

    name = "simplify-casts"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for node in list(level.nodes):
                if node.graph is None or not is_onnx(node, "Cast", "CastLike") or not node.inputs or node.inputs[0] is None:
                    continue
                x = node.inputs[0]
                if node.op_type == "CastLike":
                    like = node.inputs[1] if len(node.inputs) > 1 else None
                    code = like.dtype.onnx_code if like is not None and like.dtype is not None else None
                    if code is None:
                        continue
                    new = Node("Cast", [x], attrs=[Attr.infer("to", int(code))], name=level.unique_name(node.name or "cast"))
                    replace_with_nodes([node], node.outputs[0], [new], new.outputs[0], state)
                    continue
                inner = x.producer
                if inner is None or inner.graph is not level or not is_onnx(inner, "Cast") or inner.inputs[0] is None:
                    continue
                source, middle = inner.inputs[0].dtype, x.dtype
                if source is None or middle is None or not lossless_cast(source, middle):
                    continue
                new = Node("Cast", [inner.inputs[0]], attrs=[Attr.infer("to", int(node.attr("to")))], name=level.unique_name(node.name or "cast"))
                replace_with_nodes([inner, node], node.outputs[0], [new], new.outputs[0], state)
        return PassResult(graph, state.changes > 0)
