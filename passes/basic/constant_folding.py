"""Constant folding: evaluate ONNX nodes whose inputs are all known, replace them by constants."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Value
from graph_ir.dtypes import DType
from graph_ir.tensors import NumpyTensor
from graph_ir.types import TensorType
from passes.basic._walk import all_graphs, has_side_effects, listed_outputs, replace_value
from passes.infra.base import Pass, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from onnx import AttributeProto

    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["ConstantFolding"]

logger = logging.getLogger(__name__)

_ONNX_DOMAINS = ("", "ai.onnx")


class _CannotFold(Exception):
    """This node cannot be evaluated here (an attribute kind, an op the evaluator lacks...)."""


@register_pass
@dataclass(frozen=True)
class ConstantFolding(Pass):
    """Replace ONNX default-domain nodes whose inputs are all constants by new initializers.

    Constants are initializers that are not graph inputs (a caller may override those) and the
    outputs of `Constant` nodes. Nodes run through `onnx.reference.ReferenceEvaluator` at the
    graph's opset. A node is left alone when any output would exceed `size_limit` bytes, when it
    is random or side-effecting, has subgraphs, has attributes that are references (function
    bodies are not folded) or when the evaluator fails on it (logged at debug level).
    With `fold_shape_ops`, `Shape` and `Size` of a value whose shape is fully static fold even
    when the value itself is not constant. The new constants keep the folded outputs' names, and
    constants and `Constant` nodes that only the folded nodes used are removed.

    Nodes left computed because of `size_limit` are reported: one INFO log line per run with
    their count, the largest result and how to lift the limit, and `skipped_for_size`, the
    list of (node name, bytes) of the last run, on the pass instance's `report` (so a driver
    can show it).
    """

    name = "constant-folding"
    size_limit: int = option(1 << 20, "largest folded output in bytes; bigger results stay computed (-1: no limit)")
    fold_shape_ops: bool = option(True, "fold Shape/Size of values with fully static shapes")
    same_size: bool = option(False, "also fold results above size-limit that are no bigger than their largest constant input (weight Transposes, Casts)")

    def call(self, graph: Graph) -> PassResult:
        from graph_ir.io.onnx_export import DEFAULT_OPSET  # what the graph means when it names no opset

        root = graph.root
        opset = root.opset_imports.get("", root.opset_imports.get("ai.onnx", DEFAULT_OPSET))
        folder = _Folder(self, opset, listed_outputs(graph), {v for g in all_graphs(graph) for v in g.inputs})
        for sub in list(all_graphs(graph, functions=False)):
            for node in sub.nodes:
                folder.try_fold(node)
        folder.remove_consumed_inputs()
        if folder.folded:
            logger.debug("constant-folding folded %d nodes", folder.folded)
        self.report["skipped_for_size"] = list(folder.skipped_for_size)
        if folder.skipped_for_size:
            largest = max(folder.skipped_for_size, key=lambda item: item[1])
            logger.info(
                "constant-folding: %d nodes not folded because their results exceed size-limit=%d bytes "
                "(largest: %r, %d bytes); fold them with constant-folding{size-limit=-1} or {same-size=true}",
                len(folder.skipped_for_size), self.size_limit, largest[0], largest[1],
            )
        return PassResult(graph, folder.folded > 0)

    @property
    def report(self) -> dict:
        """What the last run left undone (see the class docstring); one dict per instance."""
        found = self.__dict__.get("_report")
        if found is None:
            found = {}
            object.__setattr__(self, "_report", found)
        return found


class _Folder:
    def __init__(self, config: ConstantFolding, opset: int, listed: dict[Value, list[Graph]], inputs: set[Value]) -> None:
        self.config = config
        self.opset = opset
        self.listed = listed
        self.graph_inputs = inputs
        self.folded = 0
        self._constant_node_values: dict[Node, list[np.ndarray] | None] = {}
        self._consumed: dict[Value, None] = {}
        self.skipped_for_size: list[tuple[str, int]] = []

    def _too_big(self, nbytes: int, node: Node) -> bool:
        limit = self.config.size_limit
        if limit < 0 or nbytes <= limit:
            return False
        if self.config.same_size:
            largest_input = max((v.nbytes() or 0 for v in node.inputs if v is not None and self.constant_array(v) is not None), default=0)
            if nbytes <= largest_input:
                return False
        self.skipped_for_size.append((node.name or node.op_type, int(nbytes)))
        return True

    def try_fold(self, node: Node) -> None:
        if node.domain not in _ONNX_DOMAINS or node.op_type == "Constant" or node.graph is None:
            return
        if has_side_effects(node) or any(True for _ in node.subgraphs()):
            return
        declared = max((v.nbytes() or 0 for v in node.outputs), default=0)
        if self._too_big(declared, node):
            return  # declared too large: do not spend the time and memory to evaluate it
        results = self._shape_op(node) if self.config.fold_shape_ops else None
        if results is None:
            arrays = [None if v is None else self.constant_array(v) for v in node.inputs]
            if any(a is None and v is not None for a, v in zip(arrays, node.inputs)):
                return
            try:
                results = _evaluate(node, arrays, self.opset)
            except _CannotFold as err:
                logger.debug("not folding %s: %s", node, err)
                return
        self._replace(node, results)

    def constant_array(self, value: Value) -> np.ndarray | None:
        """The value's data when it is a compile-time constant, else None."""
        if value.const is not None and value.producer is None:
            return None if value in self.graph_inputs else value.const.numpy()
        producer = value.producer
        if producer is None or producer.op_type != "Constant" or producer.domain not in _ONNX_DOMAINS:
            return None
        if producer not in self._constant_node_values:
            direct = _constant_attribute(producer)
            if direct is not None:  # the common case, without building a reference evaluator (~5 ms each)
                self._constant_node_values[producer] = [direct]
                return direct
            try:
                self._constant_node_values[producer] = _evaluate(producer, [], self.opset)
            except _CannotFold as err:
                logger.debug("cannot read %s: %s", producer, err)
                self._constant_node_values[producer] = None
        values = self._constant_node_values[producer]
        return None if values is None else values[value.index or 0]

    def _shape_op(self, node: Node) -> list[np.ndarray] | None:
        if node.op_type not in ("Shape", "Size") or not node.inputs or node.inputs[0] is None:
            return None
        shape = node.inputs[0].shape
        if shape is None or not shape.is_static:
            return None
        if node.op_type == "Size":
            return [np.array(shape.numel(), dtype=np.int64)]
        start, end = node.attr("start", 0), node.attr("end", None)
        return [np.array(shape[start:end], dtype=np.int64)]

    def _replace(self, node: Node, results: Sequence[np.ndarray]) -> None:
        graph = node.graph
        assert graph is not None
        tensors = []
        for value, array in zip(node.outputs, results):
            if not (value.has_uses() or value in self.listed):
                tensors.append(None)  # an unused output needs no constant
                continue
            tensor = _to_tensor(array, value)
            if tensor is None or (tensor.nbytes > (value.nbytes() or 0) and self._too_big(tensor.nbytes, node)):
                return
            tensors.append(tensor)
        if all(t is None for t in tensors):
            return  # a dead node: removing it is dce's job
        fresh: list[Value] = []
        for value, tensor in zip(node.outputs, tensors):
            if tensor is not None:
                constant = Value(value.name, const=tensor)
                replace_value(value, constant, self.listed)
                fresh.append(constant)
        inputs = [v for v in node.inputs if v is not None]
        graph.remove_nodes([node])
        for constant in fresh:  # the names are free now that the node is gone
            graph.add_initializer(constant)
        self._consumed.update(dict.fromkeys(inputs))
        self.folded += 1

    def remove_consumed_inputs(self) -> None:
        """Drop constants and Constant nodes that only folded nodes used."""
        for value in self._consumed:
            if value.has_uses() or value in self.listed or value in self.graph_inputs:
                continue
            producer = value.producer
            if producer is None and value.const is not None and value.graph is not None:
                value.graph.remove_initializer(value)  # not a graph input, so an initializer
            elif producer is not None and producer.op_type == "Constant" and producer.graph is not None:
                producer.graph.remove_nodes([producer])


