"""Graph invariants (`graph.verify()`) and topological ordering.

Checked, for the graph, every nested subgraph and every function body:
- ownership: each node's `graph` is the graph holding it; each output's producer and index;
  each subgraph's parent is the node holding it; inputs and constants are owned by their graph;
- use-def: a value's recorded uses are exactly the node inputs that name it;
- scope: every input is defined in this graph or an enclosing one, no name shadows another;
- order: producers (including values captured by a node's subgraphs, and control predecessors)
  come before their users;
  when no order exists the error is a CycleError naming the nodes on a cycle;
- types: constants match their declared type; ops whose operands share one element type do.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from graph_ir.errors import (
    CycleError,
    DuplicateNameError,
    OwnershipError,
    TopologicalOrderError,
    TypeConsistencyError,
    UndefinedValueError,
    UseDefError,
)
from graph_ir.types import SparseTensorType, TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["verify_graph", "topological_order", "SAME_DTYPE_OPERANDS"]

# (domain, op_type) -> indices of the inputs that must share one element type (None: all inputs).
SAME_DTYPE_OPERANDS: dict[tuple[str, str], tuple[int, ...] | None] = {
    ("", op): None
    for op in (
        "Add Sub Mul Div Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Max Min Mean Sum "
        "Mod BitwiseAnd BitwiseOr BitwiseXor MatMul Concat"
    ).split()
}
SAME_DTYPE_OPERANDS[("", "Where")] = (1, 2)


def verify_graph(graph: Graph) -> None:
    _verify_one(graph, outer_names=set())
    if graph.parent is None:
        for function in graph.functions.values():
            if function.graph.parent is not None:
                raise OwnershipError(f"function {function.name!r} body has a parent node", node=function.graph.parent.name)
            _verify_one(function.graph, outer_names=set())


def _verify_one(graph: Graph, outer_names: set[str]) -> None:
    position: dict[Node, int] = {}
    for index, node in enumerate(graph._nodes):
        position[node] = index

    # Names and ownership of graph-level values.
    own_names: set[str] = set()

    def claim(value: Value, what: str) -> None:
        if value.name in outer_names:
            raise DuplicateNameError(f"{what} %{value.name} shadows a value of an enclosing graph", field=value.name)
        own_names.add(value.name)

    seen_inputs: set[int] = set()
    for value in graph._inputs:
        if id(value) in seen_inputs:
            raise DuplicateNameError(f"graph {graph.name!r} lists input %{value.name} twice", field=value.name)
        seen_inputs.add(id(value))
        if value._graph is not graph or value.producer is not None:
            raise OwnershipError(f"graph input %{value.name} is not owned by graph {graph.name!r}", field=value.name)
        claim(value, "graph input")
    for name, value in graph._initializers.items():
        if value.name != name or value._graph is not graph or value.producer is not None:
            raise OwnershipError(f"constant %{name} is not owned by graph {graph.name!r}", field=name)
        if value.const is None:
            raise TypeConsistencyError(f"constant %{name} holds no tensor", field=name)
        _check_constant_type(value)
        claim(value, "constant")

    node_names: set[str] = set()
    for node in graph._nodes:
        if node.graph is not graph:
            raise OwnershipError(f"node is listed in graph {graph.name!r} but owned by another", node=node.name)
        if node.name in node_names or graph._node_names.get(node.name) is not node:
            raise DuplicateNameError(f"node name {node.name!r} is used twice in graph {graph.name!r}", node=node.name)
        node_names.add(node.name)
        for index, value in enumerate(node.outputs):
            if value.producer is not node or value.index != index:
                raise OwnershipError(f"output {index} (%{value.name}) does not point back at its node", node=node.name)
            if value.name in own_names:
                raise DuplicateNameError(f"value name %{value.name} is defined twice", node=node.name, field=value.name)
            claim(value, "output")
        for subgraph in node.subgraphs():
            if subgraph.parent is not node:
                raise OwnershipError(f"subgraph {subgraph.name!r} does not point back at its node", node=node.name)

    # Use-def chains and scope.
    out_of_order: list[Node] = []
    for node in graph._nodes:
        for index, value in enumerate(node.inputs):
            if value is None:
                continue
            if (node, index) not in value._uses:
                raise UseDefError(f"input {index} (%{value.name}) does not record this use", node=node.name)
            _check_defined(value, graph, node, index)
            producer = value.producer
            if producer is not None and producer.graph is graph and position[producer] >= position[node]:
                out_of_order.append(node)
        for value in node.implicit_inputs():
            producer = value.producer
            if producer is not None and producer.graph is graph and position[producer] >= position[node]:
                out_of_order.append(node)
        for before in node.control_predecessors():
            if position[before] >= position[node]:
                out_of_order.append(node)
        _check_operand_types(node)
        for value in node.outputs:
            for use in value._uses:
                user = use.node
                if user.graph is None or use.index >= len(user.inputs) or user.inputs[use.index] is not value:
                    raise UseDefError(f"%{value.name} records a use by {user.name!r} that does not exist", node=node.name)
    for value in list(graph._inputs) + list(graph._initializers.values()):
        for use in value._uses:
            if use.node.graph is None or use.node.inputs[use.index] is not value:
                raise UseDefError(f"%{value.name} records a use by {use.node.name!r} that does not exist", field=value.name)
    for value in graph._outputs:
        if value.graph is None or value.graph not in set(graph.enclosing_graphs()):
            raise UndefinedValueError(f"graph {graph.name!r} output %{value.name} is not defined in scope", field=value.name)

    if out_of_order:
        topological_order(graph)  # raises CycleError when no order exists
        first = out_of_order[0]
        raise TopologicalOrderError("node comes before the producer of one of its inputs", node=first.name)

    inner_outer = outer_names | own_names
    for node in graph._nodes:
        for subgraph in node.subgraphs():
            _verify_one(subgraph, inner_outer)


def _check_defined(value: Value, graph: Graph, node: Node, index: int) -> None:
    defining = value.graph
    if defining is None:
        raise UndefinedValueError(f"input {index} (%{value.name}) is not defined by any graph", node=node.name)
    if (
        value.producer is None
        and defining._initializers.get(value.name) is not value
        and not defining.has_input(value)
    ):
        raise UndefinedValueError(f"input {index} (%{value.name}) was removed from its graph", node=node.name)
    for enclosing in graph.enclosing_graphs():
        if enclosing is defining:
            return
    raise UndefinedValueError(f"input {index} (%{value.name}) is defined outside this graph's scope", node=node.name)


def _check_constant_type(value: Value) -> None:
    tensor = value.const
    declared = value.type
    if declared is None or tensor is None:
        return
    if isinstance(declared, SparseTensorType):
        return  # the constant holds the sparse values; the dense shape is the declared one
    if not isinstance(declared, TensorType):
        raise TypeConsistencyError(f"constant %{value.name} is declared as {declared}, not a tensor", field=value.name)
    if declared.dtype is not None and declared.dtype is not tensor.dtype:
        raise TypeConsistencyError(
            f"constant %{value.name} holds {tensor.dtype} but is declared {declared.dtype}", field=value.name
        )
    if declared.shape is not None:
        if len(declared.shape) != len(tensor.shape) or any(
            isinstance(d, int) and d != t for d, t in zip(declared.shape, tensor.shape)
        ):
            raise TypeConsistencyError(
                f"constant %{value.name} has shape {tensor.shape!r} but is declared {declared.shape!r}", field=value.name
            )


def _check_operand_types(node: Node) -> None:
    key = (node.domain, node.op_type)
    if key not in SAME_DTYPE_OPERANDS:
        return
    indices = SAME_DTYPE_OPERANDS[key]
    operands = node.inputs if indices is None else [node.inputs[i] for i in indices if i < len(node.inputs)]
    dtypes = {v.dtype for v in operands if v is not None and v.dtype is not None}
    if len(dtypes) > 1:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeConsistencyError(f"{node.op_type} operands have different element types ({names})", node=node.name)


def topological_order(graph: Graph) -> list[Node]:
    """A topological order of the graph's nodes, as close to the current order as possible."""
    nodes = list(graph._nodes)
    position = {node: index for index, node in enumerate(nodes)}
    indegree = [0] * len(nodes)
    successors: list[list[int]] = [[] for _ in nodes]
    for index, node in enumerate(nodes):
        deps: set[int] = set()
        for value in node.inputs:
            if value is not None and value.producer is not None and value.producer.graph is graph:
                deps.add(position[value.producer])
        if any(True for _ in node.subgraphs()):
            for value in node.implicit_inputs():
                if value.producer is not None and value.producer.graph is graph:
                    deps.add(position[value.producer])
        for before in node.control_predecessors():
            deps.add(position[before])
        for dep in deps:
            successors[dep].append(index)
        indegree[index] = len(deps)
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(nodes[index])
        for succ in successors[index]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                heapq.heappush(ready, succ)
    if len(order) != len(nodes):
        stuck = [nodes[i] for i, d in enumerate(indegree) if d > 0]
        cycle = _find_cycle(stuck, graph)
        names = " -> ".join(n.name for n in cycle)
        raise CycleError(f"graph {graph.name!r} has a cycle: {names}", node=cycle[0].name)
    return order


def _find_cycle(stuck: list[Node], graph: Graph) -> list[Node]:
    """One cycle among the nodes Kahn's algorithm could not order (for the error message)."""
    stuck_set = set(stuck)
    node = stuck[0]
    path: list[Node] = []
    on_path: dict[Node, int] = {}
    while node not in on_path:
        on_path[node] = len(path)
        path.append(node)
        preds = [p for p in node.predecessors() if p in stuck_set]
        if not preds:
            preds = [v.producer for v in node.implicit_inputs() if v.producer in stuck_set]
        if not preds:
            preds = [p for p in node.control_predecessors() if p in stuck_set]
        node = preds[0]  # every stuck node waits on another stuck node
    cycle = path[on_path[node] :]
    cycle.reverse()
    return cycle + [cycle[0]]
