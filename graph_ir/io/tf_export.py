"""IR -> TensorFlow GraphDef (`.pb` binary or `.pbtxt` text).

Each node starts from the NodeDef it was imported from (`node.meta["tf.node_def"]`, so attrs and
debug info the IR does not model survive) and gets from the IR: its name, op, inputs (from the
current use-def chains, so passes' rewiring is written), device (`node.device`), the other
decisions (`_compiler_opt.*` attrs) and every attr a pass changed, added or removed (attrs still
holding the imported `Attr` object are copied from the kept AttrValue). Control inputs come from
`node.meta[CONTROL_PREDECESSORS]` (names of nodes that no longer exist are dropped), v1 loop back
edges from `node.meta["tf.back_edges"]`. Constants and graph inputs that passes added become
Const and Placeholder nodes. Functions become the library; versions are kept.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.errors import ExportError
from graph_ir.graph import Function, Graph
from graph_ir.io.atomic import atomic_path
from graph_ir.io.decisions import decision_items
from graph_ir.io.tf_import import DECISION_ATTR_PREFIX, _registered_op
from graph_ir.core import CONTROL_PREDECESSORS
from graph_ir.io._native_log import import_tensorflow
from graph_ir.io.tf_ops import TF_DOMAIN, attr_to_tf, dtype_to_tf, output_layout, write_shape
from graph_ir.types import TensorType

__all__ = ["export_graphdef", "save_graphdef"]

logger = logging.getLogger(__name__)

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/>]")


def save_graphdef(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write `.pbtxt` as text, anything else as a binary GraphDef; atomically."""
    graph_def = export_graphdef(graph)
    if os.fspath(path).lower().endswith(".pbtxt"):
        from google.protobuf import text_format

        data = text_format.MessageToString(graph_def).encode("utf-8")
    else:
        size = graph_def.ByteSize()
        if size >= 2**31:
            raise ExportError(f"GraphDef is {size} bytes; protobuf cannot serialize 2 GiB or more", file=os.fspath(path))
        data = graph_def.SerializeToString()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def export_graphdef(graph: Graph) -> Any:
    if graph.parent is not None:
        raise ExportError(f"graph {graph.name!r} is a subgraph; export its root graph")
    from graph_ir.io.domains import require_domains

    require_domains(graph, {TF_DOMAIN}, "a TensorFlow GraphDef")
    import_tensorflow()
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    extra = graph.model.extra if graph.model is not None else {}
    if "tf.versions" in extra:
        graph_def.versions.CopyFrom(extra["tf.versions"])
    else:
        graph_def.versions.producer = graph.opset_imports.get(TF_DOMAIN, 0)
    if "tf.library_shell" in extra:
        graph_def.library.CopyFrom(extra["tf.library_shell"])
    signatures = {}
    for function in graph.functions.values():
        if function.domain != TF_DOMAIN:
            raise ExportError(f"function {function.name!r} is in domain {function.domain!r}, not {TF_DOMAIN!r}")
        fdef = graph_def.library.function.add()
        _function(fdef, function)
        signatures[function.name] = fdef.signature
    _Body(graph, signatures, in_function=False).write(graph_def.node)
    for function, fdef in zip(graph.functions.values(), graph_def.library.function):  # the shell holds none
        writer = _Body(function.graph, signatures, in_function=True)
        writer.write(fdef.node_def)
        for arg, value in zip(fdef.signature.output_arg, function.graph.outputs):
            fdef.ret[arg.name] = writer.tensor_name(value, where=f"output {arg.name}")
    return graph_def


def _function(fdef: Any, function: Function) -> None:
    """The FunctionDef shell: kept from import, or a signature made from the body's types."""
    graph = function.graph
    shell = graph.meta.get("tf.function_def")
    if shell is not None:
        fdef.CopyFrom(shell)
        if len(fdef.signature.output_arg) != len(graph.outputs) or len(fdef.signature.input_arg) != len(graph.inputs):
            raise ExportError(f"function {function.name!r}: inputs/outputs no longer match its signature")
        return
    fdef.signature.name = function.name
    for value in graph.inputs:
        arg = fdef.signature.input_arg.add(name=value.name)
        arg.type = _dtype_code(value)
    for index, value in enumerate(graph.outputs):
        arg = fdef.signature.output_arg.add(name=f"output_{index}")
        arg.type = _dtype_code(value)


def _dtype_code(value: Value) -> int:
    if not isinstance(value.type, TensorType) or value.type.dtype is None:
        raise ExportError(f"%{value.name} needs a known element type to be written as a TF argument")
    return dtype_to_tf(value.type.dtype, ref=bool(value.meta.get("tf.ref")))


