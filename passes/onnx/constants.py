"""`constants-to-initializers`: ONNX `Constant` nodes become initializers of the same name (what
onnxsim and onnxslim do): one node fewer each, and the value is where every tool looks for
weights. Left alone: a Constant whose output is a graph output (an initializer cannot be one in
every ONNX version's checker), inside subgraphs (their initializers would need the same care),
and sparse or string values the IR's tensor type does not hold."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_ir.core import Value
from graph_ir.tensors import NumpyTensor, Tensor
from passes.basic._walk import replace_value
from passes.infra.base import Pass, PassResult
from passes.infra.registry import register_pass
from passes.onnx._rewrite import RewriteState, constant_array, is_onnx

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["ConstantsToInitializers"]

logger = logging.getLogger(__name__)


@register_pass
@dataclass(frozen=True)
class ConstantsToInitializers(Pass):
    """Constant nodes of the root graph -> initializers (module docstring)."""

    name = "constants-to-initializers"

    def call(self, graph: Graph) -> PassResult:
        state = RewriteState(graph)
        for node in list(graph.nodes):
            if not is_onnx(node, "Constant") or node.outputs[0] in state.listed:
                continue
            attr = node.attrs.get("value")
            if attr is not None and isinstance(attr.value, Tensor):
                tensor = attr.value  # by reference, in its own element type
            else:
                array = constant_array(node.outputs[0], state)
                if array is None or array.dtype == object:
                    continue
                try:
                    tensor = NumpyTensor(array)
                except (TypeError, ValueError):
                    continue
            output = node.outputs[0]
            name = output.name
            graph.rename_value(output, graph.unique_name(f"{name}.node"))  # frees the name for the initializer
            constant = graph.add_initializer(Value(name, const=tensor))
            replace_value(output, constant, state.listed)
            graph.remove_nodes([node])
            state.changes += 1
        return PassResult(graph, state.changes > 0)
