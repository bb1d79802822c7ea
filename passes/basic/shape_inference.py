"""Shape inference for ONNX graphs, through onnx's own inference (with data propagation)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from graph_ir.errors import ExportError
from graph_ir.types import OptionalType, SequenceType, Shape, TensorType, Type
from passes.basic._walk import all_graphs
from passes.infra.base import Pass, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from onnx import GraphProto, TypeProto

    from graph_ir.graph import Graph

__all__ = ["ShapeInference"]

logger = logging.getLogger(__name__)

_ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


@register_pass
@dataclass(frozen=True)
class ShapeInference(Pass):
    """Export to ONNX, run `onnx.shape_inference.infer_shapes(strict_mode=False, data_prop=True)`
    and copy the inferred types back onto the values by name, subgraphs included.

    Inferred types refine, never erase: a known dim or dtype is not replaced by an unknown one
    (a static dim does replace a symbolic one). Graphs with no ONNX-domain node, or that cannot
    be exported to ONNX, are left alone; nodes of other domains keep their types. Function bodies
    are not inferred (onnx does not report their value types).
    """

    name = "shape-infer"
    data_prop: bool = option(True, "propagate shape values through Shape/Gather/Concat... (onnx data_prop)")

    def call(self, graph: Graph) -> PassResult:
        import onnx

        from graph_ir.io.onnx_export import export_onnx
        from graph_ir.io.onnx_import import read_type

        root = graph.root
        if not any(node.domain in _ONNX_DOMAINS for node in root.all_nodes()):
            return PassResult(graph, False)
        try:
            model = export_onnx(root)
        except ExportError as err:
            logger.info("shape-infer skipped: the graph cannot be exported to ONNX (%s)", err)
            return PassResult(graph, False)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=self.data_prop)
        types: dict[str, TypeProto] = {}
        for info in _value_infos(inferred.graph):
            types.setdefault(info.name, info.type)
        modified = False
        for sub in all_graphs(root, functions=False):
            for node in sub:
                for value in node.outputs:
                    proto = types.get(value.name)
                    if proto is None:
                        continue
                    merged = refine_type(value.type, read_type(proto, value.name))
                    if merged != value.type:
                        value.type = merged
                        modified = True
        return PassResult(graph, modified)


def _value_infos(graph: GraphProto) -> Iterator:
    yield from graph.output
    yield from graph.value_info
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _value_infos(attr.g)
            for sub in attr.graphs:
                yield from _value_infos(sub)


def refine_type(old: Type | None, new: Type | None) -> Type | None:
    """Merge an inferred type into a declared one, keeping whatever is more precise."""
    if new is None:
        return old
    if old is None:
        return new
    if isinstance(old, (SequenceType, OptionalType)) and type(new) is type(old):
        return type(old)(refine_type(old.element, new.element))
    if not (isinstance(old, TensorType) and isinstance(new, TensorType)):
        return old  # other kinds of declared types are kept as they are
    dtype = new.dtype if new.dtype is not None else old.dtype
    if new.shape is None:
        shape = old.shape
    elif old.shape is None or len(old.shape) != len(new.shape):
        shape = new.shape
    else:
        shape = Shape(_refine_dim(a, b) for a, b in zip(old.shape, new.shape))
    return TensorType(dtype, shape, old.layout)


def _refine_dim(old: int | str | None, new: int | str | None) -> int | str | None:
    if isinstance(new, int):
        return new
    if isinstance(old, int) or new is None:
        return old
    return new if old is None else old