def _constant_attribute(node: Node) -> np.ndarray | None:
    """The value of a `Constant` node holding a tensor or a float/int (list), else None (strings,
    sparse tensors: the reference evaluator reads those)."""
    from graph_ir.tensors import Tensor

    if len(node.attrs) != 1:
        return None
    (name, attr), = node.attrs.items()
    simple = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}
    if name in simple:
        return np.asarray(attr.value, dtype=simple[name])
    if name != "value" or not isinstance(attr.value, Tensor):
        return None
    try:
        return np.asarray(attr.value.numpy())
    except (TypeError, ValueError):
        return None


def _to_tensor(array: np.ndarray, declared: Value) -> NumpyTensor | None:
    if not isinstance(array, np.ndarray) or array.dtype == object:
        return None
    try:
        dtype = DType.from_numpy(array.dtype)
    except ValueError:
        return None
    if isinstance(declared.type, TensorType) and declared.type.dtype not in (None, dtype):
        logger.debug("not folding %%%s: evaluated as %s, declared %s", declared.name, dtype, declared.type.dtype)
        return None
    return NumpyTensor(np.asarray(array, order="C"), dtype)  # ascontiguousarray would make 0-d arrays 1-d


_EVALUATOR_CACHE_SIZE = 256
_EVALUATORS: dict[tuple[int, bytes], object] = {}


