"""The fusion a framework applies by default on a GPU, as fusion groups: the "before" of a comparison.

Simulating a graph op by op charges every elementwise op a launch and a round trip to memory,
which no framework does. `apply_default_fusion(graph)` writes the groups the graph's own
framework would form, chosen by the nodes' domain:

- **"xla-gpu"** (HLO, StableHLO): the `fuse` pass (`passes/fusion/fuse.py`), whose rules follow
  XLA's GPU fusion pipeline: (1) the GEMM/convolution rewriters fold an elementwise epilogue
  (bias add, activation, scaling) into the cuBLAS/cuDNN call (`rules.is_epilogue`); (2)
  `GpuInstructionFusion`: a cheap producer (elementwise, broadcast, reshape, transpose, slice,
  pad, concat, iota, constant) fuses into its consumer when that consumer is cheap too (*loop
  fusion*) or a reduction (*input fusion*: the reduce's operand chain is computed inside the
  reduction kernel); heavy ops never take producers in (they are library calls); (3) an
  elementwise sole user of a reduction joins its kernel (reduction epilogue fusion). Before that,
  as XLA's CallInliner does, every `call` whose body holds only cheap ops (JAX wraps `relu` and
  other custom-JVP functions in such calls) is inlined, so its ops can fuse. Each group
  holds at most one "hero" (reduction or library call) and groups never form a cycle; then
  (4) sibling multi-output fusion: reductions that read the same value and reduce to the same
  shape join one kernel (XLA's GpuMultiOutputFusion; batch-norm statistics read their input once).
  Not modelled: multi-output (sibling) fusion, producer duplication (off by default here: XLA
  duplicates cheap producers only when that does not grow the work; `fuse{max-duplicates=k}`
  does it), the cost-model-driven priority fusion of newer XLA (it fuses more, so ours errs on
  the slow side), Triton-fused softmax/GEMM fusions and custom calls.
- **"cudnn-runtime"** (TF GraphDef, ONNX, torch aten): the fusions GPU runtimes apply without a
  compiler (TF's grappler remapper, onnxruntime's CUDA graph transformers, cuDNN/cuBLASLt
  epilogues): a convolution or matmul absorbs its sole-user chain of a bias add (the other
  operand a per-channel vector), at inference a batch normalisation (folded into the weights:
  a per-channel scale and shift, also when written out as per-channel Mul/Add ops in a graph
  without gradient ops) and one activation (Relu, Relu6, Sigmoid, Tanh, Elu, Gelu,
  LeakyRelu, Clip...). A training-mode batch norm followed by Relu fuses the activation into the
  norm kernel (cuDNN's BN+activation). Everything else stays one kernel per op, as TF and
  onnxruntime run it without XLA auto-clustering.

Nodes that already carry a fusion group are respected: nothing is applied when any node has one.
`DefaultFusion.name` is what `simulate`/`bench` report; `--no-default-fusion` skips it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.kernel_pieces import spanning_groups
from graph_ir.op_kinds import OpKind
from graph_ir.types import TensorType
from passes.fusion.fuse import greedy_fuse
from passes.fusion.groups import FusionGroups

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = [
    "DefaultFusion",
    "XLA_GPU",
    "CUDNN_RUNTIME",
    "apply_default_fusion",
    "colocated_groups",
    "default_group_array",
    "inline_calls",
    "inline_cheap_calls",
    "default_fusion_name",
    "is_training_graph",
    "runtime_fusion",
    "sibling_fusion",
]

logger = logging.getLogger(__name__)

XLA_GPU = "xla-gpu"
CUDNN_RUNTIME = "cudnn-runtime"
_XLA_DOMAINS = frozenset({"hlo", "stablehlo"})
_RUNTIME_DOMAINS = frozenset({"tf", "", "ai.onnx", "aten", "com.microsoft"})
# Activations cuDNN / cuBLASLt / grappler / onnxruntime fuse into a conv or matmul epilogue.
_ACTIVATIONS = frozenset(
    "Relu Relu6 Sigmoid Tanh Elu LeakyRelu Gelu Clip HardSigmoid HardSwish Swish Selu Softplus "
    "relu relu_ sigmoid tanh gelu hardtanh silu aten.relu.default aten.gelu.default aten.sigmoid.default "
    "aten.tanh.default aten.silu.default aten.hardtanh.default".split()
)
_BIAS_ADDS = frozenset({"BiasAdd", "Add", "AddV2", "add", "aten.add.Tensor"})
# A per-channel scale or shift after a conv at inference (a batch norm written out as ops, as
# Keras' inference graphs and exported ONNX models have it) folds into the conv's weights/bias.
_AFFINE = _BIAS_ADDS | frozenset({"Mul", "Sub", "mul", "sub", "aten.mul.Tensor", "aten.sub.Tensor"})


@dataclass(frozen=True)
class DefaultFusion:
    """What `apply_default_fusion` did: the rule set's name ("none" when nothing was applied),
    the number of fused groups and of nodes inside them, and why when nothing was applied."""

    name: str
    groups: int = 0
    fused_nodes: int = 0
    reason: str = ""


def default_fusion_name(graph: Graph) -> str:
    """The default rule set for the graph's framework: XLA_GPU, CUDNN_RUNTIME or "none"."""
    domains = {node.domain for node in graph}
    if domains & _XLA_DOMAINS:
        return XLA_GPU
    if domains & _RUNTIME_DOMAINS:
        return CUDNN_RUNTIME
    return "none"


