"""PyTorch eager's default execution of a traced (JAX/HLO) graph, as fusion groups: "pytorch-eager".

A PyTorch model run eagerly on a GPU launches one kernel per framework op. Its composite ops
(batch norm, softmax, layer norm, GELU, the LSTM gate math) are single kernels, library calls
(cuBLAS, cuDNN) take no fused epilogue, and a layer applied to a whole sequence is one GEMM. A
graph traced from JAX spells the same step out op by op and, for an unrolled recurrence, step by
step. `apply_eager_fusion(graph)` groups it back into the kernels such a run launches:

1. Every HLO `call` is inlined (`defaults.inline_calls`): `jit`-wrapped helpers (`var`,
   `log_softmax`, `relu`) are tracer boundaries, not kernels.
2. Elementwise chains and reductions fuse as one composite op's kernel (`greedy_fuse` without
   library epilogues, then sibling reductions of one input), at most `max_nodes` nodes a group.
3. **Batched GEMMs** (`batch_gemms`), the rules by which PyTorch and cuDNN run a layer over a
   sequence as one library call:
   - *shared operand*: matmuls that multiply one weight (a graph input, through views and casts)
     and do not depend on each other
     form one GEMM over the stacked other operands. This is cuDNN's LSTM, which computes the
     input projection of all timesteps in one GEMM before the recurrence (NVIDIA cuDNN developer
     guide, "cudnnRNNForward": the layer's input GEMM is batched over the sequence; Appleyard et
     al., "Optimizing Performance of Recurrent Neural Networks on GPUs", 2016, optimisation 2),
     and `nn.Linear` applied to a [T, B, H] tensor (GNMT's classifier, attention projections).
     Matmuls on a recurrence (h_t @ W_hh) depend on each other and stay one GEMM per step;
     they are marked (`node.meta[RECURRENT_META]`): inside cuDNN's RNN call they are launched
     from C++, not dispatched one by one by the framework.
   - *accumulated products*: an add whose operands are matmul products of one shape (the weight
     gradient summed over timesteps, sum_t x_t^T dy_t) is one GEMM with the contraction over all
     steps; the partial products never reach memory.
   - *free transposes*: a 2-D (or last-two-dims) transpose that only feeds matmuls, or is the
     only user of a matmul's result, is cuBLAS's op(A)/op(B) flag (PyTorch's `.t()` view), not a
     copy.
   Each rule needs its group convex (no path between members through a non-member), which the
   fusion groups check; a batched group holds several matmul heroes, at most `batch_nodes` nodes.

4. **The optimizer runs op by op**: torch.optim's optimizers (Adam, SGD, DLE's JIT LAMB) loop over
   the parameters in Python, one kernel per elementwise op of the update (the multi-tensor
   "foreach"/fused optimizers came later), scalars passed as arguments and an add taking one
   operand's products in (`add_(g, alpha=)`, `addcmul_`, `addcdiv_`); the update's nodes are the state tail of
   `cost_model.precision` and are marked for the host model (`OPTIMIZER_META`).

5. **Training batch norm as PyTorch's `native_batch_norm`** (`passes.fusion.batch_norm`): the
   backward recomputes x-hat from x and per-channel statistics instead of reading the residuals
   JAX's autodiff saved (copies of their elementwise cones), and the forward transform is one
   closed kernel (ReLU after it is its own kernel): the full-tensor passes of cuDNN's / ATen's
   batch-norm kernels, not of the traced graph's residuals.

Numerics are unchanged (groups, and copies of nodes computing the same values); the simulator prices a group as one kernel: summed FLOPs,
boundary bytes (the shared weight read once), one launch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from graph_ir.op_kinds import OpKind
from passes.fusion.batch_norm import batch_norm_output_groups, rematerialize_batch_norm_residuals
from passes.fusion.defaults import DefaultFusion, inline_calls, sibling_fusion
from passes.fusion.fuse import greedy_fuse
from passes.fusion.groups import FusionGroups
from passes.fusion.rules import HEAVY_KINDS

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["OPTIMIZER_META", "PYTORCH_EAGER", "RECURRENT_META", "apply_eager_fusion", "batch_gemms"]

logger = logging.getLogger(__name__)

PYTORCH_EAGER = "pytorch-eager"
# node.meta key on the per-step GEMMs of a recurrence (see batch_gemms); read by
# cost_model.host_dispatch to count the kernels a library call launches without the framework.
RECURRENT_META = "eager_recurrent_gemm"
# node.meta key on the optimizer update's nodes (the state tail), issued after the backward pass.
OPTIMIZER_META = "eager_optimizer"
_SCALAR_ARGS = (OpKind.CONSTANT, OpKind.RESHAPE, OpKind.BROADCAST)


def _swaps_last_two(node: Node) -> bool:
    perm = node.attr("dimensions") or node.attr("perm")
    if perm is None:
        return False
    perm = tuple(int(p) for p in perm)
    n = len(perm)
    return n >= 2 and perm[:-2] == tuple(range(n - 2)) and perm[-2:] == (n - 1, n - 2)


def _is_add(node: Node) -> bool:
    return node.kind == OpKind.BINARY and node.op_type.lower() in ("add", "add_any")


def _weight_like(value) -> bool:
    """A graph input (a parameter), seen through views and casts: what a layer shares over steps."""
    seen = 0
    while value is not None and value.producer is not None and seen < 8:
        producer = value.producer
        if producer.kind not in (OpKind.TRANSPOSE, OpKind.RESHAPE, OpKind.CAST) or not producer.inputs:
            return False
        value, seen = producer.inputs[0], seen + 1
    return value is not None and value.producer is None and value.const is None


def batch_gemms(groups: FusionGroups, batch_nodes: int = 4096) -> int:
    """Apply the batched-GEMM rules (module docstring) to `groups`; the number of merges."""
    nodes = groups.nodes
    index = groups.index
    limit, groups.max_nodes = groups.max_nodes, max(groups.max_nodes, batch_nodes)
    merges = 0
    try:
        # Free transposes: operand views and result layouts of cuBLAS calls.
        for i, node in enumerate(nodes):
            if node.kind != OpKind.TRANSPOSE or not _swaps_last_two(node) or len(groups.group(i)) > 1:
                continue
            users = node.outputs[0].users()
            producer = node.inputs[0].producer if node.inputs and node.inputs[0] is not None else None
            if users and all(u.kind == OpKind.MATMUL for u in users) and not node.outputs[0].graph.has_output(node.outputs[0]):
                merges += any(groups.try_merge(i, index[u], max_heroes=len(groups.nodes)) for u in users if u in index)
            elif producer is not None and producer.kind == OpKind.MATMUL and producer in index and producer.outputs[0].users() == [node]:
                merges += groups.try_merge(index[producer], i, max_heroes=len(groups.nodes))
        # Shared operand: one GEMM over every independent matmul of one value.
        readers: dict[int, list[int]] = {}
        for i, node in enumerate(nodes):
            if node.kind != OpKind.MATMUL:
                continue
            for value in dict.fromkeys(v for v in node.inputs if v is not None and _weight_like(v)):
                readers.setdefault(id(value), []).append(i)
        for users in readers.values():
            # Forward products and backward input gradients of one weight are two GEMMs (the
            # backward ones depend on the forward ones): each matmul joins the first batch it can.
            batches: list[int] = []
            for user in users:
                if any(groups.try_merge(b, user, max_heroes=len(groups.nodes)) for b in batches):
                    merges += 1
                else:
                    batches.append(user)
            # A weight read by more than a forward and a backward GEMM, one step at a time, is a
            # recurrence (h_t @ W_hh): cuDNN's RNN call launches those GEMMs from C++.
            if len(batches) > 2:
                for b in batches:
                    if len(groups.group(b)) == 1:
                        nodes[b].meta[RECURRENT_META] = True
        # Accumulated products: add trees over matmul results (through free transposes).
        def gemm_group(i: int) -> bool:
            return any(nodes[m].kind == OpKind.MATMUL for m in groups.group(i))

        for i, node in enumerate(nodes):
            if not _is_add(node) or len(node.inputs) != 2 or any(v is None or v.producer is None for v in node.inputs):
                continue
            a, b = (index.get(v.producer) for v in node.inputs)
            if a is None or b is None or not (gemm_group(a) and gemm_group(b)):
                continue
            shapes = {getattr(v.type, "shape", None) for v in (*node.inputs, node.outputs[0])}
            if len(shapes) != 1:
                continue
            if groups.try_merge(a, i, max_heroes=len(groups.nodes)):
                merges += 1
                merges += groups.try_merge(b, i, max_heroes=len(groups.nodes))
    finally:
        groups.max_nodes = limit
    # A library call's group is closed: later loop fusion must not give it a prologue or an
    # epilogue through one of its free transposes (two heroes never merge with anything).
    for root, members in groups.members.items():
        if len(members) > 1 and any(nodes[m].kind in HEAVY_KINDS for m in members):
            groups.heroes[root] = max(groups.heroes[root], 2)
    return merges


def _compound_ops(groups: FusionGroups, tail: set[Node]) -> None:
    """The kernels of torch.optim's in-place ops in an op-by-op update: scalars are arguments (a
    broadcast constant rides in the op that reads it, `mul_(beta1)`), and an add or subtract
    takes one operand's chain of products in (`add_(g, alpha=a)`, `addcmul_(t1, t2, value=a)`,
    `addcdiv_(t1, t2, value=a)`: self + a * t1 * t2 or self + a * t1 / t2 in one kernel)."""
    anything = len(groups.nodes)
    for node in tail:
        if node.kind in _SCALAR_ARGS:
            users = [u for v in node.outputs for u in v.users() if u in groups.index]
            if users:
                groups.try_merge(groups.index[node], groups.index[users[0]], max_heroes=anything)
    products = ("multiply", "divide")
    for node in tail:
        if node.kind != OpKind.BINARY or node.op_type not in ("add", "subtract"):
            continue
        for value in node.inputs:
            producer = value.producer if value is not None else None
            chain = 0
            # Up to two products (value * t1 * t2, value * t1 / t2), each read only here.
            while (producer is not None and producer in tail and producer.op_type in products and chain < 2
                   and len(producer.outputs[0].users()) == 1):
                groups.try_merge(groups.index[producer], groups.index[node], max_heroes=anything)
                chain += 1
                nxt = [v.producer for v in producer.inputs if v is not None and v.producer is not None
                       and v.producer in tail and v.producer.op_type in products]
                producer = nxt[0] if nxt else None
            if chain:
                break  # one operand: the in-place target is the other


def apply_eager_fusion(
    graph: Graph, *, max_nodes: int = 32, batch: bool = True, fused_optimizer: bool = False, native_batch_norm: bool = True
) -> DefaultFusion:
    """Write PyTorch eager's kernels into `graph` as fusion groups (module docstring); `batch`
    False leaves out the batched-GEMM rules (every matmul its own kernel). Unless
    `fused_optimizer`, the optimizer update (the state tail, `cost_model.precision.state_tail`)
    stays op by op and is marked `node.meta[OPTIMIZER_META]`: torch.optim's optimizers loop over
    the parameters in Python and run each elementwise op of the update as its own kernel.
    Unless `native_batch_norm` is False, training batch norms run as PyTorch's (rule 5 of the
    module docstring, `passes.fusion.batch_norm`: residuals recomputed from x, the forward
    transform one closed kernel); that rewrite copies nodes but changes no value."""
    from cost_model.precision import state_tail

    inline_calls(graph)
    sites = rematerialize_batch_norm_residuals(graph)[0] if native_batch_norm else []
    groups = FusionGroups(graph, max_nodes=max_nodes)
    groups.search_limit = None  # exact cycle checks
    tail = state_tail(graph)
    for node in tail:
        node.meta[OPTIMIZER_META] = True
        if not fused_optimizer and node.kind not in _SCALAR_ARGS:
            groups.heroes[groups.index[node]] = 2  # closed: no merge can take it
    if not fused_optimizer:
        _compound_ops(groups, tail)
    # Library calls first: a batched GEMM holds several heroes, so no elementwise op joins it later.
    batched = batch_gemms(groups) if batch else 0
    batch_norm_output_groups(groups, sites)
    greedy_fuse(groups, epilogues=False)
    sibling_fusion(groups)
    groups.write()
    logger.debug("pytorch-eager: %d groups, %d batched-GEMM merges", groups.num_groups, batched)
    return DefaultFusion(PYTORCH_EAGER, groups.num_groups, sum(len(m) for m in groups.members.values() if len(m) > 1))
