"""Values and nodes, with use-def chains that the IR keeps correct itself.

A `Value` knows its producer (a node output) or its owning graph (a graph input or a constant),
and the `(node, input_index)` pairs that use it. `Node.inputs` is a read-only tuple: inputs change
only through `Node` methods, which update the uses of the old and new values.

Decisions are first-class fields on nodes: `device`, `fusion_group`, `priority` and `tile`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

from graph_ir.attrs import Attr, AttrKind
from graph_ir.dtypes import DType
from graph_ir.errors import GraphIRError
from graph_ir.op_kinds import OpKind, onnx_op_kind
from graph_ir.tensors import Tensor
from graph_ir.types import Shape, TensorType, Type

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["Value", "Node", "Use", "CONTROL_PREDECESSORS", "UNKNOWN_VALUE"]

_GRAPH_KINDS = (AttrKind.GRAPH, AttrKind.GRAPHS)

# node.meta key: names of nodes (same graph) that must run before this one although no value
# flows between them (TF `^x` control inputs, HLO control-predecessors). Names, not Node objects,
# so clones and exporters keep them without remapping; names of removed nodes are ignored.
CONTROL_PREDECESSORS = "control_predecessors"
# node.meta key: True when the node's result depends on data the IR does not have (an HLO
# constant whose text elided its literal); passes must not merge or fold such a node.
UNKNOWN_VALUE = "unknown_value"


class Use(NamedTuple):
    node: Node
    index: int


class Value:
    """An SSA value: a node output, a graph input, or a constant (initializer)."""

    __slots__ = ("name", "type", "const", "_producer", "_index", "_uses", "_graph", "meta", "doc_string")

    def __init__(self, name: str = "", type: Type | None = None, *, const: Tensor | None = None) -> None:
        self.name = name
        self.type = type if type is not None or const is None else const.type
        self.const = const
        self._producer: Node | None = None
        self._index: int | None = None
        # An insertion-ordered set of uses: O(1) add and remove.
        self._uses: dict[Use, None] = {}
        self._graph: Graph | None = None
        self.meta: dict[str, Any] = {}
        self.doc_string = ""

    # -- definition ---------------------------------------------------------------------------
    @property
    def producer(self) -> Node | None:
        return self._producer

    @property
    def index(self) -> int | None:
        """Output index in the producer, None for graph inputs and constants."""
        return self._index

    @property
    def graph(self) -> Graph | None:
        """The graph that defines this value."""
        if self._producer is not None:
            return self._producer.graph
        return self._graph

    @property
    def is_constant(self) -> bool:
        return self.const is not None

    @property
    def is_graph_input(self) -> bool:
        graph = self._graph
        return self._producer is None and graph is not None and graph.has_input(self)

    def is_graph_output(self) -> bool:
        graph = self.graph
        return graph is not None and graph.has_output(self)

    # -- type shortcuts -----------------------------------------------------------------------
    @property
    def dtype(self) -> DType | None:
        return self.type.dtype if isinstance(self.type, TensorType) else None

    @property
    def shape(self) -> Shape | None:
        return self.type.shape if isinstance(self.type, TensorType) else None

    def nbytes(self) -> int | None:
        return self.type.nbytes() if isinstance(self.type, TensorType) else None

    # -- uses ---------------------------------------------------------------------------------
    @property
    def uses(self) -> tuple[Use, ...]:
        return tuple(self._uses)

    def users(self) -> list[Node]:
        """Distinct nodes that use this value, in first-use order."""
        return list(dict.fromkeys(use.node for use in self._uses))

    @property
    def num_uses(self) -> int:
        return len(self._uses)

    def has_uses(self) -> bool:
        return bool(self._uses)

    def replace_all_uses_with(self, other: Value, *, replace_graph_outputs: bool = True) -> None:
        """Point every use of this value at `other` (and, by default, graph outputs too)."""
        if other is self:
            return
        for use in list(self._uses):
            use.node.set_input(use.index, other)
        if replace_graph_outputs:
            graph = self.graph
            if graph is not None and graph.has_output(self):
                graph.replace_output(self, other)

    def __repr__(self) -> str:
        return f"Value(%{self.name}: {self.type})"


class Node:
    """One operation. Identity-hashed; belongs to at most one graph at a time."""

    __slots__ = (
        "name",
        "op_type",
        "domain",
        "overload",
        "kind",
        "_attrs",
        "_graph_attrs",
        "_inputs",
        "_outputs",
        "graph",
        "device",
        "fusion_group",
        "priority",
        "tile",
        "meta",
        "doc_string",
        "metadata_props",
    )

    def __init__(
        self,
        op_type: str,
        inputs: Iterable[Value | None] = (),
        *,
        outputs: int | Sequence[str | Value] = 1,
        attrs: Mapping[str, Any] | Iterable[Attr] = (),
        domain: str = "",
        name: str = "",
        kind: OpKind | None = None,
        overload: str = "",
        doc_string: str = "",
    ) -> None:
        self.name = name
        self.op_type = op_type
        self.domain = domain
        self.overload = overload
        self.kind = kind if kind is not None else onnx_op_kind(op_type, domain)
        self.graph: Graph | None = None
        self.device: str | None = None
        self.fusion_group: int | None = None
        self.priority: float | None = None
        self.tile: tuple[int, ...] | None = None
        self.meta: dict[str, Any] = {}
        self.doc_string = doc_string
        self.metadata_props: dict[str, str] = {}
        self._attrs: dict[str, Attr] = {}
        # How many attributes hold subgraphs: `subgraphs()` is asked of every node by every
        # whole-model walk, and almost no node has one.
        self._graph_attrs = 0
        if isinstance(attrs, dict) or (not isinstance(attrs, (tuple, list)) and isinstance(attrs, Mapping)):
            for attr_name, value in attrs.items():
                self.set_attr(Attr.infer(attr_name, value))
        else:
            for attr in attrs:
                self.set_attr(attr)
        self._inputs: tuple[Value | None, ...] = ()
        self._set_inputs(tuple(inputs))
        if isinstance(outputs, int):
            made = [Value() for _ in range(outputs)]
        else:
            made = [v if isinstance(v, Value) else Value(v) for v in outputs]
        for index, value in enumerate(made):
            if value._producer is not None or value._graph is not None:
                raise GraphIRError(f"value %{value.name} is already defined elsewhere", node=name)
            value._producer = self
            value._index = index
        self._outputs: tuple[Value, ...] = tuple(made)

    # -- inputs -------------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self._outputs

    def _set_inputs(self, inputs: tuple[Value | None, ...]) -> None:
        for index, old in enumerate(self._inputs):
            if old is not None:
                old._uses.pop(Use(self, index), None)
        for index, new in enumerate(inputs):
            if new is not None:
                if not isinstance(new, Value):
                    raise GraphIRError(f"input {index} is a {type(new).__name__}, not a Value", node=self.name)
                new._uses[Use(self, index)] = None
        self._inputs = inputs

    def set_input(self, index: int, value: Value | None) -> None:
        old = self._inputs[index]
        if old is value:
            return
        if old is not None:
            old._uses.pop(Use(self, index), None)
        if value is not None:
            value._uses[Use(self, index)] = None
        self._inputs = self._inputs[:index] + (value,) + self._inputs[index + 1 :]

    def replace_inputs(self, inputs: Iterable[Value | None]) -> None:
        """Replace the whole input list (the number of inputs may change)."""
        self._set_inputs(tuple(inputs))

    def replace_input_with(self, old: Value, new: Value | None) -> None:
        for index, value in enumerate(self._inputs):
            if value is old:
                self.set_input(index, new)

    def detach_inputs(self) -> None:
        """Drop all inputs (and their uses), recursively for nodes of owned subgraphs."""
        self._set_inputs(())
        for graph in self.subgraphs():
            for node in graph.all_nodes():
                node._set_inputs(())

    # -- attributes ---------------------------------------------------------------------------
    @property
    def attrs(self) -> Mapping[str, Attr]:
        return MappingProxyType(self._attrs)

    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute `name`, or `default` when absent."""
        attr = self._attrs.get(name)
        return default if attr is None else attr.value

    def set_attr(self, attr: Attr) -> None:
        old = self._attrs.get(attr.name)
        holds = attr.kind in _GRAPH_KINDS
        for graph in attr.graphs() if holds else ():
            if graph.parent is not None and graph.parent is not self:
                raise GraphIRError(f"subgraph {graph.name!r} already belongs to node {graph.parent.name!r}", node=self.name)
        if old is not None and old.kind in _GRAPH_KINDS:
            for graph in old.graphs():
                graph.parent = None
            self._graph_attrs -= 1
        for graph in attr.graphs() if holds else ():
            graph.parent = self
        self._graph_attrs += holds
        self._attrs[attr.name] = attr

    def remove_attr(self, name: str) -> None:
        attr = self._attrs.pop(name)
        if attr.kind in _GRAPH_KINDS:
            self._graph_attrs -= 1
            for graph in attr.graphs():
                graph.parent = None

    @property
    def has_subgraphs(self) -> bool:
        return self._graph_attrs > 0

    def subgraphs(self) -> Iterator[Graph]:
        if not self._graph_attrs:
            return
        for attr in self._attrs.values():
            if attr.kind in _GRAPH_KINDS:
                yield from attr.graphs()

    def implicit_inputs(self) -> list[Value]:
        """Outer-scope values that this node's subgraphs capture (its hidden dependencies):
        those their nodes read, and those a subgraph returns directly as an output."""
        captured: dict[Value, None] = {}
        for graph in self.subgraphs():
            for level in (graph, *graph.subgraphs()):
                for node in level._nodes:
                    for value in node._inputs:
                        if value is not None and not _defined_within(value, self):
                            captured[value] = None
                for value in level._outputs:
                    if not _defined_within(value, self):
                        captured[value] = None
        return list(captured)

    # -- misc ---------------------------------------------------------------------------------
    def users(self) -> list[Node]:
        seen: dict[Node, None] = {}
        for value in self._outputs:
            for use in value._uses:
                seen[use.node] = None
        return list(seen)

    def control_predecessors(self) -> list[Node]:
        """Nodes of this graph named in `meta[CONTROL_PREDECESSORS]` that still exist."""
        names = self.meta.get(CONTROL_PREDECESSORS)
        if not names or self.graph is None:
            return []
        found = (self.graph.find_node(name) for name in names)
        return [node for node in found if node is not None and node is not self]

    def predecessors(self) -> list[Node]:
        seen: dict[Node, None] = {}
        for value in self._inputs:
            if value is not None and value._producer is not None:
                seen[value._producer] = None
        return list(seen)

    def clear_decisions(self) -> None:
        self.device = None
        self.fusion_group = None
        self.priority = None
        self.tile = None

    def __repr__(self) -> str:
        qual = f"{self.domain}::{self.op_type}" if self.domain else self.op_type
        return f"Node({self.name!r}, {qual})"


def _defined_within(value: Value, node: Node) -> bool:
    """True when `value` is defined inside one of `node`'s subgraphs (at any depth)."""
    graph = value.graph
    while graph is not None:
        parent = graph.parent
        if parent is node:
            return True
        graph = parent.graph if parent is not None else None
    return False