def apply_default_fusion(graph: Graph, *, max_nodes: int = 32) -> DefaultFusion:
    """Write the framework's default fusion groups onto `graph` (top level); see the module doc."""
    if any(node.fusion_group is not None for node in graph):
        return DefaultFusion("none", reason="the graph already has fusion decisions")
    name = default_fusion_name(graph)
    if name == "none":
        return DefaultFusion("none", reason="no default fusion known for this graph's domains")
    inlined = 0
    if name == XLA_GPU:
        inlined = inline_cheap_calls(graph)
    groups = _default_partition(graph, name, max_nodes)
    groups.write()
    fused = sum(len(m) for m in groups.members.values() if len(m) > 1)
    logger.debug("default fusion %s: %d groups, %d nodes, %d calls inlined", name, groups.num_groups, fused, inlined)
    return DefaultFusion(name, groups.num_groups, fused)


def _default_partition(graph: Graph, name: str, max_nodes: int) -> FusionGroups:
    groups = FusionGroups(graph, max_nodes=max_nodes)
    # Exact cycle checks, whatever FusionGroups' default: a capped search refuses a merge once it
    # has visited the cap's nodes, and in an unrolled RNN or a training graph nearly everything
    # lies downstream, so most legal merges of a >4k-node graph were refused (gnmt-4 at b128, 48
    # steps: 11,349 of 18,256 nodes left unfused at 4096; exact: 1,137). The kept group order
    # (cycle_numba) keeps it cheap.
    groups.search_limit = None
    if name == XLA_GPU:
        greedy_fuse(groups, epilogues=True)
        sibling_fusion(groups)
    else:
        runtime_fusion(groups)
    return groups


def default_group_array(graph: Graph, *, max_nodes: int = 32) -> tuple[str, np.ndarray | None]:
    """The default fusion as int32 group ids over `node_order(graph)` (-1: unfused), without
    touching the graph: `(name, groups)`. Groups the graph already carries are returned as they
    are (name "given"); `(name, None)` when no default is known. Unlike `apply_default_fusion`
    this does not inline calls: callers that want (d)'s node set inline first (`inline_cheap_calls`).
    Placement-agnostic (devices already on the nodes are ignored): keep a placement's share with
    `colocated_groups`."""
    from graph_ir.order import node_order

    nodes = node_order(graph)
    if any(node.fusion_group is not None for node in nodes):
        given = np.array([-1 if n.fusion_group is None else n.fusion_group for n in nodes], dtype=np.int32)
        return "given", given
    name = default_fusion_name(graph)
    if name == "none":
        return name, None
    saved = [node.device for node in nodes]
    try:
        for node in nodes:  # FusionGroups keeps to one device per group: decide before placement
            node.device = None
        groups = _default_partition(graph, name, max_nodes)
    finally:
        for node, device in zip(nodes, saved):
            node.device = device
    return name, groups.group_ids()


