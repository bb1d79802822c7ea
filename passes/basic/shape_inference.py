"""Shape inference for ONNX graphs, through onnx's own inference (with data propagation)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from graph_ir.errors import ExportError, InvalidShapeError
from graph_ir.types import OptionalType, SequenceType, Shape, TensorType, Type
from passes.infra.base import Pass, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from onnx import GraphProto

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
        if _fully_typed(root):
            # Inference refines dtypes and non-static dims only: nothing is left to learn (the
            # second -O2 round, and exporters that write every value's type, such as dynamo's).
            return PassResult(graph, False)
        try:
            # Weights go as typed inputs without data: inference only reads the data of small
            # (shape-like) tensors, and copying every weight took most of the pass's time.
            model = export_onnx(root, weights_as_inputs_above=_DATA_LIMIT, metadata=False)
        except ExportError as err:
            logger.info("shape-infer skipped: the graph cannot be exported to ONNX (%s)", err)
            return PassResult(graph, False)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=self.data_prop)
        modified = False
        for sub, proto in _paired_graphs(root, inferred.graph):
            # Names are unique within a scope but sibling subgraphs may reuse them: look up per graph.
            types = {info.name: info.type for info in [*proto.output, *proto.value_info]}
            for node in sub:
                for value in node.outputs:
                    if _static(value.type):
                        continue  # nothing to refine: skip reading the inferred type
                    type_proto = types.get(value.name)
                    if type_proto is None:
                        continue
                    try:
                        inferred_type = read_type(type_proto, value.name)
                    except InvalidShapeError:
                        # onnx's data propagation can infer impossible dims (e.g. -1 from a
                        # Reshape target in an untaken branch): learn nothing rather than fail.
                        logger.debug("shape-infer: ignoring an invalid inferred shape for %s", value.name)
                        continue
                    merged = refine_type(value.type, inferred_type)
                    if merged != value.type:
                        value.type = merged
                        modified = True
        return PassResult(graph, modified)


# Initializers above this many elements go to onnx's inference as typed graph inputs without
# their data (4.7 s of a 7 s -O2 run on ResNet-50 went to serializing weights for it).
_DATA_LIMIT = 1024


def _static(value_type: Type | None) -> bool:
    """A tensor type of known dtype and static shape (inference cannot refine it)."""
    if value_type.__class__ is not TensorType or value_type.dtype is None:  # type: ignore[union-attr]
        return False
    shape = value_type.shape  # type: ignore[union-attr]
    return shape is not None and shape.is_static


def _fully_typed(root: Graph) -> bool:
    """Every node result of every graph a tensor of known dtype and static shape."""
    return all(_static(value.type) for node in root.all_nodes() for value in node.outputs)


def _paired_graphs(graph: Graph, proto: GraphProto) -> Iterator[tuple[Graph, GraphProto]]:
    """Each IR graph with its exported GraphProto (the exporter keeps node and attribute order)."""
    yield graph, proto
    for node, node_proto in zip(graph, proto.node):
        protos = {attr.name: attr for attr in node_proto.attribute}
        for attr in node.attrs.values():
            attr_proto = protos.get(attr.name)
            if attr_proto is None:
                continue
            sub_protos = [attr_proto.g] if attr_proto.HasField("g") else list(attr_proto.graphs)
            for sub, sub_proto in zip(attr.graphs(), sub_protos):
                yield from _paired_graphs(sub, sub_proto)


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
