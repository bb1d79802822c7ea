"""Mixed precision as the frameworks run it, written into a graph's value types for simulation.

`apply_amp(graph)` turns an fp32 graph into what automatic mixed precision executes on a GPU
(PyTorch `torch.cuda.amp` / apex O1-O2, TensorFlow's auto-mixed-precision graph rewrite): the
math runs in fp16, but the *training state* stays fp32:

- **State tail** (fp32): the nodes that only feed the step's state results through cheap ops
  (elementwise, broadcast, views, slices, concat, casts): the optimizer update (fp32 master
  weights and Adam/SGD moments) and batch-norm running statistics. A state result is a graph
  result shaped like a float graph input (what a training step returns updated); a node is in
  the tail when each of its outputs is a state result or read only by tail nodes.
- **Inputs**: a float graph input read only by the state tail (optimizer moments, running
  statistics) stays fp32; one read only by the fp16 math (images, token memories) becomes fp16;
  one read by both (a parameter: the optimizer updates it, the forward pass multiplies by it)
  stays fp32 and gets one fp32->fp16 cast node feeding its fp16 readers. That cast is the
  per-step weight cast of autocast, or apex O2's copy of master weights into the fp16 model: one
  kernel per parameter reading 4 and writing 2 bytes per element (Micikevicius et al., "Mixed
  Precision Training", ICLR 2018, section 3.1: fp32 master copy, fp16 weights for the forward
  and backward passes; NVIDIA "Training with Mixed Precision" user guide).
- Every other f32 value becomes f16 (gradients reach the optimizer in fp16 and are read there).

Bytes follow from the types (`node_bytes` reads each value's dtype), so the optimizer, which
moved 2-byte state under an all-fp16 rewrite, now moves fp32 state plus fp16 gradients, and the
casts appear as kernels. An inference graph has no parameter update, so its weights are fp16 and
it gets no casts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_ir.dtypes import DType
from graph_ir.op_kinds import ELEMENTWISE_KINDS, OpKind
from graph_ir.order import node_order
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["AmpSummary", "apply_amp", "state_tail"]

logger = logging.getLogger(__name__)

# Ops that may sit between the fp16 math and a graph output without being math themselves.
_TAIL_KINDS = ELEMENTWISE_KINDS | {
    OpKind.BROADCAST, OpKind.RESHAPE, OpKind.TRANSPOSE, OpKind.SLICE, OpKind.PAD, OpKind.CONCAT,
    OpKind.IOTA, OpKind.CONSTANT, OpKind.CAST, OpKind.TUPLE, OpKind.GET_TUPLE_ELEMENT,
}


@dataclass(frozen=True)
class AmpSummary:
    """What `apply_amp` did: values made fp16, nodes kept fp32, casts inserted."""

    to_fp16: int
    state_nodes: int
    casts: int


def _is_f32(value: Value | None) -> bool:
    return value is not None and isinstance(value.type, TensorType) and value.type.dtype == DType.FLOAT32


def _state_outputs(graph: Graph) -> set[int]:
    """ids of the graph's results (top-level outputs, or the elements of an output tuple) that
    are state: shaped like a float graph input (a new parameter, moment or running statistic)."""
    shapes = {v.type.shape for v in graph.inputs if isinstance(v.type, TensorType) and v.type.dtype in (DType.FLOAT32, DType.FLOAT16)}
    results: list[Value] = []
    for value in graph.outputs:
        producer = value.producer
        results.extend(producer.inputs if producer is not None and producer.kind == OpKind.TUPLE else [value])
    return {id(v) for v in results if v is not None and isinstance(v.type, TensorType) and v.type.shape in shapes}


def state_tail(graph: Graph) -> set[Node]:
    """Nodes whose every output is state (`_state_outputs`) or read only by other state-tail
    nodes, through cheap ops only (see the module docstring)."""
    state = _state_outputs(graph)
    tail: set[Node] = set()
    for node in reversed(node_order(graph)):
        if node.kind not in _TAIL_KINDS or node.kind == OpKind.TUPLE:
            continue
        outputs = [v for v in node.outputs if v is not None]
        if outputs and all(id(v) in state or (v.has_uses() and all(u in tail for u in v.users())) for v in outputs):
            tail.add(node)
    return tail


def apply_amp(graph: Graph) -> AmpSummary:
    """Rewrite `graph`'s f32 types to mixed precision in place (module docstring); subgraphs'
    values become f16 too (their bodies run in the caller's precision)."""
    from graph_ir.core import Node as IrNode

    tail = state_tail(graph)
    to_fp16 = 0
    casts: list[IrNode] = []
    top = set(graph)
    for node in graph.all_nodes():
        if node in tail:
            continue
        for value in node.outputs:
            if _is_f32(value):
                value.type = TensorType(DType.FLOAT16, value.type.shape)
                to_fp16 += 1
    for value in graph.inputs:
        if not _is_f32(value):
            continue
        readers = value.users()
        math = [n for n in readers if n not in tail]
        if not math:
            continue  # optimizer state, running statistics: fp32
        if len(math) == len(readers) and not graph.has_output(value):
            value.type = TensorType(DType.FLOAT16, value.type.shape)  # data: fp16
            to_fp16 += 1
            continue
        cast = IrNode("convert", [value], domain="hlo", kind=OpKind.CAST, name=graph.unique_name(f"{value.name or 'param'}.amp_cast"))
        cast.outputs[0].type = TensorType(DType.FLOAT16, value.type.shape)
        cast.outputs[0].name = graph.unique_name(f"{value.name or 'param'}.fp16")
        for use in list(value.uses):
            if use.node in top and use.node not in tail:
                use.node.set_input(use.index, cast.outputs[0])
        casts.append(cast)
    if casts:
        # Each cast just before its first reader: autocast casts a weight when an op first needs
        # it, so casts interleave with the math (and with the host's issue order) instead of
        # all running at the start of the step.
        pending = {id(c.outputs[0]): c for c in casts}
        before: dict[Node, list[Node]] = {}
        for node in graph:
            for value in node.inputs:
                cast = pending.pop(id(value), None) if value is not None else None
                if cast is not None:
                    before.setdefault(node, []).append(cast)
        order = [m for n in graph for m in (*before.get(n, ()), n)]
        graph.extend(casts)
        graph.reorder(order)
    summary = AmpSummary(to_fp16, len(tail), len(casts))
    logger.debug("amp: %s", summary)
    return summary