def _numel(node: Node) -> int | None:
    if not node.outputs or not isinstance(node.outputs[0].type, TensorType) or node.outputs[0].type.shape is None:
        return None
    shape = node.outputs[0].type.shape
    return math.prod(shape) if all(isinstance(d, int) for d in shape) else None


def _is_bias_add(user: Node, producer: Node, ops: frozenset[str] = _BIAS_ADDS) -> bool:
    """An add (or, with `ops`, a scale) whose other operand is a per-channel vector."""
    if user.op_type not in ops or user.kind != OpKind.BINARY:
        return False
    others = [v for v in user.inputs if v is not None and v.producer is not producer]
    if len(others) != 1 or not isinstance(others[0].type, TensorType) or others[0].type.shape is None:
        return False
    shape = others[0].type.shape
    if not all(isinstance(d, int) for d in shape):
        return False
    out = producer.outputs[0].type.shape if isinstance(producer.outputs[0].type, TensorType) else None
    channels = max(out) if out and all(isinstance(d, int) for d in out) else 0
    return math.prod(shape) <= max(channels, 1) and sum(1 for d in shape if d > 1) <= 1


def _inference_norm(node: Node) -> bool:
    if node.kind != OpKind.NORM or "BatchNorm" not in node.op_type and "batch_norm" not in node.op_type:
        return False
    if node.domain == "tf":
        return not node.attr("is_training", True)
    return not node.attr("training_mode", 0)


def _training_norm(node: Node) -> bool:
    return node.kind == OpKind.NORM and ("BatchNorm" in node.op_type or "batch_norm" in node.op_type) and not _inference_norm(node)


def is_training_graph(graph_nodes: list[Node]) -> bool:
    """A graph with gradient ops (TF *Grad/*Backprop*, optimizer applies)."""
    return any("Grad" in n.op_type or "Backprop" in n.op_type or n.op_type.startswith(("Apply", "ResourceApply")) for n in graph_nodes)


def runtime_fusion(groups: FusionGroups) -> None:
    """Conv/matmul + bias + (inference) batch norm + activation; training BN + activation."""
    nodes = groups.nodes
    inference = not is_training_graph(nodes)
    for start, node in enumerate(nodes):
        if node.kind in (OpKind.CONV, OpKind.MATMUL):
            stages = ("bias", "norm", "affine", "affine", "activation") if inference else ("bias", "norm", "activation")
        elif _training_norm(node):
            stages = ("activation",)
        else:
            continue
        current = start
        for stage in stages:
            users = {u for u in nodes[current].outputs[0].users()}
            if len(users) != 1:
                break  # the result is needed elsewhere too: the runtime writes it out unfused
            candidate = users.pop()
            user = groups.index.get(candidate)
            if user is None:
                break
            if stage == "bias":
                ok = _is_bias_add(candidate, nodes[current])
            elif stage == "norm":
                ok = _inference_norm(candidate)
            elif stage == "affine":
                ok = _is_bias_add(candidate, nodes[current], _AFFINE)
            else:
                ok = candidate.op_type in _ACTIVATIONS
            if not ok:
                continue  # the stage is optional: try the next one on the same node
            if stage == "norm":
                # Folded into the conv's weights, an inference batch norm is a per-channel scale and
                # shift: elementwise, so not a second hero in the group.
                groups.heroes[groups.find(user)] = 0
            if not groups.try_merge(current, user):
                break
            current = user


def colocated_groups(fusion_group: np.ndarray, device: np.ndarray) -> np.ndarray:
    """The groups whose members all run on one device; a group split across devices is unfused.

    Placement methods decide devices op by op; a framework fuses only within a device, after
    placement. Unfusing a split group (rather than splitting it per device) keeps the contracted
    graph acyclic: the remaining groups were legal groups of the original graph.
    """
    out = np.asarray(fusion_group, dtype=np.int32).copy()
    split = spanning_groups(out, np.asarray(device))
    if split.size:
        out[np.isin(out, split)] = -1
    return out


