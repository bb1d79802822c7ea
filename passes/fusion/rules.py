"""Which producer/consumer pairs may fuse, by op kind (XLA's instruction-fusion rules, simplified).

- *Loop fusion*: a cheap producer (elementwise, or a layout/data-movement op that is a pure index
  map: broadcast, reshape, transpose, slice, pad, concat, iota, constant) fuses into a consumer
  that is itself cheap or a reduction-like op (reduce, softmax, normalisation, pooling): the
  consumer recomputes the producer's element instead of reading it from memory.
- *Epilogue fusion*: an elementwise consumer fuses into a reduction-like or a heavy producer
  (matmul, convolution) when it is that producer's only user, as cuBLAS/cuDNN epilogues
  (bias, activation) and XLA's reduction epilogue fusion do.
- Heavy ops never take producers in (XLA leaves library calls unfused on their inputs), and
  nothing fuses across control flow, subgraphs, side effects, collectives, sort/top-k,
  scatter or custom calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_ir.op_kinds import ELEMENTWISE_KINDS, SIDE_EFFECT_KINDS, OpKind

if TYPE_CHECKING:
    from graph_ir.core import Node

__all__ = ["CHEAP_KINDS", "HEAVY_KINDS", "REDUCTION_KINDS", "can_fuse_into", "extends_epilogue", "is_epilogue", "is_hero", "fusible"]

CHEAP_KINDS = ELEMENTWISE_KINDS | {
    OpKind.BROADCAST,
    OpKind.RESHAPE,
    OpKind.TRANSPOSE,
    OpKind.SLICE,
    OpKind.PAD,
    OpKind.CONCAT,
    OpKind.IOTA,
    OpKind.CONSTANT,
}
REDUCTION_KINDS = frozenset({OpKind.REDUCE, OpKind.SOFTMAX, OpKind.NORM, OpKind.POOL, OpKind.ARG_REDUCE})
HEAVY_KINDS = frozenset({OpKind.MATMUL, OpKind.CONV, OpKind.CONV_TRANSPOSE})


def fusible(node: Node) -> bool:
    """A node that may be part of any fused kernel at all."""
    if node.kind in SIDE_EFFECT_KINDS:
        return False
    if node._attrs and node.kind not in REDUCTION_KINDS and any(True for _ in node.subgraphs()):
        # Control flow and calls stay unfused; a reduction's subgraph is its scalar combiner
        # (HLO reduce / reduce-window `to_apply`), part of the op: XLA fuses such reductions.
        return False
    return node.kind in CHEAP_KINDS or node.kind in REDUCTION_KINDS or node.kind in HEAVY_KINDS


def is_hero(node: Node) -> bool:
    """A reduction-like or heavy op: a fused group holds at most one."""
    return node.kind in REDUCTION_KINDS or node.kind in HEAVY_KINDS


def can_fuse_into(producer: Node, consumer: Node) -> bool:
    """Loop fusion: the producer's computation moves into the consumer's kernel."""
    return (
        fusible(producer)
        and fusible(consumer)
        and producer.kind in CHEAP_KINDS
        and (consumer.kind in CHEAP_KINDS or consumer.kind in REDUCTION_KINDS)
    )


def is_epilogue(producer: Node, consumer: Node, num_users: int) -> bool:
    """Epilogue fusion: an elementwise sole user joins a reduction or heavy producer's kernel."""
    return (
        num_users == 1
        and fusible(producer)
        and fusible(consumer)
        and (producer.kind in REDUCTION_KINDS or producer.kind in HEAVY_KINDS)
        and consumer.kind in ELEMENTWISE_KINDS
    )


def extends_epilogue(node: Node, user: Node, num_users: int) -> bool:
    """An elementwise sole user continues an epilogue chain that `node` already belongs to."""
    return num_users == 1 and fusible(user) and user.kind in ELEMENTWISE_KINDS
