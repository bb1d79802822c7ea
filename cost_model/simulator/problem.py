"""A graph compiled once into arrays for the simulator, reusable across many decisions.

`SimulationProblem.from_graph(graph, topology)` walks the graph once and records:
- per node (in `node_order(graph)`, so index order is topological): FLOPs, bytes, dtype family,
  and a roofline cost table per *device type* (identical devices share a column);
- per value (node outputs, graph inputs, constants used by a node): size, producer, kind, whether
  it is a graph output;
- the distinct (value, consumer node) pairs ("uses"), sorted by value then node: dependencies,
  transfers, fused-group boundaries and lifetimes all derive from them.

Kernel times default to the roofline; `from_graph(..., kernel_costs=source)` takes them from another
`cost_model.costs.KernelCostSource` (e.g. `cost_model.profiling.ProfiledCosts`, measured on this machine) wherever
that source has a time, for single nodes (`node_time`) and for fused groups (`build_task_graph`).

Only the top level of the graph is simulated. A node that owns subgraphs (If, Loop, Scan) counts
the FLOPs and bytes of its bodies once (as `cost_model.flops.graph_flops` does) and depends on the
outer values its bodies capture.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from graph_ir.order import node_order
from cost_model.devices.spec import DTYPE_FAMILIES, DeviceSpec
from cost_model.flops import graph_bytes, graph_flops, node_bytes, node_flops
from cost_model.roofline import node_dtype_family
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from cost_model.costs.source import KernelCostSource
    from cost_model.devices.topology import Topology
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["SimulationProblem", "VALUE_OUTPUT", "VALUE_INPUT", "VALUE_CONSTANT"]

logger = logging.getLogger(__name__)

# value_kind codes
VALUE_OUTPUT = 0  # produced by a node
VALUE_INPUT = 1  # a graph input (or a value of an enclosing graph)
VALUE_CONSTANT = 2  # an initializer: resident on every device that uses it

_FAMILY_INDEX = {family: index for index, family in enumerate(DTYPE_FAMILIES)}


@dataclass(eq=False)
class SimulationProblem:
    """Arrays describing one graph on one topology (see the module docstring)."""

    nodes: list[Node]
    topology: Topology
    device_types: tuple[DeviceSpec, ...]
    device_type_of: np.ndarray  # int64 (D,): index into device_types
    flops: np.ndarray  # float64 (N,)
    node_bytes: np.ndarray  # float64 (N,): cost_model.flops.node_bytes
    family: np.ndarray  # int8 (N,): index into DTYPE_FAMILIES
    flop_time: np.ndarray  # float64 (N, T): flops / peak[type, family]
    node_time: np.ndarray  # float64 (N, T): roofline time of the node alone, launch included
    type_bandwidth: np.ndarray  # float64 (T,)
    type_launch: np.ndarray  # float64 (T,)
    values: list[Value]
    value_bytes: np.ndarray  # int64 (V,)
    value_producer: np.ndarray  # int64 (V,): node index, -1 for inputs and constants
    value_kind: np.ndarray  # int8 (V,): VALUE_OUTPUT / VALUE_INPUT / VALUE_CONSTANT
    value_is_output: np.ndarray  # bool (V,): a graph output
    value_first_consumer: np.ndarray  # int64 (V,): lowest consuming node index, -1 if unused
    value_num_uses: np.ndarray  # int64 (V,): distinct consumer nodes
    use_value: np.ndarray  # int64 (U,): uses sorted by (value, node)
    use_node: np.ndarray  # int64 (U,)
    build_seconds: float = 0.0
    kernel_costs: Any = None  # KernelCostSource or None (roofline everywhere)
    _cache: dict = field(default_factory=dict, repr=False)

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_values(self) -> int:
        return len(self.values)

    @property
    def num_devices(self) -> int:
        return self.topology.num_devices

    @property
    def use_producer(self) -> np.ndarray:
        """Producer node of each use's value (-1 for inputs and constants), cached."""
        cached = self._cache.get("use_producer")
        if cached is None:
            cached = self._cache["use_producer"] = self.value_producer[self.use_value]
        return cached

    def node_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (producer, consumer) node pairs, sorted; cached."""
        cached = self._cache.get("node_edges")
        if cached is None:
            producer = self.use_producer
            mask = producer >= 0
            key = np.unique(producer[mask] * self.num_nodes + self.use_node[mask])
            cached = self._cache["node_edges"] = (key // max(self.num_nodes, 1), key % max(self.num_nodes, 1))
        return cached

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_graph(cls, graph: Graph, topology: Topology, *, kernel_costs: KernelCostSource | None = None) -> SimulationProblem:
        began = time.perf_counter()
        nodes = node_order(graph)
        count = len(nodes)
        values: list[Value] = []
        value_index: dict[Value, int] = {}
        producer: list[int] = []
        for index, node in enumerate(nodes):
            for value in node.outputs:
                value_index[value] = len(values)
                values.append(value)
                producer.append(index)
        use_value: list[int] = []
        use_node: list[int] = []
        flops = np.empty(count, dtype=np.float64)
        nbytes = np.empty(count, dtype=np.float64)
        family = np.empty(count, dtype=np.int8)
        for index, node in enumerate(nodes):
            inputs: tuple = node.inputs
            if node._attrs and any(True for _ in node.subgraphs()):
                inputs = inputs + tuple(node.implicit_inputs())
                flops[index] = node_flops(node) + sum(graph_flops(g) for g in node.subgraphs())
                nbytes[index] = node_bytes(node) + sum(graph_bytes(g) for g in node.subgraphs())
            else:
                flops[index] = node_flops(node)
                nbytes[index] = node_bytes(node)
            family[index] = _FAMILY_INDEX[node_dtype_family(node)]
            first = len(use_value)
            for value in inputs:
                if value is None:
                    continue
                vi = value_index.get(value)
                if vi is None:
                    vi = value_index[value] = len(values)
                    values.append(value)
                    producer.append(-1)
                if vi not in use_value[first:]:  # a node reading one value twice uses it once
                    use_value.append(vi)
                    use_node.append(index)
        outputs: list[int] = []
        for value in graph.outputs:
            if value not in value_index:
                value_index[value] = len(values)
                values.append(value)
                producer.append(-1)
            outputs.append(value_index[value])
        problem = cls._from_lists(nodes, topology, values, producer, use_value, use_node, flops, nbytes, family, outputs, began)
        if kernel_costs is not None:
            problem.use_kernel_costs(kernel_costs)
        return problem

    def use_kernel_costs(self, costs: KernelCostSource) -> None:
        """Take kernel times from `costs` where it has them; the roofline stays elsewhere."""
        times = np.asarray(costs.node_times(self), dtype=np.float64)
        self.node_time = np.where(np.isfinite(times), times, self.node_time)
        self.kernel_costs = costs

    @classmethod
    def _from_lists(
        cls,
        nodes: list[Node],
        topology: Topology,
        values: list[Value],
        producer: list[int],
        use_value: list[int],
        use_node: list[int],
        flops: np.ndarray,
        nbytes: np.ndarray,
        family: np.ndarray,
        outputs: list[int],
        began: float,
    ) -> SimulationProblem:
        count_v = len(values)
        value_producer = np.asarray(producer, dtype=np.int64)
        value_bytes = np.fromiter((_value_nbytes(v) for v in values), dtype=np.int64, count=count_v)
        kind = np.full(count_v, VALUE_OUTPUT, dtype=np.int8)
        external = np.flatnonzero(value_producer < 0)
        kind[external] = [VALUE_CONSTANT if values[i].const is not None else VALUE_INPUT for i in external.tolist()]
        is_output = np.zeros(count_v, dtype=bool)
        is_output[np.asarray(outputs, dtype=np.int64)] = True
        uv = np.asarray(use_value, dtype=np.int64)
        un = np.asarray(use_node, dtype=np.int64)
        order = np.lexsort((un, uv))
        uv, un = uv[order], un[order]
        num_uses = np.bincount(uv, minlength=count_v).astype(np.int64)
        first_consumer = np.full(count_v, -1, dtype=np.int64)
        if uv.size:
            starts = np.flatnonzero(np.r_[True, uv[1:] != uv[:-1]])
            first_consumer[uv[starts]] = un[starts]
        types, type_of = topology.device_types
        peaks = np.array([[t.peak(f) for f in DTYPE_FAMILIES] for t in types], dtype=np.float64)  # (T, F)
        bandwidth = np.array([t.mem_bandwidth for t in types], dtype=np.float64)
        launch = np.array([t.launch_overhead_s for t in types], dtype=np.float64)
        flop_time = flops[:, None] / peaks[:, family.astype(np.int64)].T  # (N, T)
        node_time = np.maximum(flop_time, nbytes[:, None] / bandwidth[None, :]) + launch[None, :]
        problem = cls(
            nodes=nodes,
            topology=topology,
            device_types=types,
            device_type_of=type_of.astype(np.int64),
            flops=flops,
            node_bytes=nbytes,
            family=family,
            flop_time=flop_time,
            node_time=node_time,
            type_bandwidth=bandwidth,
            type_launch=launch,
            values=values,
            value_bytes=value_bytes,
            value_producer=value_producer,
            value_kind=kind,
            value_is_output=is_output,
            value_first_consumer=first_consumer,
            value_num_uses=num_uses,
            use_value=uv,
            use_node=un,
        )
        problem.build_seconds = time.perf_counter() - began
        logger.debug("SimulationProblem: %d nodes, %d values, %d uses in %.3fs", len(nodes), count_v, uv.size, problem.build_seconds)
        return problem

    def __repr__(self) -> str:
        return f"SimulationProblem({self.num_nodes} nodes, {self.num_values} values on {self.topology.name!r})"


def _value_nbytes(value: Value) -> int:
    vtype = value.type
    if vtype.__class__ is TensorType:
        return vtype._nbytes or 0  # type: ignore[union-attr]
    return 0
