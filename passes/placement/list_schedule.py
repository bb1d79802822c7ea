"""An incremental schedule estimate for list-scheduling placement methods (CPOP, m-ETF, m-SCT).

Nodes are committed one at a time, each after all its predecessors. A node's earliest start on
device d is max(d's ready time, each predecessor's finish + the transfer time from its device),
where transfers run on idle links (no contention) and devices run nodes in commit order (no
insertion into idle gaps). This is the classic model of HEFT/ETF; the simulator, with link
contention and priority order, judges the final placement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from passes.placement.context import PlacementContext

__all__ = ["PartialSchedule"]


class PartialSchedule:
    def __init__(self, ctx: PlacementContext) -> None:
        self.ctx = ctx
        n = ctx.num_nodes
        self.device_ready = np.zeros(ctx.num_devices)
        self.finish = np.zeros(n)
        self.device = np.full(n, -1, dtype=np.int64)
        self._times = ctx.times
        self._edge_src = ctx.edge_src.tolist()
        self._edge_bytes = ctx.edge_bytes.tolist()
        self._lat = ctx.route_latency
        self._inv = ctx.route_inv_bw

    def data_ready(self, node: int, device: int) -> float:
        """When every input of `node` can be on `device`."""
        ready = 0.0
        dev, fin = self.device, self.finish
        for e in self.ctx.pred_edges[node]:
            p = self._edge_src[e]
            src = int(dev[p])
            arrival = fin[p] if src == device else fin[p] + self._lat[src, device] + self._edge_bytes[e] * self._inv[src, device]
            if arrival > ready:
                ready = arrival
        return float(ready)

    def start_times(self, node: int, devices: np.ndarray) -> np.ndarray:
        """Earliest start of `node` on each of `devices` (vectorised over devices)."""
        return np.maximum(self.data_ready_times(node, devices), self.device_ready[devices])

    def data_ready_times(self, node: int, devices: np.ndarray) -> np.ndarray:
        """When every input of `node` can be on each of `devices` (predecessors committed)."""
        ready = np.zeros(devices.size)
        for e in self.ctx.pred_edges[node]:
            p = self._edge_src[e]
            src = int(self.device[p])
            arrival = self.finish[p] + self._lat[src, devices] + self._edge_bytes[e] * self._inv[src, devices]
            np.maximum(ready, arrival, out=ready)
        return ready

    def start_time(self, node: int, device: int) -> float:
        return max(float(self.device_ready[device]), self.data_ready(node, device))

    def commit(self, node: int, device: int) -> float:
        """Place `node` on `device` at its earliest start; returns its finish time."""
        start = self.start_time(node, device)
        end = start + float(self._times[node, device])
        self.finish[node] = end
        self.device[node] = device
        self.device_ready[device] = end
        return end

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if self.finish.size else 0.0