def _call_body(node: Node) -> Graph | None:
    bodies = list(node.subgraphs())
    if len(bodies) == 1:
        return bodies[0]
    names = node.attr("called_computations") or ()
    root = node.graph
    while root is not None and getattr(root, "parent", None) is not None:
        root = root.parent.graph
    functions = getattr(root, "functions", {}) if root is not None else {}
    function = functions.get((node.domain, names[0], "")) if len(names) == 1 else None
    return None if function is None else function.graph


def inline_cheap_calls(graph: Graph) -> int:
    """Replace each top-level HLO `call` whose body is only cheap ops (elementwise, broadcast,
    reshape, constant...) by a copy of its body; the number inlined. Numerics are unchanged (the
    same ops on the same values); XLA inlines such calls before fusing."""
    return inline_calls(graph, cheap_only=True)


def _inline_one(graph: Graph, node: Node, cheap_only: bool) -> list[Node] | None:
    """The clones of `node`'s body (appended to `graph`, the call's uses rewired), or None when
    the call is left alone."""
    from graph_ir.attrs import Attr, AttrKind
    from graph_ir.clone import clone_graph
    from graph_ir.core import Node as IrNode
    from passes.fusion.rules import CHEAP_KINDS

    body = _call_body(node)
    if body is None or len(body.outputs) != 1 or len(body.inputs) != len(node.inputs) or len(node.outputs) != 1:
        return None
    members = list(body)
    if not members:
        return None
    if cheap_only and any(m.kind not in CHEAP_KINDS or any(True for _ in m.subgraphs()) for m in members):
        return None
    root = body.outputs[0]
    result = node.outputs[0]
    tuple_root = root.producer is not None and root.producer.kind == OpKind.TUPLE
    getters = [u.node for u in result.uses] if tuple_root else []
    if tuple_root and (not getters or any(g.kind != OpKind.GET_TUPLE_ELEMENT for g in getters) or graph.has_output(result)):
        return None  # the tuple itself escapes: nothing to unpack
    mapping = dict(zip(body.inputs, node.inputs))
    made: list[Node] = []
    for member in members:
        if tuple_root and member is root.producer:
            continue
        if any(v is not None and v not in mapping and v.producer is None for v in member.inputs):
            return None  # a captured outer value: leave this call alone
        # A nested computation (a reducer, a called body) is copied with its op: one graph has one
        # owner. The copy is renamed after its new owner: HLO wants computation names unique in the
        # module, and a body inlined twice would bring two reducers of one name.
        clone_name = graph.unique_name(f"{node.name or 'call'}.{member.name or member.op_type}")
        renamed: dict[str, str] = {}
        attrs = []
        for a in member.attrs.values():
            if a.kind == AttrKind.GRAPHS:
                copies = []
                for g in a.value:
                    copy = clone_graph(g)
                    copy.name = renamed[g.name] = f"{g.name}.{clone_name}"
                    for inner in copy:  # instruction names are module-wide in HLO too
                        copy.rename_node(inner, f"{inner.name}.{clone_name}")
                    for value in {*copy.inputs, *(v for inner in copy for v in inner.outputs)}:
                        copy.rename_value(value, f"{value.name}.{clone_name}")
                    copies.append(copy)
                a = Attr(a.name, a.kind, tuple(copies))
            attrs.append(a)
        if renamed:
            attrs = [Attr(a.name, a.kind, tuple(renamed.get(c, c) for c in a.value)) if a.name == "called_computations" else a for a in attrs]
        clone = IrNode(
            member.op_type,
            [mapping.get(v, v) if v is not None else None for v in member.inputs],
            attrs=attrs,
            domain=member.domain,
            overload=member.overload,
            kind=member.kind,
            name=clone_name,
        )
        clone.meta.update(member.meta)  # the HLO exporter rebuilds constants from it
        for out, original in zip(clone.outputs, member.outputs):
            out.type = original.type
            out.meta.update(original.meta)
            out.name = graph.unique_name(f"{node.name or 'call'}.{original.name or 'v'}")
            mapping[original] = out
        clone.device = node.device
        made.append(clone)
    if tuple_root:
        elements = [mapping.get(v, v) for v in root.producer.inputs]
        if any(e is None or (e.producer is None and e not in node.inputs) for e in elements):
            return None
        graph.extend(made)
        for getter in getters:
            getter.outputs[0].replace_all_uses_with(elements[int(getter.attr("tuple_index") or 0)])
        return made
    value = mapping.get(root)
    if value is None or value.producer is None or value.producer not in made:
        return None  # the body returns an input unchanged: nothing to gain
    graph.extend(made)
    result.replace_all_uses_with(value)
    return made


