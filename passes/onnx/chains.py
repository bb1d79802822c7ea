"""`fold-chains`: Transpose after Transpose and Reshape after Reshape become one node, and
`fuse-gemm`: MatMul followed by Add of a constant bias becomes Gemm.

- Transpose(Transpose(x, p), q) = Transpose(x, p[q]) (an identity result is left for
  `eliminate-noops`).
- Reshape(Reshape(x, s1), s2) = Reshape(x, s2) when s2 is a constant without 0 entries (a 0 copies
  the *intermediate* dimension; -1 is computed from the element count, which is the same); the
  `allowzero` flags then change nothing (they only say what a 0 entry means), and the result
  keeps the outer one.
- MatMul(A, B) + C -> Gemm(A, B, C) when A and B have rank 2, the MatMul's only reader is the
  Add, C broadcasts unidirectionally to the [M, N] result ([N], [1, N] or [M, N]) and the element
  type is a float type Gemm accepts.
The inner node stays when something else reads it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_ir.attrs import Attr
from graph_ir.core import Node
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import RewriteState, adds_after, constant_array, is_onnx, onnx_graphs, replace_with_nodes

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["FoldChains", "FuseGemm"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class FoldChains(Pass):
    """Compose Transpose/Transpose and Reshape/Reshape pairs (module docstring)."""

    name = "fold-chains"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level in onnx_graphs(graph):
            for node in list(level.nodes):
                if node.graph is None or not is_onnx(node, "Transpose", "Reshape") or not node.inputs or node.inputs[0] is None:
                    continue
                inner = node.inputs[0].producer
                if inner is None or inner.graph is not level or not is_onnx(inner, node.op_type):
                    continue
                if node.op_type == "Transpose":
                    p, q = inner.attr("perm"), node.attr("perm")
                    if p is None or q is None:
                        continue
                    new = Node("Transpose", [inner.inputs[0]], attrs=[Attr.infer("perm", tuple(int(p[i]) for i in q))], name=level.unique_name(node.name or "transpose"))
                else:
                    shape = constant_array(node.inputs[1], state) if len(node.inputs) > 1 else None
                    if shape is None or (shape == 0).any():
                        continue
                    attrs = [node.attrs["allowzero"]] if "allowzero" in node.attrs else []
                    new = Node("Reshape", [inner.inputs[0], node.inputs[1]], attrs=attrs, name=level.unique_name(node.name or "reshape"))
                replace_with_nodes([inner, node], node.outputs[0], [new], new.outputs[0], state)
        return PassResult(graph, state.changes > 0)


_GEMM_TYPES = ("f16", "f32", "f64", "bf16")


@register_pass
@dataclass(frozen=True)
class FuseGemm(Pass):
    """MatMul + constant bias Add -> Gemm (module docstring)."""

    name = "fuse-gemm"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for level, add, matmul, y, c in adds_after(graph, "MatMul", state):
            if y in state.listed or len(y.uses) != 1:
                continue
            a, b = matmul.inputs
            if a is None or b is None or a.shape is None or b.shape is None or len(a.shape) != 2 or len(b.shape) != 2:
                continue
            if y.dtype is None or y.dtype.short_name not in _GEMM_TYPES or c is None or c.dtype != y.dtype:
                continue
            if c.shape is None or y.shape is None or add.outputs[0].shape != y.shape or not _unidirectional(tuple(c.shape), tuple(y.shape)):
                continue
            new = Node("Gemm", [a, b, c], name=level.unique_name(matmul.name or "gemm"))
            replace_with_nodes([matmul, add], add.outputs[0], [new], new.outputs[0], state)
        return PassResult(graph, state.changes > 0)


def _unidirectional(c: tuple, y: tuple) -> bool:
    if len(c) > 2:
        return False
    c = (1,) * (2 - len(c)) + c
    return all(isinstance(d, int) and d in (1, t) for d, t in zip(c, y))
