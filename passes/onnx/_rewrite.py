"""Helpers shared by the ONNX rewrites: reading constants, making them, swapping nodes.

A rewrite replaces a matched chain by new nodes (or by one of its inputs); the value the chain
produced keeps its name (a graph output's name is the model's interface), and decisions are
dropped with the old nodes (passes that make decisions run after clean-up).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np

from graph_ir.core import Node, Value
from graph_ir.dtypes import DType
from graph_ir.tensors import NumpyTensor, Tensor
from passes.basic._walk import all_graphs, replace_value

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = [
    "ONNX_DOMAINS",
    "RewriteState",
    "adds_after",
    "constant_array",
    "drop_dead_constants",
    "is_onnx",
    "new_constant",
    "onnx_graphs",
    "replace_with_nodes",
    "replace_with_value",
]

logger = logging.getLogger(__name__)

ONNX_DOMAINS = ("", "ai.onnx")


def is_onnx(node: Node, *op_types: str) -> bool:
    return node.domain in ONNX_DOMAINS and (not op_types or node.op_type in op_types)


def onnx_graphs(graph: Graph) -> list[Graph]:
    """The graphs a rewrite walks: the root and nested bodies (function bodies are left alone)."""
    return list(all_graphs(graph, functions=False))


def adds_after(graph: Graph, op_type: str, state: RewriteState) -> Iterator[tuple[Graph, Node, Node, Value, Value | None]]:
    """(level, add, producer, operand, other) for every two-input ONNX Add one of whose operands
    an `op_type` node of the same graph level produces, either side first. Once a rewrite has
    changed the model (`state.changes`), the add's other side is not offered."""
    for level in onnx_graphs(graph):
        for add in list(level.nodes):
            if add.graph is None or not is_onnx(add, "Add") or len(add.inputs) != 2:
                continue
            for side in (0, 1):
                operand, other = add.inputs[side], add.inputs[1 - side]
                producer = operand.producer if operand is not None else None
                if producer is None or producer.graph is not level or not is_onnx(producer, op_type):
                    continue
                changes = state.changes
                yield level, add, producer, operand, other
                if state.changes != changes:
                    break


class RewriteState:
    """What one run of a rewrite pass knows about the whole model: the graph outputs (listed
    values, which other graphs may also return) and the graph inputs (overridable, so never
    constants)."""

    def __init__(self, graph: Graph) -> None:
        from passes.basic._walk import listed_outputs

        self.listed = listed_outputs(graph)
        self.inputs = {v for g in all_graphs(graph) for v in g.inputs}
        self.changes = 0


def constant_array(value: Value | None, state: RewriteState) -> np.ndarray | None:
    """The data of `value` when it is a compile-time constant: an initializer that is not a
    graph input, or the output of an ONNX `Constant` node; else None."""
    if value is None:
        return None
    if value.producer is None:
        if value.const is None or value in state.inputs:
            return None
        return value.const.numpy()
    node = value.producer
    if not is_onnx(node, "Constant") or len(node.attrs) != 1:
        return None
    attr = next(iter(node.attrs.values()))
    if isinstance(attr.value, Tensor):
        return attr.value.numpy()
    if attr.name == "value_float":
        return np.array(attr.value, dtype=np.float32)
    if attr.name == "value_floats":
        return np.array(attr.value, dtype=np.float32)
    if attr.name == "value_int":
        return np.array(attr.value, dtype=np.int64)
    if attr.name == "value_ints":
        return np.array(attr.value, dtype=np.int64)
    return None


def new_constant(graph: Graph, array: np.ndarray, name: str) -> Value:
    array = np.asarray(array, order="C")
    return graph.add_constant(NumpyTensor(array, DType.from_numpy(array.dtype)), name)


def replace_with_value(node: Node, output: Value, replacement: Value, state: RewriteState) -> bool:
    """Make every use of `node`'s `output` read `replacement`, then drop `node` when nothing
    reads it any more. Refused (False) when `output` is a graph output and `replacement` is not
    a node result the rename can move to (a graph input or a constant would change the model's
    interface or name two outputs alike)."""
    graph = node.graph
    assert graph is not None
    if output in state.listed:
        producer = replacement.producer
        if producer is None or replacement in state.listed or producer.graph is not graph:
            return False
        replace_value(output, replacement, state.listed)
        name = output.name
        graph.rename_value(output, graph.unique_name(f"{name}.removed"))
        graph.rename_value(replacement, name)
    else:
        replace_value(output, replacement, state.listed)
    if not any(v.has_uses() or v in state.listed for v in node.outputs):
        graph.remove_nodes([node])
    state.changes += 1
    return True


def replace_with_nodes(old: Sequence[Node], result: Value, new: Iterable[Node], new_result: Value, state: RewriteState) -> None:
    """Insert `new` before the last of `old` (which produces `result`), move every use of `result` (the chain's value)
    to `new_result`, which takes its name, and remove the `old` nodes that nothing reads."""
    graph = old[0].graph
    assert graph is not None
    new = list(new)
    graph.insert_before(old[-1], new)  # every input of the chain exists before its last node
    name = result.name
    if new_result.type is None:
        new_result.type = result.type  # the chain computes the same value
    replace_value(result, new_result, state.listed)
    graph.rename_value(result, graph.unique_name(f"{name}.removed"))
    graph.rename_value(new_result, name)
    for node in reversed(old):
        if node.graph is not None and not any(v.has_uses() or v in state.listed for v in node.outputs):
            graph.remove_nodes([node])
    state.changes += 1


def drop_dead_constants(graph: Graph, values: Iterable[Value], state: RewriteState) -> None:
    """Remove initializers and Constant nodes among `values` that nothing reads any more."""
    for value in values:
        if value is None or value.has_uses() or value in state.listed or value in state.inputs:
            continue
        if value.producer is None and value.const is not None and value.graph is not None:
            value.graph.remove_initializer(value)
        elif value.producer is not None and is_onnx(value.producer, "Constant") and value.producer.graph is not None:
            value.producer.graph.remove_nodes([value.producer])