class _Body:
    """Writes the nodes of one graph (the main graph or a function body) as NodeDefs."""

    def __init__(self, graph: Graph, signatures: dict[str, Any], *, in_function: bool) -> None:
        self.graph = graph
        self.signatures = signatures
        self.in_function = in_function
        self.names: dict[int, str] = {}  # id(value) -> node name of synthesized Const/Placeholder
        self.layouts: dict[str, list[tuple[str, int]]] = {}  # node -> (output arg, flat start)

    def write(self, out: Any) -> None:
        graph = self.graph
        taken = {node.name for node in graph}
        built: list[tuple[Node, Any]] = []
        synthesized = [] if self.in_function else [(v, "Placeholder") for v in graph.inputs]
        synthesized += [(v, "Const") for v in graph.initializers.values() if not graph.has_input(v)]
        for value, op in synthesized:
            name = _unique(_INVALID_NAME_CHARS.sub("_", value.name.replace(":", "_")) or "v", taken)
            self.names[id(value)] = name
            _synthesized_node(out.add(), name, op, value)
        for node in graph:
            node_def = out.add()
            self.node_def(node_def, node)
            built.append((node, node_def))
        for node, node_def in built:
            self.inputs(node_def, node, taken)

    def signature(self, node_def: Any) -> Any | None:
        return self.signatures.get(node_def.op) or _registered_op(node_def.op)

    def node_def(self, node_def: Any, node: Node) -> None:
        if any(True for _ in node.subgraphs()):
            raise ExportError("owned subgraphs have no GraphDef form; call functions by name", node=node.name)
        kept = node.meta.get("tf.node_def")
        if kept is not None:
            node_def.CopyFrom(kept)
        node_def.name = node.name
        node_def.op = node.op_type
        node_def.device = node.device or ""
        signature = self.signature(node_def)
        attr_types = {a.name: a.type for a in signature.attr} if signature is not None else {}
        imported = node.meta.get("tf.attrs", {})
        attrs = node.attrs
        for name in list(node_def.attr):
            if name not in attrs or name.startswith(DECISION_ATTR_PREFIX):
                del node_def.attr[name]
        for name, attr in attrs.items():
            if imported.get(name) is not attr:
                try:
                    attr_to_tf(node_def.attr[name], attr, attr_types.get(name))
                except (TypeError, ValueError) as err:
                    raise ExportError(f"cannot write attr: {err}", node=node.name, field=name) from None
        for key, text in decision_items(node):
            if key != "compiler_opt.device":
                node_def.attr["_" + key].s = text.encode("utf-8")
        if self.in_function:
            layout = output_layout(signature, node_def.attr) if signature is not None else None
            if layout is None or sum(len(t) for _, t in layout) != len(node.outputs):
                kept_layout = node.meta.get("tf.output_args")
                layout = kept_layout if kept_layout is not None else [("output", [0] * len(node.outputs))]
            starts, flat = [], 0
            for arg_name, dtypes in layout:
                starts.append((arg_name, flat))
                flat += len(dtypes)
            self.layouts[node.name] = starts

    def inputs(self, node_def: Any, node: Node, taken: set[str]) -> None:
        kept = [text for text in node_def.input if not text.startswith("^")]
        del node_def.input[:]
        back_edges = node.meta.get("tf.back_edges", {})
        for index, value in enumerate(node.inputs):
            if value is None:
                text = back_edges.get(index)
                if text is None:
                    raise ExportError(f"input {index} is missing; TensorFlow has no optional inputs", node=node.name)
                if text.split(":")[0] not in taken:
                    raise ExportError(f"loop back edge names {text!r}, which no longer exists", node=node.name)
                node_def.input.append(text)
            else:
                text = self.tensor_name(value, where=node.name)
                # Keep the source's spelling ("x:0" for "x") where the edge is unchanged.
                if index < len(kept) and _same_tensor(kept[index], text):
                    text = kept[index]
                node_def.input.append(text)
        for name in node.meta.get(CONTROL_PREDECESSORS, ()):
            if name in taken:
                node_def.input.append("^" + name)
            else:
                logger.debug("node %s: dropping control input ^%s (the node is gone)", node.name, name)

    def tensor_name(self, value: Value, *, where: str) -> str:
        if id(value) in self.names:
            return self.names[id(value)]
        producer = value.producer
        if producer is None:
            if self.in_function and self.graph.has_input(value):
                return value.name
            raise ExportError(f"%{value.name} is not defined in graph {self.graph.name!r}", node=where)
        if producer.graph is not self.graph:
            raise ExportError(f"%{value.name} comes from another graph; TF bodies cannot capture", node=where)
        index = value.index or 0
        if not self.in_function:
            return producer.name if index == 0 else f"{producer.name}:{index}"
        arg_name, start = next((a, s) for a, s in reversed(self.layouts[producer.name]) if s <= index)
        return f"{producer.name}:{arg_name}:{index - start}"


def _same_tensor(a: str, b: str) -> bool:
    return a == b or a.removesuffix(":0") == b.removesuffix(":0")


def _unique(name: str, taken: set[str]) -> str:
    candidate, counter = name, 0
    while candidate in taken:
        counter += 1
        candidate = f"{name}_{counter}"
    taken.add(candidate)
    return candidate


def _synthesized_node(node_def: Any, name: str, op: str, value: Value) -> None:
    node_def.name = name
    node_def.op = op
    node_def.attr["dtype"].type = _dtype_code(value)
    if op == "Const":
        attr_to_tf(node_def.attr["value"], Attr("value", AttrKind.TENSOR, value.const), "tensor")
    elif isinstance(value.type, TensorType):
        write_shape(node_def.attr["shape"].shape, value.type.shape)
