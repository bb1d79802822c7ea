"""Structure-aware mutations: parse the input as its format, change its structure, write it
back. Where the input does not parse any more (earlier byte mutations), a text or byte level
mutation of the same kind is used (truncation, dropped/duplicated lines, absurd numbers)."""

from __future__ import annotations

import json
import random
import re
from typing import Any, Callable

__all__ = ["mutate", "ABSURD_DIMS"]

ABSURD_DIMS = (0, -1, -7, 2**31, 2**31 - 1, 2**40, 2**62, 2**63 - 1, 10**18)
_NUMBER = re.compile(rb"-?\d+")


def _absurd(rng: random.Random) -> int:
    return rng.choice(ABSURD_DIMS)


# -- generic -------------------------------------------------------------------------------------
def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))] if data else data


def _lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    if len(lines) < 2:
        return truncate(data, rng)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    choice = rng.randrange(4)
    if choice == 0:
        del lines[i]  # a dropped node / instruction
    elif choice == 1:
        lines.insert(j, lines[i])  # a duplicated node
    elif choice == 2:
        lines[i], lines[j] = lines[j], lines[i]  # reordered: uses before definitions
    else:
        lines[i] = _swap_names(lines[i], lines[j], rng)
    return b"\n".join(lines)


def _swap_names(line: bytes, other: bytes, rng: random.Random) -> bytes:
    """An operand of `line` replaced by a name from `other` (a swapped edge)."""
    names = re.findall(rb"%[\w.\-]+", line)
    others = re.findall(rb"%[\w.\-]+", other)
    if names and others:
        return line.replace(rng.choice(names), rng.choice(others), 1)
    return line


def _numbers(data: bytes, rng: random.Random) -> bytes:
    """One integer in the text (a dim, an index, an attribute) replaced by an absurd one."""
    matches = list(_NUMBER.finditer(data))
    if not matches:
        return truncate(data, rng)
    match = rng.choice(matches)
    return data[: match.start()] + str(_absurd(rng)).encode() + data[match.end():]


def text_mutation(data: bytes, rng: random.Random) -> bytes:
    return rng.choice((truncate, _lines, _lines, _numbers, _numbers))(data, rng)


# -- protobuf graphs (ONNX ModelProto, TF GraphDef) ---------------------------------------------
def _mutate_nodes(nodes: Any, rng: random.Random) -> None:
    if not len(nodes):
        return
    choice = rng.randrange(4)
    i = rng.randrange(len(nodes))
    if choice == 0:
        del nodes[i]
    elif choice == 1:
        nodes.add().CopyFrom(nodes[i])
    elif choice == 2:  # swap an input between two nodes
        a, b = nodes[i], nodes[rng.randrange(len(nodes))]
        if len(a.input) and len(b.input):
            x, y = rng.randrange(len(a.input)), rng.randrange(len(b.input))
            a.input[x], b.input[y] = b.input[y], a.input[x]
    else:  # an input that names a missing or self output
        node = nodes[i]
        if len(node.input):
            node.input[rng.randrange(len(node.input))] = rng.choice([node.output[0] if hasattr(node, "output") and len(node.output) else node.name, "ghost", ""])


def _onnx(data: bytes, rng: random.Random) -> bytes:
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    choice = rng.randrange(5)
    if choice <= 1:
        _mutate_nodes(graph.node, rng)
    elif choice == 2 and len(graph.initializer):
        tensor = graph.initializer[rng.randrange(len(graph.initializer))]
        if len(tensor.dims):
            tensor.dims[rng.randrange(len(tensor.dims))] = _absurd(rng)
        if tensor.raw_data:
            tensor.raw_data = tensor.raw_data[: rng.randrange(len(tensor.raw_data) + 1)]
    elif choice == 3:
        values = list(graph.input) + list(graph.output) + list(graph.value_info)
        if values:
            shape = values[rng.randrange(len(values))].type.tensor_type.shape
            if len(shape.dim):
                shape.dim[rng.randrange(len(shape.dim))].dim_value = _absurd(rng)
    elif len(model.opset_import):
        model.opset_import[0].version = rng.choice((0, -1, 10**6, model.opset_import[0].version + 1))
    return model.SerializeToString()


def _graphdef(message: Any, rng: random.Random) -> None:
    choice = rng.randrange(4)
    if choice <= 1:
        _mutate_nodes(message.node, rng)
    elif len(message.node):
        node = message.node[rng.randrange(len(message.node))]
        for value in node.attr.values():
            which = value.WhichOneof("value")
            if which == "shape" and len(value.shape.dim):
                value.shape.dim[rng.randrange(len(value.shape.dim))].size = _absurd(rng)
                return
            if which == "tensor":
                tensor = value.tensor
                if len(tensor.tensor_shape.dim) and choice == 2:
                    tensor.tensor_shape.dim[rng.randrange(len(tensor.tensor_shape.dim))].size = _absurd(rng)
                elif tensor.tensor_content:
                    tensor.tensor_content = tensor.tensor_content[: rng.randrange(len(tensor.tensor_content) + 1)]
                return
            if which == "i":
                value.i = _absurd(rng)
                return


def _tf_binary(data: bytes, rng: random.Random) -> bytes:
    from tensorflow.core.framework import graph_pb2

    message = graph_pb2.GraphDef()
    message.ParseFromString(data)
    _graphdef(message, rng)
    return message.SerializeToString()


def _tf_text(data: bytes, rng: random.Random) -> bytes:
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    message = text_format.Parse(data.decode("utf-8"), graph_pb2.GraphDef())
    _graphdef(message, rng)
    return text_format.MessageToString(message).encode("utf-8")


def _json(data: bytes, rng: random.Random) -> bytes:
    doc = json.loads(data)
    nodes, edges = doc.get("nodes"), doc.get("edges")
    choice = rng.randrange(5)
    if choice == 0 and nodes:
        del nodes[rng.randrange(len(nodes))]
    elif choice == 1 and nodes:
        nodes.append(dict(rng.choice(nodes)))
    elif choice == 2 and edges and len(edges) > 1:
        a, b = rng.randrange(len(edges)), rng.randrange(len(edges))
        edges[a]["destId"], edges[b]["destId"] = edges[b].get("destId"), edges[a].get("destId")
    elif choice == 3 and nodes:
        node = rng.choice(nodes)
        key = rng.choice(sorted(node) or ["id"])
        node[key] = rng.choice((_absurd(rng), 1e308, -1.5, None, "x", [], float("nan")))
    else:
        doc[rng.choice(("maxFPGAs", "maxSizePerFPGA"))] = rng.choice((0, -3, 10**30, "many", None))
    return json.dumps(doc).encode("utf-8")


_STRUCTURED: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "onnx": _onnx, "tf_binary": _tf_binary, "tf_text": _tf_text, "placement_json": _json,
}
_TEXT = {"tf_text", "hlo", "stablehlo", "placement_json"}


def mutate(fmt: str, data: bytes, rng: random.Random) -> bytes:
    """One structure-aware mutation of an input of format `fmt`."""
    structured = _STRUCTURED.get(fmt)
    if structured is not None and rng.random() < 0.7:
        try:
            return structured(data, rng)
        except Exception:  # noqa: BLE001 - no longer parses: mutate it as bytes/text instead
            pass
    if fmt in _TEXT:
        return text_mutation(data, rng)
    return truncate(data, rng) if rng.random() < 0.5 else _numbers(data, rng)
