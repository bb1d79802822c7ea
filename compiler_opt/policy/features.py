"""Policy inputs for one graph on one topology: node, edge, graph and device features, and masks.

Rows follow the simulator's node order (`SimulationProblem.nodes`, topological), so the policy's
per-node outputs are decision arrays as they stand. Everything is log-scaled: FLOPs, bytes and
device rates span ten orders of magnitude across workloads and device kinds.

Devices are described by their own features (peak FLOP/s, memory, memory and link bandwidth,
launch overhead, kind), never by their position, so one policy serves 2, 4 or 8 devices and
different device kinds. A node may not use a device when the device is a host CPU next to
accelerators (as the classical placement methods do) or when the node's own working set (its
inputs and outputs) exceeds the device's memory; `device_mask` records this and the sampler
never picks a masked device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from graph_ir.features import NODE_FEATURE_NAMES, OP_KIND_INDEX, graph_arrays, longest_depth

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from cost_model.costs import SimulationProblem

__all__ = [
    "DEVICE_FEATURE_NAMES",
    "GRAPH_FEATURE_NAMES",
    "NUM_OP_KINDS",
    "PolicyInputs",
    "allowed_devices",
    "device_features",
    "policy_inputs",
]

NUM_OP_KINDS = len(OP_KIND_INDEX)
GRAPH_FEATURE_NAMES = (
    "log_nodes",
    "log_edges",
    "log_total_flops",
    "log_total_bytes",
    "log_depth",
    "mean_log_fan_out",
    "log_num_devices",
    "log_total_peak_flops",
)
DEVICE_FEATURE_NAMES = (
    "log_peak_fp32",
    "log_peak_fp16",
    "log_memory",
    "log_mem_bandwidth",
    "log_launch_us",
    "log_link_in",
    "log_link_out",
    "is_cpu",
    "ordinal",
)
# Raw count columns of graph_arrays are log-scaled here (their log twins are kept as well).
_COUNT_COLUMNS = [NODE_FEATURE_NAMES.index(n) for n in ("num_inputs", "num_outputs", "in_degree", "out_degree")]


@dataclass
class PolicyInputs:
    """Tensors the network reads (CPU, float32 / int64)."""

    op_kind: torch.Tensor  # (N,) int64
    node_x: torch.Tensor  # (N, len(NODE_FEATURE_NAMES))
    edge_index: torch.Tensor  # (2, E) int64, producer -> consumer, rows in topological order
    graph_x: torch.Tensor  # (len(GRAPH_FEATURE_NAMES),)
    device_x: torch.Tensor  # (D, len(DEVICE_FEATURE_NAMES))
    device_mask: torch.Tensor  # (N, D) bool: True where the node may run on the device
    position: torch.Tensor  # (N,) float: node's topological depth, 0..1
    # For the placement context (policy/context.py); None: every edge one byte, every node one unit.
    edge_bytes: torch.Tensor | None = None  # (E,) float32 bytes along each edge
    node_time: torch.Tensor | None = None  # (N, D) float32 roofline seconds of the node on each device

    @property
    def num_nodes(self) -> int:
        return int(self.op_kind.shape[0])

    @property
    def num_devices(self) -> int:
        return int(self.device_x.shape[0])


def _log10(x: float) -> float:
    return math.log10(max(float(x), 1.0))


def device_features(topology: Topology) -> np.ndarray:
    """(D, len(DEVICE_FEATURE_NAMES)) float32, log10 units (FLOP/s, bytes, bytes/s, microseconds)."""
    count = topology.num_devices
    link_in = np.zeros(count)
    link_out = np.zeros(count)
    for link in topology.links:
        link_out[topology.device_index(link.src)] += link.bandwidth
        link_in[topology.device_index(link.dst)] += link.bandwidth
    rows = []
    # Identical GPUs have identical specs; the ordinal among devices of the same kind (0..1) is
    # what lets the policy tell them apart and split the topological order across them.
    kinds = [d.kind for d in topology.devices]
    ordinal = [kinds[:i].count(k) / max(kinds.count(k) - 1, 1) for i, k in enumerate(kinds)]
    for index, device in enumerate(topology.devices):
        rows.append(
            (
                _log10(device.peak("fp32")) - 12.0,
                _log10(device.peak("fp16")) - 12.0,
                _log10(device.memory_bytes) - 9.0,
                _log10(device.mem_bandwidth) - 9.0,
                math.log10(max(device.launch_overhead_s * 1e6, 1e-3)),
                _log10(link_in[index]) - 9.0,
                _log10(link_out[index]) - 9.0,
                1.0 if device.kind == "cpu" else 0.0,
                ordinal[index],
            )
        )
    return np.asarray(rows, dtype=np.float32).reshape(count, len(DEVICE_FEATURE_NAMES))


def allowed_devices(problem: SimulationProblem, *, include_cpu: bool = False) -> np.ndarray:
    """(N, D) bool mask (module docstring); every node keeps at least one device."""
    devices = problem.topology.devices
    count = problem.num_nodes
    accelerators = [d.kind != "cpu" for d in devices]
    allowed = np.ones((count, len(devices)), dtype=bool)
    if any(accelerators) and not include_cpu:
        allowed[:, ~np.asarray(accelerators)] = False
    capacity = np.array([d.memory_bytes for d in devices], dtype=np.float64)
    too_big = problem.node_bytes[:, None] > capacity[None, :]
    allowed &= ~too_big
    empty = ~allowed.any(axis=1)
    if empty.any():
        # Nothing fits: allow the device with the most memory, so the simulator reports the OOM.
        allowed[np.ix_(np.flatnonzero(empty), [int(capacity.argmax())])] = True
    return allowed


def policy_inputs(problem: SimulationProblem, *, include_cpu: bool = False) -> PolicyInputs:
    """Features of `problem`'s graph and topology, rows aligned with `problem.nodes`."""
    graph = problem.nodes[0].graph if problem.nodes else None
    arrays = graph_arrays(graph, nodes=problem.nodes, flops=problem.flops) if graph is not None else None
    count = problem.num_nodes
    if arrays is None:
        node_x = np.zeros((0, len(NODE_FEATURE_NAMES)), dtype=np.float32)
        op_kind = np.zeros(0, dtype=np.int64)
        edge_index = np.zeros((2, 0), dtype=np.int64)
    else:
        node_x = arrays.node_features.copy()
        node_x[:, _COUNT_COLUMNS] = np.log1p(node_x[:, _COUNT_COLUMNS])
        op_kind = arrays.op_kind
        edge_index = arrays.edge_index
    devices = problem.topology.devices
    depth_column = NODE_FEATURE_NAMES.index("log_fan_out")
    graph_x = np.array(
        [
            math.log10(max(count, 1)),
            math.log10(max(edge_index.shape[1], 1)),
            _log10(problem.flops.sum()) - 9.0,
            _log10(problem.node_bytes.sum()) - 9.0,
            math.log10(max(int(longest_depth(edge_index, count).max(initial=0)), 1)),
            float(node_x[:, depth_column].mean()) if count else 0.0,
            math.log2(len(devices)),
            _log10(sum(d.peak("fp32") for d in devices)) - 12.0,
        ],
        dtype=np.float32,
    )
    return PolicyInputs(
        op_kind=torch.from_numpy(np.ascontiguousarray(op_kind, dtype=np.int64)),
        node_x=torch.from_numpy(np.ascontiguousarray(node_x, dtype=np.float32)),
        edge_index=torch.from_numpy(np.ascontiguousarray(edge_index, dtype=np.int64)),
        graph_x=torch.from_numpy(graph_x),
        device_x=torch.from_numpy(device_features(problem.topology)),
        device_mask=torch.from_numpy(allowed_devices(problem, include_cpu=include_cpu)),
        position=torch.from_numpy(np.ascontiguousarray(node_x[:, NODE_FEATURE_NAMES.index("topo_depth")], dtype=np.float32)),
        edge_bytes=torch.from_numpy(np.ascontiguousarray(arrays.edge_bytes if arrays is not None else np.zeros(0), dtype=np.float32)),
        node_time=torch.from_numpy(np.ascontiguousarray(problem.node_time[:, problem.device_type_of], dtype=np.float32).reshape(count, len(devices))),
    )