def _evaluate(node: Node, arrays: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    input_names = ["" if a is None else f"input_{i}" for i, a in enumerate(arrays)]
    output_names = [f"output_{i}" for i in range(len(node.outputs))]
    proto = helper.make_node(node.op_type, input_names, output_names)
    proto.attribute.extend(_attribute_proto(attr) for attr in node.attrs.values())
    feeds = {name: array for name, array in zip(input_names, arrays) if array is not None}
    try:
        # Building an evaluator costs ~5 ms; nodes with the same op, attributes and arity (most
        # Expand, Cast, Unsqueeze... of an export) share one, since names are normalised above.
        key = (opset, proto.SerializeToString())
        evaluator = _EVALUATORS.get(key)
        if evaluator is None:
            if len(_EVALUATORS) >= _EVALUATOR_CACHE_SIZE:
                _EVALUATORS.pop(next(iter(_EVALUATORS)))
            evaluator = _EVALUATORS[key] = ReferenceEvaluator(proto, opsets={"": opset})
        results = evaluator.run(None, feeds)
    except Exception as err:  # the reference evaluator raises anything from NotImplementedError on
        raise _CannotFold(f"{type(err).__name__}: {err}") from err
    return [np.asarray(r) if isinstance(r, (np.ndarray, np.generic)) else r for r in results]


def _attribute_proto(attr: Attr) -> AttributeProto:
    from onnx import AttributeProto, helper, numpy_helper

    kinds = {
        AttrKind.INT: AttributeProto.INT,
        AttrKind.FLOAT: AttributeProto.FLOAT,
        AttrKind.STRING: AttributeProto.STRING,
        AttrKind.INTS: AttributeProto.INTS,
        AttrKind.FLOATS: AttributeProto.FLOATS,
        AttrKind.STRINGS: AttributeProto.STRINGS,
    }
    if attr.kind in kinds:
        return helper.make_attribute(attr.name, attr.value, attr_type=kinds[attr.kind])
    if attr.kind is AttrKind.TENSOR:
        return helper.make_attribute(attr.name, numpy_helper.from_array(attr.value.numpy()), attr_type=AttributeProto.TENSOR)
    if attr.kind is AttrKind.TENSORS:
        tensors = [numpy_helper.from_array(t.numpy()) for t in attr.value]
        return helper.make_attribute(attr.name, tensors, attr_type=AttributeProto.TENSORS)
    raise _CannotFold(f"attribute '{attr.name}' of kind {attr.kind.value} is not folded")
