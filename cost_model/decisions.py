"""Decisions as arrays: each node's device, fusion group and scheduling priority.

`Decisions` is aligned with a node order: `node_order(graph)`, the graph's own order when it is
topological (the usual case), else a topological order. The simulator, the lower bound and the
policy all index nodes this way, so decisions travel between them as three numpy arrays, and
`from_graph` / `apply` convert to and from the nodes' first-class fields.

Conventions: `device` indexes `topology.devices`; `fusion_group == -1` means "not fused"; nodes
with the same group id *and* the same device form one kernel; a higher `priority` runs first
among ready kernels on a device (unset priorities are 0.0, ties go to the earlier node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from graph_ir.errors import CompilerOptError
from graph_ir.order import node_order  # re-exported: decisions follow this order

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["Decisions", "DecisionError", "node_order"]

_INT32_MAX = np.iinfo(np.int32).max


class DecisionError(CompilerOptError):
    """Decisions that cannot be simulated: wrong length, device out of range, a fusion cycle..."""


@dataclass(eq=False)
class Decisions:
    """Per-node decisions as arrays: `device` int32, `fusion_group` int32 (-1: none), `priority` float64."""

    device: np.ndarray
    fusion_group: np.ndarray
    priority: np.ndarray

    def __post_init__(self) -> None:
        self.device = np.ascontiguousarray(self.device, dtype=np.int32)
        self.fusion_group = np.ascontiguousarray(self.fusion_group, dtype=np.int32)
        self.priority = np.ascontiguousarray(self.priority, dtype=np.float64)
        shapes = {self.device.shape, self.fusion_group.shape, self.priority.shape}
        if len(shapes) != 1 or self.device.ndim != 1:
            raise DecisionError(
                f"device, fusion_group and priority must be 1-D arrays of one length, got shapes "
                f"{self.device.shape}, {self.fusion_group.shape}, {self.priority.shape}"
            )

    @property
    def num_nodes(self) -> int:
        return int(self.device.shape[0])

    @classmethod
    def default(cls, num_nodes: int, device: int = 0) -> Decisions:
        """Every node on `device`, unfused, priority 0."""
        return cls(
            np.full(num_nodes, device, dtype=np.int32),
            np.full(num_nodes, -1, dtype=np.int32),
            np.zeros(num_nodes, dtype=np.float64),
        )

    @classmethod
    def from_graph(
        cls,
        graph: Graph,
        topology: Topology,
        *,
        default_device: int | str | None = None,
        nodes: Sequence[Node] | None = None,
        unknown_devices: str = "raise",
    ) -> Decisions:
        """Read the nodes' `device`, `fusion_group` and `priority` fields.

        Device names are looked up in `topology` (TensorFlow strings like "/device:GPU:0" work);
        nodes without a device go to `default_device`, else `topology.default_device`. A device
        the topology does not have is a `DecisionError`, or with `unknown_devices="default"`
        (a placement pass, which decides every device anyway) counts as no device.
        """
        if unknown_devices not in ("raise", "default"):
            raise ValueError(f"unknown_devices must be 'raise' or 'default', got {unknown_devices!r}")
        order = node_order(graph) if nodes is None else list(nodes)
        if default_device is None:
            fallback = topology.default_device
        elif isinstance(default_device, str):
            fallback = topology.device_index(default_device)
        else:
            fallback = int(default_device)
        count = len(order)
        device = np.full(count, fallback, dtype=np.int32)
        group = np.full(count, -1, dtype=np.int32)
        priority = np.zeros(count, dtype=np.float64)
        index_of: dict[str, int] = {}
        for i, node in enumerate(order):
            if node.device is not None:
                index = index_of.get(node.device)
                if index is None:
                    try:
                        index = index_of[node.device] = topology.device_index(node.device)
                    except CompilerOptError as err:
                        if unknown_devices == "raise":
                            raise DecisionError(err.message, node=node.name, field="device") from None
                        index = index_of[node.device] = fallback
                device[i] = index
            if node.fusion_group is not None:
                fg = node.fusion_group
                if not 0 <= fg <= _INT32_MAX:
                    raise DecisionError(f"fusion_group must be in [0, 2**31), got {fg}", node=node.name, field="fusion_group")
                group[i] = fg
            if node.priority is not None:
                priority[i] = node.priority
        decisions = cls(device, group, priority)
        decisions.validate(topology.num_devices, nodes=order)
        return decisions

    def validate(self, num_devices: int, *, num_nodes: int | None = None, nodes: Sequence[Node] | None = None) -> None:
        """Raise DecisionError naming the first node at fault when a decision is out of range."""
        if num_nodes is not None and self.num_nodes != num_nodes:
            raise DecisionError(f"decisions cover {self.num_nodes} nodes but the graph has {num_nodes}")

        def name(i: int) -> str:
            return nodes[i].name if nodes is not None else f"#{i}"

        bad = np.flatnonzero((self.device < 0) | (self.device >= num_devices))
        if bad.size:
            i = int(bad[0])
            raise DecisionError(
                f"device index {int(self.device[i])} out of range [0, {num_devices})", node=name(i), field="device"
            )
        bad = np.flatnonzero(self.fusion_group < -1)
        if bad.size:
            i = int(bad[0])
            raise DecisionError(f"fusion_group {int(self.fusion_group[i])} is negative (use -1 for none)", node=name(i), field="fusion_group")
        bad = np.flatnonzero(~np.isfinite(self.priority))
        if bad.size:
            i = int(bad[0])
            raise DecisionError(f"priority {self.priority[i]} is not finite", node=name(i), field="priority")

    def apply(self, graph: Graph, topology: Topology, *, nodes: Sequence[Node] | None = None) -> None:
        """Write the decisions onto the nodes' fields (device names from `topology`)."""
        order = node_order(graph) if nodes is None else list(nodes)
        self.validate(topology.num_devices, num_nodes=len(order), nodes=order)
        names = topology.device_names
        for node, d, g, p in zip(order, self.device.tolist(), self.fusion_group.tolist(), self.priority.tolist()):
            node.device = names[d]
            node.fusion_group = None if g < 0 else g
            node.priority = p

    def copy(self) -> Decisions:
        return Decisions(self.device.copy(), self.fusion_group.copy(), self.priority.copy())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decisions):
            return NotImplemented
        return (
            np.array_equal(self.device, other.device)
            and np.array_equal(self.fusion_group, other.fusion_group)
            and np.array_equal(self.priority, other.priority)
        )

    __hash__ = None  # type: ignore[assignment]