def inline_calls(graph: Graph, cheap_only: bool = False) -> int:
    """Replace top-level HLO `call`s by copies of their bodies, to a fixpoint (a body's own calls
    are inlined in the next round); the number inlined. `cheap_only` keeps XLA's cheap-call rule
    (above); otherwise any body is inlined, a tuple result unpacked straight into the
    get-tuple-element users, as XLA's CallInliner inlines every call: a call is a boundary of
    the tracer (JAX's `jit`-wrapped `var`, `log_softmax`, `_where`), not a kernel, and left in
    place it is charged as one op (its body's bytes once, or only its operands where the body is
    shared). Nested computations (reducers, loop bodies) are copied with their ops."""
    total = 0
    while True:
        inlined: dict[Node, list[Node]] = {}
        for node in list(graph):
            if node.domain != "hlo" or node.kind != OpKind.CALL:
                continue
            made = _inline_one(graph, node, cheap_only)
            if made is not None:
                inlined[node] = made
        if not inlined:
            return total
        total += len(inlined)
        made_ids = {id(m) for made in inlined.values() for m in made}
        doomed = set(inlined)
        for node in inlined:  # the unpacked get-tuple-elements go with their call
            if node.outputs[0].has_uses() and all(u.node.kind == OpKind.GET_TUPLE_ELEMENT for u in node.outputs[0].uses):
                doomed.update(u.node for u in node.outputs[0].uses if not u.node.outputs[0].has_uses())
        order: list[Node] = []
        for node in list(graph):
            if node in inlined:
                order.extend(inlined[node])  # the body's ops where the call was
            elif id(node) not in made_ids and node not in doomed:
                order.append(node)
        graph.remove_nodes([n for n in graph if n in doomed])
        graph.reorder(order)
        if cheap_only:
            return total


def sibling_fusion(groups: FusionGroups) -> int:
    """Merge the groups of reductions that read one value and produce equal shapes; the merges."""
    from passes.fusion.rules import REDUCTION_KINDS

    nodes = groups.nodes
    readers: dict[int, list[int]] = {}
    values: dict[int, object] = {}
    for i, node in enumerate(nodes):
        for value in node.inputs:
            if value is None or value.const is not None or not getattr(value.type, "shape", None):
                continue  # constants (reduce init values) and scalars are no shared traffic
            if value.producer is not None and value.producer.kind == OpKind.CONSTANT:
                continue
            readers.setdefault(id(value), []).append(i)
            values[id(value)] = value
    merges = 0
    for users in readers.values():
        if len(users) < 2:
            continue
        # Groups reading this value whose hero is a reduction (directly or through fused producers).
        by_shape: dict[object, list[int]] = {}
        for u in users:
            hero = next((m for m in groups.group(u) if nodes[m].kind in REDUCTION_KINDS and nodes[m].outputs), None)
            if hero is None:
                continue
            members = by_shape.setdefault(getattr(nodes[hero].outputs[0].type, "shape", None), [])
            if all(not groups.same_group(u, other) for other in members):
                members.append(u)
        for members in by_shape.values():
            for other in members[1:]:
                if groups.same_group(members[0], other):
                    continue
                # Several reductions of one input are one kernel in XLA (multi-output fusion):
                # let the merged group hold them by counting the newcomer's hero as shared.
                root = groups.find(other)
                saved = groups.heroes[root]
                groups.heroes[root] = 0
                if groups.try_merge(members[0], other):
                    merges += 1
                else:
                    groups.heroes[root] = saved
    return merges
