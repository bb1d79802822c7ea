"""Training batch norm as eager PyTorch runs it: cuDNN's / ATen's batch-norm kernels ("pytorch-eager").

A JAX training graph spells batch norm out in jax.numpy (`mean`, `var`, `(x - mean) * rsqrt(var
+ eps) * scale + bias`) and its autodiff keeps the full-size intermediates it needs for the
backward pass (x - mean, the normalised x-hat, 2 (x - mean) for `var`'s derivative) as
*residuals*: each is written in the forward pass and read again in the backward one. PyTorch's
`native_batch_norm` (CUDA: cuDNN's `cudnnBatchNormalizationForwardTraining`, or ATen's own
`batch_norm_cuda` in `aten/src/ATen/native/cuda/Normalization.cu`) saves only per-channel
statistics: autograd's formula for it (`tools/autograd/derivatives.yaml`,
`native_batch_norm: ... result0: ..., save_mean, save_invstd`; backward
`native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
save_invstd, train, eps, grad_input_mask)`) reads the *input* x again and recomputes x-hat from
it and the saved mean and inverse standard deviation. Its kernels, and their full-tensor passes:

- forward: a statistics kernel (`batch_norm_collect_statistics_kernel`, Welford: reads x once)
  and an elementwise transform (`batch_norm_transform_input_kernel`: reads x, writes y): 3;
- backward: a reduction (`batch_norm_backward_reduce_kernel`: reads dy and x, for sum(dy) and
  sum(dy * x-hat)) and an elementwise kernel (`batch_norm_backward_elemt_kernel`: reads dy and
  x, writes dx): 5;
- ReLU (`nn.ReLU(inplace=True)`) is its own kernel after it (reads and writes y), and its
  backward (`threshold_backward`) reads the gradient and the ReLU output and writes one.

`rematerialize_batch_norm_residuals(graph)` rewrites a traced graph into that data flow; it is
the rule of `passes.fusion.eager` for any training graph with a batch norm, and changes no
value (each clone computes exactly what the node it copies computes, from the same inputs):

1. A *batch norm* is a full-size value x (rank >= 2) that one reduction reduces over every axis
   but one (the channel axis, C channels; the batch axis 0 among the reduced ones) and that a subtraction centres by a per-channel value
   computed from such a reduction of x: `x - broadcast(mean(x))`. (Layer norm reduces the
   feature axis instead; a bias gradient reduces over the batch but centres nothing.)
2. Its *normalisation chain* F: the elementwise nodes with x's shape whose full-size operands are
   x or in F and whose other operands are per-channel values (statistics of x or of F,
   parameters, constants; scalar constants excluded, so ReLU and `var`'s `2 *` are not in F).
   The deepest node of F is the layer's output y; every other value of F used outside F is a
   residual.
3. Each user outside F of a residual gets its own copy of the residual's full-size cone (the F
   nodes and the broadcasts of per-channel operands it depends on, back to x), so it reads x
   (and per-channel statistics) as PyTorch's backward kernels do; originals left without users
   are removed.

`batch_norm_output_groups(groups, sites)` then closes the forward transform: y's cone is one
group that nothing else joins (a library call takes no epilogue), so the ReLU after it is its
own kernel, as in eager PyTorch. The rest (statistics, the backward reductions and elementwise
kernels over the recomputed x-hat) is left to the eager model's reduction and elementwise
fusion, which now finds x and dy as their only full-size inputs.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graph_ir.core import Node
from graph_ir.op_kinds import ELEMENTWISE_KINDS, OpKind
from graph_ir.order import node_order

if TYPE_CHECKING:
    from graph_ir.core import Value
    from graph_ir.graph import Graph
    from passes.fusion.groups import FusionGroups

__all__ = ["BATCH_NORM_META", "BatchNormSite", "batch_norm_output_groups", "find_batch_norms", "rematerialize_batch_norm_residuals"]

logger = logging.getLogger(__name__)

# node.meta key on the nodes of a batch norm's forward transform (its output group).
BATCH_NORM_META = "eager_batch_norm"
_VIEWS = (OpKind.BROADCAST, OpKind.RESHAPE)
_SMALL_DEPTH = 12  # per-channel statistics are a few scalar ops from their reduction


@dataclass
class BatchNormSite:
    """One training batch norm: its input x, channel axis and normalisation chain F (ordered)."""

    x: Value
    axis: int
    chain: list[Node] = field(default_factory=list)
    output: Node | None = None


def _shape(value: Value | None) -> tuple[int, ...] | None:
    shape = getattr(value.type, "shape", None) if value is not None else None
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def _channel_reduction(node: Node) -> tuple[Value, int] | None:
    """(x, channel axis) if `node` reduces x over every axis but one, else None."""
    if node.kind != OpKind.REDUCE or not node.inputs or node.inputs[0] is None:
        return None
    x = node.inputs[0]
    shape = _shape(x)
    dims = node.attr("dimensions")
    if shape is None or len(shape) < 2 or dims is None:
        return None
    kept = sorted(set(range(len(shape))) - {int(d) for d in dims})
    # Batch statistics reduce the batch axis (0) with the rest; a row-wise softmax or layer norm
    # of a 2-D tensor keeps axis 0 and reduces the features.
    return (x, kept[0]) if len(kept) == 1 and kept[0] != 0 and shape[kept[0]] > 1 else None


def _per_channel(value: Value, channels: int) -> bool:
    """A value holding one number per channel (shape [C] or [1, .., C, .., 1])."""
    shape = _shape(value)
    return shape is not None and math.prod(shape) == channels and channels in shape


def _view_source(value: Value, full: tuple[int, ...]) -> Value | None:
    """The value a chain of broadcasts/reshapes expands to x's shape, if there is one."""
    seen = 0
    while value is not None and value.producer is not None and value.producer.kind in _VIEWS and seen < 8:
        if _shape(value) != full and math.prod(_shape(value) or ()) < math.prod(full):
            return value
        value, seen = value.producer.inputs[0] if value.producer.inputs else None, seen + 1
    return value if value is not None and _shape(value) != full else None


