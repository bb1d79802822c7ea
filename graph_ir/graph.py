"""Graphs (a main graph or a subgraph), functions, and model-level information.

A `Graph` holds its nodes in order (an insertion-ordered dict: O(1) append and removal), its
inputs, outputs and constants. A subgraph (an ONNX If branch, a TF While body, an HLO fusion
computation) is a `Graph` whose `parent` is the node that owns it; its nodes may use values of
enclosing graphs. Reusable bodies called by name (ONNX local functions, a TF function library,
HLO computations called from several places) live in the root graph's `functions`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from graph_ir.attrs import Attr
from graph_ir.core import Node, Value
from graph_ir.errors import GraphIRError
from graph_ir.tensors import Tensor

if TYPE_CHECKING:
    import networkx

__all__ = ["Graph", "Function", "ModelInfo", "FunctionId"]

FunctionId = tuple[str, str, str]  # (domain, name, overload)


@dataclass
class ModelInfo:
    """What the source file says about the model as a whole (kept for lossless export)."""

    source_format: str = ""
    source_path: str | None = None
    ir_version: int | None = None
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    metadata_props: dict[str, str] = field(default_factory=dict)
    # Source-specific pieces the IR does not model, kept verbatim (e.g. serialized protos).
    extra: dict[str, Any] = field(default_factory=dict)


class Graph:
    """A dataflow graph. Mutate it through its methods so names and ownership stay consistent."""

    __slots__ = (
        "name",
        "parent",
        "doc_string",
        "meta",
        "metadata_props",
        "opset_imports",
        "functions",
        "model",
        "_inputs",
        "_outputs",
        "_initializers",
        "_nodes",
        "_node_names",
        "_value_names",
        "_name_counter",
    )

    def __init__(
        self,
        name: str = "main",
        *,
        inputs: Iterable[Value] = (),
        outputs: Iterable[Value] = (),
        nodes: Iterable[Node] = (),
        initializers: Iterable[Value] = (),
        opset_imports: dict[str, int] | None = None,
        doc_string: str = "",
    ) -> None:
        self.name = name
        self.parent: Node | None = None
        self.doc_string = doc_string
        self.meta: dict[str, Any] = {}
        self.metadata_props: dict[str, str] = {}
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self.functions: dict[FunctionId, Function] = {}
        self.model: ModelInfo | None = None
        self._inputs: list[Value] = []
        self._outputs: list[Value] = []
        self._initializers: dict[str, Value] = {}
        self._nodes: dict[Node, None] = {}
        self._node_names: dict[str, Node] = {}
        self._value_names: dict[str, Value] = {}
        self._name_counter = itertools.count()
        for value in initializers:
            self.add_initializer(value)
        for value in inputs:
            self.add_input(value)
        self.extend(nodes)
        for value in outputs:
            self.add_output(value)

    # -- scope --------------------------------------------------------------------------------
    @property
    def root(self) -> Graph:
        graph = self
        while graph.parent is not None and graph.parent.graph is not None:
            graph = graph.parent.graph
        return graph

    def enclosing_graphs(self) -> Iterator[Graph]:
        """This graph, then each graph around it, outwards."""
        graph: Graph | None = self
        while graph is not None:
            yield graph
            graph = graph.parent.graph if graph.parent is not None else None

    def lookup(self, name: str) -> Value | None:
        """Find a value by name here or in an enclosing scope."""
        for graph in self.enclosing_graphs():
            value = graph._value_names.get(name)
            if value is not None:
                return value
        return None

    def unique_name(self, prefix: str) -> str:
        """A value or node name not used in this graph or any enclosing one."""
        prefix = prefix or "v"
        if self.lookup(prefix) is None and prefix not in self._node_names:
            return prefix
        while True:
            candidate = f"{prefix}__{next(self._name_counter)}"
            if self.lookup(candidate) is None and candidate not in self._node_names:
                return candidate

    def _claim_value(self, value: Value) -> None:
        if not value.name:
            value.name = self.unique_name("v")
        existing = self._value_names.get(value.name)
        if existing is not None and existing is not value:
            raise GraphIRError(f"value name %{value.name} is already defined in graph {self.name!r}")
        self._value_names[value.name] = value

    def rename_value(self, value: Value, new_name: str) -> None:
        if self._value_names.get(value.name) is value:
            del self._value_names[value.name]
        value.name = new_name
        self._claim_value(value)

    def rename_node(self, node: Node, new_name: str) -> None:
        """Give a node of this graph a new (unused) name."""
        if node.graph is not self:
            raise GraphIRError(f"node {node.name!r} is not in graph {self.name!r}", node=node.name)
        if new_name in self._node_names and self._node_names[new_name] is not node:
            raise GraphIRError(f"node name {new_name!r} is already used in graph {self.name!r}", node=node.name)
        if self._node_names.get(node.name) is node:
            del self._node_names[node.name]
        node.name = new_name
        self._node_names[new_name] = node

    # -- inputs, outputs, constants ----------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value, ...]:
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Value, ...]:
        return tuple(self._outputs)

    @property
    def initializers(self) -> dict[str, Value]:
        """Constants by name (a copy of the mapping: change it through the methods)."""
        return dict(self._initializers)

    def has_input(self, value: Value) -> bool:
        return any(v is value for v in self._inputs)

    def has_output(self, value: Value) -> bool:
        return any(v is value for v in self._outputs)

    def add_input(self, value: Value) -> Value:
        if value.producer is not None:
            raise GraphIRError(f"graph input %{value.name} is already produced by node {value.producer.name!r}")
        if value._graph is not None and value._graph is not self:
            raise GraphIRError(f"value %{value.name} already belongs to graph {value._graph.name!r}")
        if value.name not in self._initializers or self._initializers[value.name] is not value:
            self._claim_value(value)
        value._graph = self
        self._inputs.append(value)
        return value

    def remove_input(self, value: Value) -> None:
        if value.has_uses():
            raise GraphIRError(f"graph input %{value.name} still has {value.num_uses} uses")
        self._inputs = [v for v in self._inputs if v is not value]
        if value.name not in self._initializers:
            self._value_names.pop(value.name, None)
            value._graph = None

    def add_initializer(self, value: Value) -> Value:
        if value.const is None:
            raise GraphIRError(f"initializer %{value.name} has no constant tensor")
        if value.producer is not None:
            raise GraphIRError(f"initializer %{value.name} is produced by node {value.producer.name!r}")
        if value._graph is not None and value._graph is not self:
            raise GraphIRError(f"value %{value.name} already belongs to graph {value._graph.name!r}")
        if not self.has_input(value):
            self._claim_value(value)
        value._graph = self
        self._initializers[value.name] = value
        return value

    def add_constant(self, tensor: Tensor, name: str = "const") -> Value:
        """Make a new initializer holding `tensor` under a fresh name."""
        return self.add_initializer(Value(self.unique_name(name), const=tensor))

    def remove_initializer(self, value: Value) -> None:
        if value.has_uses():
            raise GraphIRError(f"initializer %{value.name} still has {value.num_uses} uses")
        if value.is_graph_output():
            raise GraphIRError(f"initializer %{value.name} is a graph output")
        del self._initializers[value.name]
        if not self.has_input(value):
            self._value_names.pop(value.name, None)
            value._graph = None

    def add_output(self, value: Value) -> None:
        self._outputs.append(value)

    def set_outputs(self, values: Sequence[Value]) -> None:
        self._outputs = list(values)

    def replace_output(self, old: Value, new: Value) -> None:
        self._outputs = [new if v is old else v for v in self._outputs]

    # -- nodes --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def nodes(self) -> list[Node]:
        """A snapshot list of the nodes in order (safe to mutate the graph while iterating it)."""
        return list(self._nodes)

    def _claim_node(self, node: Node) -> None:
        if node.graph is not None:
            raise GraphIRError(f"node {node.name!r} already belongs to graph {node.graph.name!r}")
        if not node.name:
            node.name = self.unique_name(node.op_type.lower() or "node")
        elif node.name in self._node_names:
            raise GraphIRError(f"node name {node.name!r} is already used in graph {self.name!r}", node=node.name)
        for value in node.outputs:  # check every name before claiming any: no half-added node
            existing = self._value_names.get(value.name) if value.name else None
            if existing is not None and existing is not value:
                raise GraphIRError(f"value name %{value.name} is already defined in graph {self.name!r}", node=node.name)
        for index, value in enumerate(node.outputs):
            if not value.name:
                value.name = self.unique_name(f"{node.name}_{index}" if len(node.outputs) > 1 else node.name)
            self._claim_value(value)
        node.graph = self
        self._node_names[node.name] = node

    def append(self, node: Node) -> Node:
        self._claim_node(node)
        self._nodes[node] = None
        return node

    def extend(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            self.append(node)

    def add_node(self, op_type: str, inputs: Iterable[Value | None] = (), **kwargs: Any) -> Node:
        """Create a node and append it; keyword arguments are those of `Node`."""
        node = Node(op_type, inputs, **kwargs)
        try:
            return self.append(node)
        except GraphIRError:
            node.detach_inputs()  # the node was never added: its inputs must not record its uses
            raise

    def insert_before(self, anchor: Node, nodes: Iterable[Node]) -> None:
        self._insert(anchor, list(nodes), after=False)

    def insert_after(self, anchor: Node, nodes: Iterable[Node]) -> None:
        self._insert(anchor, list(nodes), after=True)

    def _insert(self, anchor: Node, new_nodes: list[Node], *, after: bool) -> None:
        if anchor.graph is not self:
            raise GraphIRError(f"anchor node {anchor.name!r} is not in graph {self.name!r}")
        for node in new_nodes:
            self._claim_node(node)
        # Rebuilding the ordered dict is O(n); batch insertions to keep passes linear.
        order: dict[Node, None] = {}
        for node in self._nodes:
            if node is anchor and not after:
                order.update(dict.fromkeys(new_nodes))
            order[node] = None
            if node is anchor and after:
                order.update(dict.fromkeys(new_nodes))
        self._nodes = order

    def remove(self, node: Node) -> None:
        """Remove one node; its outputs must be unused (remove users first, or use remove_nodes)."""
        self.remove_nodes([node])

    def remove_nodes(self, nodes: Iterable[Node]) -> None:
        """Remove a set of nodes whose outputs are used only inside the set."""
        doomed = dict.fromkeys(nodes)
        for node in doomed:
            if node.graph is not self:
                raise GraphIRError(f"node {node.name!r} is not in graph {self.name!r}", node=node.name)
            for value in node.outputs:
                if value.is_graph_output():
                    raise GraphIRError(f"cannot remove node: its output %{value.name} is a graph output", node=node.name)
                for use in value.uses:
                    if use.node not in doomed and not _inside_any(use.node, doomed):
                        raise GraphIRError(
                            f"cannot remove node: its output %{value.name} is still used by node {use.node.name!r}",
                            node=node.name,
                        )
        for node in doomed:
            node.detach_inputs()
        for node in doomed:
            del self._nodes[node]
            del self._node_names[node.name]
            for value in node.outputs:
                if self._value_names.get(value.name) is value:
                    del self._value_names[value.name]
            node.graph = None

    def reorder(self, order: Sequence[Node]) -> None:
        """Replace the node order with `order`, which must hold exactly this graph's nodes."""
        if len(order) != len(self._nodes) or any(n not in self._nodes for n in order):
            raise GraphIRError("reorder() needs a permutation of the graph's nodes")
        self._nodes = dict.fromkeys(order)

    def find_node(self, name: str) -> Node | None:
        return self._node_names.get(name)

    # -- recursion ----------------------------------------------------------------------------
    def all_nodes(self) -> Iterator[Node]:
        """Every node here and in nested subgraphs, parents before their subgraphs' nodes."""
        for node in list(self._nodes):
            yield node
            if node._graph_attrs:
                for graph in node.subgraphs():
                    yield from graph.all_nodes()

    def subgraphs(self) -> Iterator[Graph]:
        """Every nested subgraph, depth first."""
        for node in self._nodes:
            if node._graph_attrs:
                for graph in node.subgraphs():
                    yield graph
                    yield from graph.subgraphs()

    # -- analyses and views -------------------------------------------------------------------
    def verify(self) -> None:
        """Check every invariant (see graph_ir.verify); raise a VerificationError on the first broken one."""
        from graph_ir.verify import verify_graph

        verify_graph(self)

    def sort(self) -> None:
        """Reorder nodes topologically, keeping the current order where dependencies allow."""
        from graph_ir.verify import topological_order

        self.reorder(topological_order(self))

    def clone(self) -> Graph:
        """A deep copy of the structure; constant tensors are shared (they are immutable)."""
        from graph_ir.clone import clone_graph

        return clone_graph(self)

    def to_networkx(self) -> networkx.MultiDiGraph:
        from graph_ir.nx_view import to_networkx

        return to_networkx(self)

    def __str__(self) -> str:
        from graph_ir.printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self._nodes)} nodes)"


def _inside_any(node: Node, doomed: dict[Node, None]) -> bool:
    graph = node.graph
    while graph is not None and graph.parent is not None:
        if graph.parent in doomed:
            return True
        graph = graph.parent.graph
    return False


@dataclass
class Function:
    """A named, reusable body: an ONNX local function, a TF library function, an HLO computation."""

    domain: str
    name: str
    graph: Graph
    overload: str = ""
    attributes: list[str] = field(default_factory=list)
    attribute_defaults: dict[str, Attr] = field(default_factory=dict)
    opset_imports: dict[str, int] = field(default_factory=dict)
    doc_string: str = ""
    metadata_props: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> FunctionId:
        return (self.domain, self.name, self.overload)
