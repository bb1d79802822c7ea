"""Tile kernel shapes drawn from real graphs: the dots, convolutions and reductions of the
workload suite and of HLO files (e.g. `../shared/testdata/external/hlo`).

Each op becomes a `KernelSpec` of the matching kind; shapes larger than `max_flops` are scaled
down (the largest dim halved until they fit, so the aspect survives) to keep one configuration's
run within milliseconds on this shared 2-core machine. The source is recorded on the spec.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Iterable, Iterator

from cost_model.measure.tile.kernels import KernelSpec
from graph_ir.attrs import AttrKind
from graph_ir.op_kinds import OpKind

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["kernels_from_graph", "kernels_from_node", "scale_to_budget", "unique_kernels"]

logger = logging.getLogger(__name__)

_ELEMENTWISE = (OpKind.UNARY, OpKind.BINARY)


def _shape(value: object) -> tuple[int, ...] | None:
    dims = getattr(getattr(value, "type", None), "shape", None)
    if dims is None:
        return None
    try:
        out = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        return None
    return out if all(d > 0 for d in out) else None


def _nodes(graph: Graph) -> Iterator[Node]:
    for node in graph:
        yield node
        for attr in node.attrs.values():
            if attr.kind is AttrKind.GRAPH:
                yield from _nodes(attr.value)
            elif attr.kind is AttrKind.GRAPHS:
                for sub in attr.value:
                    yield from _nodes(sub)


def _dot(node: Node, source: str) -> KernelSpec | None:
    lhs, rhs, out = _shape(node.inputs[0]), _shape(node.inputs[1]) if len(node.inputs) > 1 else None, _shape(node.outputs[0])
    if lhs is None or rhs is None or out is None:
        return None
    if node.op_type == "Gemm" and len(out) == 2:
        k = lhs[0] if node.attr("transA") else lhs[-1]
        return KernelSpec("matmul", (out[0], out[1], k), source)
    dnums = node.attr("dot_dimension_numbers")
    if dnums is not None:
        contracting = list(getattr(dnums, "lhs_contracting_dimensions", ()))
        batch_dims = list(getattr(dnums, "lhs_batch_dimensions", ()))
    else:  # ONNX MatMul / Gemm: contract lhs's last dim, batch = leading dims
        contracting, batch_dims = [len(lhs) - 1], list(range(len(lhs) - 2))
    if any(d >= len(lhs) for d in contracting + batch_dims):
        return None
    k = math.prod(lhs[d] for d in contracting)
    b = math.prod(lhs[d] for d in batch_dims)
    m = math.prod(lhs) // max(k * b, 1)
    n = math.prod(out) // max(b * m, 1)
    if min(k, m, n) < 1:
        return None
    if b > 1:
        return KernelSpec("batch_matmul", (b, m, n, k), source)
    return KernelSpec("matmul", (m, n, k), source)


def _conv(node: Node, source: str) -> KernelSpec | None:
    data, weight, out = _shape(node.inputs[0]), _shape(node.inputs[1]) if len(node.inputs) > 1 else None, _shape(node.outputs[0])
    dnums = node.attr("convolution_dimension_numbers")
    if data is None or weight is None or out is None:
        return None
    if dnums is None and node.op_type == "Conv" and len(data) == 4 and len(weight) == 4:
        return _onnx_conv(node, data, weight, source)
    if dnums is None:
        return None
    spatial = list(getattr(dnums, "input_spatial_dimensions", ()))
    kspatial = list(getattr(dnums, "kernel_spatial_dimensions", ()))
    if len(spatial) != 2 or len(kspatial) != 2:
        return None
    n = data[getattr(dnums, "input_batch_dimension", 0)]
    c = data[getattr(dnums, "input_feature_dimension", 0)]
    h, w = data[spatial[0]], data[spatial[1]]
    kh, kw = weight[kspatial[0]], weight[kspatial[1]]
    f = weight[getattr(dnums, "kernel_output_feature_dimension", 0)]
    out_spatial = list(getattr(dnums, "output_spatial_dimensions", ()))
    oh = out[out_spatial[0]] if out_spatial else h
    stride = max(1, round(h / max(oh, 1)))
    groups = int(node.attr("feature_group_count") or 1)
    nchw = getattr(dnums, "input_feature_dimension", 0) == 1
    if groups > 1 and groups == c:
        return KernelSpec("depthwise_nhwc", (n, h, w, c, kh, kw, stride), source)
    if groups > 1:
        return None
    return KernelSpec("conv2d_nchw" if nchw else "conv2d_nhwc", (n, h, w, c, f, kh, kw, stride), source)


def _onnx_conv(node: Node, data: tuple[int, ...], weight: tuple[int, ...], source: str) -> KernelSpec | None:
    # ONNX Conv: NCHW data, OIHW weights; square strides only (the kernels take one stride).
    n, c, h, w = data
    f, _, kh, kw = weight
    strides = tuple(node.attr("strides") or (1, 1))
    group = int(node.attr("group") or 1)
    if len(set(strides)) != 1:
        return None
    if group > 1 and group == c:
        return KernelSpec("depthwise_nhwc", (n, h, w, c, kh, kw, int(strides[0])), source)
    if group > 1:
        return None
    return KernelSpec("conv2d_nchw", (n, h, w, c, f, kh, kw, int(strides[0])), source)


def _reduce(node: Node, source: str) -> KernelSpec | None:
    data, out = _shape(node.inputs[0]), _shape(node.outputs[0])
    if data is None or out is None:
        return None
    rows = max(math.prod(out), 1)
    cols = math.prod(data) // rows
    if cols < 2:
        return None
    producer = node.inputs[0].producer
    chain = producer is not None and producer.kind in _ELEMENTWISE
    return KernelSpec("ew_reduce" if chain else "reduce", (rows, cols), source)


def kernels_from_node(node: Node, source: str = "") -> KernelSpec | None:
    """The tile kernel of one dot / MatMul / Gemm, convolution or reduce node (None otherwise)."""
    try:
        if node.kind is OpKind.MATMUL and len(node.inputs) >= 2:
            return _dot(node, source)
        if node.kind is OpKind.CONV and len(node.inputs) >= 2:
            return _conv(node, source)
        if node.kind is OpKind.REDUCE and node.inputs:
            return _reduce(node, source)
    except (ValueError, TypeError, IndexError) as error:  # odd dims: skip the op, say so
        logger.debug("%s: skipped %s (%s)", source, node.name, error)
    return None


def kernels_from_graph(graph: Graph, source: str) -> list[KernelSpec]:
    """Every dot, convolution and reduce of `graph` (subgraphs included) as a `KernelSpec`."""
    return [spec for spec in (kernels_from_node(node, source) for node in _nodes(graph)) if spec is not None]


_SHRINK_ORDER = {  # which dims may shrink (windows and strides never do)
    "matmul": (0, 1, 2), "batch_matmul": (0, 1, 2, 3), "conv2d_nhwc": (0, 1, 2, 3, 4), "conv2d_nchw": (0, 1, 2, 3, 4),
    "depthwise_nhwc": (0, 1, 2, 3), "reduce": (0, 1), "ew_reduce": (0, 1),
}


def scale_to_budget(spec: KernelSpec, max_flops: float, *, min_flops: float = 0.0) -> KernelSpec | None:
    """Halve the largest shrinkable dim until the kernel has at most `max_flops` (None if it is
    below `min_flops` from the start: too small to time reliably)."""
    if spec.flops < min_flops:
        return None
    dims = list(spec.dims)
    shrinkable = _SHRINK_ORDER[spec.kind]
    while KernelSpec(spec.kind, tuple(dims)).flops > max_flops:
        index = max(shrinkable, key=lambda i: dims[i])
        if dims[index] <= 1:
            break
        dims[index] = (dims[index] + 1) // 2
    return KernelSpec(spec.kind, tuple(dims), spec.source)


def unique_kernels(specs: Iterable[KernelSpec]) -> list[KernelSpec]:
    """First occurrence of every signature, order kept."""
    seen: dict[str, KernelSpec] = {}
    for spec in specs:
        seen.setdefault(spec.signature, spec)
    return list(seen.values())
