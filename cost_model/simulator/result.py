"""What one simulation returns: totals per device, and the timeline as arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem
    from cost_model.simulator.tasks import TaskGraph

__all__ = ["SimulationResult", "TimelineEvent"]


class TimelineEvent(NamedTuple):
    kind: str  # "compute" or "transfer"
    name: str  # kernel: its first node's name (+N for fused groups); transfer: the value's name
    resource: str  # a device name, or a link "src->dst"
    device: int  # compute: the device; transfer: the link's source device
    start_s: float
    end_s: float
    task: int  # kernel id, or num_kernels + hop index
    nodes: tuple[int, ...]  # node indices of a kernel; () for a transfer


@dataclass(eq=False)
class SimulationResult:
    """Step time, per-device totals, and the per-task timeline (arrays; `events()` for records)."""

    step_time_s: float
    busy_s: np.ndarray  # float64 (D,): compute time per device
    link_busy_s: np.ndarray  # float64 (L,): copy-engine time per directed link
    bytes_moved: int  # sum over transfers (a value sent to k devices counts k times)
    peak_memory_bytes: np.ndarray  # int64 (D,)
    memory_capacity_bytes: np.ndarray  # float64 (D,)
    task_start: np.ndarray  # float64 (K+H,)
    task_end: np.ndarray  # float64 (K+H,)
    tasks: TaskGraph
    problem: SimulationProblem

    @property
    def oom(self) -> np.ndarray:
        """Per device: peak memory above capacity."""
        return self.peak_memory_bytes > self.memory_capacity_bytes

    @property
    def any_oom(self) -> bool:
        return bool(self.oom.any())

    @property
    def device_names(self) -> tuple[str, ...]:
        return self.problem.topology.device_names

    @property
    def node_start(self) -> np.ndarray:
        """Start time of each node (its kernel's start), aligned with the problem's node order."""
        return self.task_start[self.tasks.kernel_of_node]

    @property
    def node_end(self) -> np.ndarray:
        return self.task_end[self.tasks.kernel_of_node]

    def events(self) -> list[TimelineEvent]:
        """The timeline as records, ordered by start time then task id (built on demand)."""
        tasks, problem = self.tasks, self.problem
        topo = problem.topology
        names = topo.device_names
        members: list[list[int]] = [[] for _ in range(tasks.num_kernels)]
        for node, kernel in enumerate(tasks.kernel_of_node.tolist()):
            members[kernel].append(node)
        out: list[TimelineEvent] = []
        starts, ends = self.task_start.tolist(), self.task_end.tolist()
        for kernel in range(tasks.num_kernels):
            group = members[kernel]
            label = problem.nodes[group[0]].name + (f" (+{len(group) - 1} fused)" if len(group) > 1 else "")
            device = int(tasks.kernel_device[kernel])
            out.append(TimelineEvent("compute", label, names[device], device, starts[kernel], ends[kernel], kernel, tuple(group)))
        for hop, (xfer, link) in enumerate(zip(tasks.hop_xfer.tolist(), tasks.hop_link.tolist())):
            task = tasks.num_kernels + hop
            spec = topo.links[link]
            value = problem.values[int(tasks.xfer_value[xfer])]
            out.append(
                TimelineEvent("transfer", value.name, spec.name, topo.device_index(spec.src), starts[task], ends[task], task, ())
            )
        out.sort(key=lambda e: (e.start_s, e.task))
        return out

    def summary(self) -> str:
        lines = [f"step time {self.step_time_s * 1e3:.3f} ms, {self.bytes_moved / 1e6:.3f} MB moved"]
        for name, busy, peak, cap in zip(
            self.device_names, self.busy_s.tolist(), self.peak_memory_bytes.tolist(), self.memory_capacity_bytes.tolist()
        ):
            flag = "  OOM" if peak > cap else ""
            lines.append(f"  {name}: busy {busy * 1e3:.3f} ms, peak {peak / 2**20:.1f} MiB of {cap / 2**20:.0f} MiB{flag}")
        return "\n".join(lines)