def _statistic_of(value: Value, sources: set[Value], channels: int, memo: dict[Value, bool], depth: int = 0) -> bool:
    """Is `value` (at most one number per channel) computed only from reductions of `sources`,
    graph inputs and constants, through values no larger than itself?"""
    if value in memo:
        return memo[value]
    producer = value.producer
    if producer is None:
        ok = True
    elif producer.kind == OpKind.REDUCE:
        ok = producer.inputs[0] in sources and all(v is None or v.producer is None or v.producer.kind == OpKind.CONSTANT for v in producer.inputs[1:])
    elif producer.kind == OpKind.CONSTANT:
        ok = True
    elif depth >= _SMALL_DEPTH or any(_shape(v) is None or math.prod(_shape(v)) > channels for v in producer.outputs):
        ok = False
    else:
        ok = all(v is None or _statistic_of(v, sources, channels, memo, depth + 1) for v in producer.inputs)
    memo[value] = ok
    return ok


def find_batch_norms(graph: Graph) -> list[BatchNormSite]:
    """The training batch norms of `graph` (module docstring, rule 1) with their chains (rule 2)."""
    order = node_order(graph)
    reduced: dict[Value, int] = {}
    for node in order:
        found = _channel_reduction(node)
        if found is not None:
            reduced.setdefault(found[0], found[1])
    sites = []
    position = {node: i for i, node in enumerate(order)}
    for x, axis in reduced.items():
        full = _shape(x)
        channels = full[axis]
        memo: dict[Value, bool] = {}
        centred = False
        for user in x.users():
            if user.op_type != "subtract" or user.inputs[0] is not x:
                continue
            source = _view_source(user.inputs[1], full)
            if source is not None and _per_channel(source, channels) and _statistic_of(source, {x}, channels, memo):
                centred = True
                break
        if not centred:
            continue
        site = BatchNormSite(x, axis)
        inside: set[Value] = {x}
        depth: dict[Node, int] = {}
        start = min(position[u] for u in x.users())
        for node in order[start:]:
            if node.kind not in ELEMENTWISE_KINDS or len(node.outputs) != 1 or _shape(node.outputs[0]) != full:
                continue
            operands = [v for v in node.inputs if v is not None]
            if not any(v in inside for v in operands):
                continue
            ok = True
            for v in operands:
                if v in inside:
                    continue
                source = _view_source(v, full)
                if source is None or not _per_channel(source, channels) or not _statistic_of(source, inside, channels, {}):
                    ok = False
                    break
            if ok:
                site.chain.append(node)
                inside.add(node.outputs[0])
                depth[node] = 1 + max((depth.get(v.producer, 0) for v in operands if v in inside and v is not x), default=0)
        if site.chain:
            site.output = max(site.chain, key=lambda n: (depth[n], position[n]))
            sites.append(site)
    return sites


def _full_cone(value: Value, x: Value, full: tuple[int, ...]) -> list[Node]:
    """Nodes with x's shape that `value` depends on, back to x (excluded): what a copy recomputes."""
    cone: dict[Node, None] = {}
    stack = [value]
    while stack:
        v = stack.pop()
        producer = v.producer
        if v is x or producer is None or producer in cone or _shape(v) != full or producer.kind == OpKind.CONSTANT:
            continue
        cone[producer] = None
        stack.extend(i for i in producer.inputs if i is not None)
    return list(cone)


def _copy(node: Node, graph: Graph, suffix: str) -> Node:
    clone = Node(node.op_type, node.inputs, attrs=list(node.attrs.values()), domain=node.domain, overload=node.overload,
                 kind=node.kind, name=graph.unique_name(f"{node.name or 'node'}.{suffix}"))
    clone.outputs[0].name = graph.unique_name(f"{node.outputs[0].name or 'v'}.{suffix}")
    clone.outputs[0].type = node.outputs[0].type
    clone.device = node.device
    return clone


def rematerialize_batch_norm_residuals(graph: Graph, sites: list[BatchNormSite] | None = None) -> tuple[list[BatchNormSite], int]:
    """Rule 3 of the module docstring, in place: (the batch norms, the nodes copied)."""
    sites = find_batch_norms(graph) if sites is None else sites
    copies = 0
    for site in sites:
        full = _shape(site.x)
        members = set(site.chain)
        copied: set[Node] = set()
        position = {n: i for i, n in enumerate(node_order(graph))}
        for node in site.chain:
            if node is site.output:
                continue
            value = node.outputs[0]
            outside = [u for u in value.users() if u not in members]
            for user in dict.fromkeys(outside):
                cone = _full_cone(value, site.x, full)
                copied.update(cone)
                ordered = sorted(cone, key=position.__getitem__)
                mapping: dict[Value, Value] = {}
                made = []
                for original in ordered:
                    clone = _copy(original, graph, "remat")
                    for index, v in enumerate(clone.inputs):
                        if v in mapping:
                            clone.set_input(index, mapping[v])
                    mapping[original.outputs[0]] = clone.outputs[0]
                    made.append(clone)
                graph.insert_before(user, made)
                for use in list(value.uses):
                    if use.node is user:
                        user.set_input(use.index, mapping[value])
                copies += len(made)
        # Originals nobody reads any more (the residuals' cones) go.
        for node in sorted(copied, key=position.__getitem__, reverse=True):
            if not node.outputs[0].uses and not node.outputs[0].is_graph_output():
                graph.remove(node)
        site.chain = [n for n in site.chain if n.graph is graph]
    logger.debug("batch norm: %d sites, %d nodes recomputed", len(sites), copies)
    return sites, copies


def batch_norm_output_groups(groups: FusionGroups, sites: list[BatchNormSite]) -> int:
    """Close each batch norm's forward transform (y's full-size cone from x) into one group that
    nothing joins; the number of groups made."""
    index = groups.index
    limit, groups.max_nodes = groups.max_nodes, max(groups.max_nodes, 4096)
    made = 0
    try:
        for site in sites:
            if site.output is None or site.output not in index:
                continue
            cone = [n for n in _full_cone(site.output.outputs[0], site.x, _shape(site.x)) if n in index]
            root = index[site.output]
            for node in cone:
                node.meta[BATCH_NORM_META] = True
                if node is not site.output:
                    groups.try_merge(index[node], root, max_heroes=len(groups.nodes))
            groups.heroes[groups.find(root)] = max(groups.heroes[groups.find(root)], 2)
            made += 1
    finally:
        groups.max_nodes = limit
    return made
