"""A topology: devices plus directed links, with shortest-path routing between any two devices.

Routes are fixed per (source, destination) pair: the path with the fewest hops, ties broken by the
lower total latency and then by link order, so every simulation of a topology routes the same way.
A multi-hop route (a ring of chips, GPU to GPU through the host) is store-and-forward: each hop is
one transfer on that hop's copy engine.
"""

from __future__ import annotations

import heapq
import re
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from cost_model.devices.spec import DeviceSpec, DeviceSpecError, Link

__all__ = ["Topology"]

# TensorFlow-style device strings: "/job:x/replica:0/task:0/device:GPU:1", "GPU:1", "gpu:1".
_TF_DEVICE = re.compile(r"(?:^|/)(?:device:)?([A-Za-z_]+):(\d+)$")


class Topology:
    """Devices and the directed links between them. Immutable after construction."""

    def __init__(
        self, name: str, devices: Sequence[DeviceSpec], links: Iterable[Link] = (), *, executors: Sequence[int] | None = None
    ) -> None:
        self.name = name
        self.devices: tuple[DeviceSpec, ...] = tuple(devices)
        self.links: tuple[Link, ...] = tuple(links)
        if not self.devices:
            raise DeviceSpecError("a topology needs at least one device", node=name, field="devices")
        # Devices that share one executor run one task at a time between them, copies between
        # them included: forced XLA host devices are one dispatching thread on the same cores.
        self.executors: tuple[int, ...] = tuple(range(len(self.devices))) if executors is None else tuple(int(e) for e in executors)
        if len(self.executors) != len(self.devices) or any(not 0 <= e < len(self.devices) for e in self.executors):
            raise DeviceSpecError(
                f"executors must give each of the {len(self.devices)} devices an executor index in [0, {len(self.devices)}), "
                f"got {list(self.executors)}",
                node=name,
                field="executors",
            )
        self._index: dict[str, int] = {}
        for index, device in enumerate(self.devices):
            if not device.name:
                raise DeviceSpecError(f"device {index} has no name", node=name, field="devices")
            if device.name in self._index:
                raise DeviceSpecError(f"device name {device.name!r} is used twice", node=name, field="devices")
            self._index[device.name] = index
        seen: set[tuple[str, str]] = set()
        for link in self.links:
            for end in (link.src, link.dst):
                if end not in self._index:
                    raise DeviceSpecError(f"link {link.name} names unknown device {end!r}", node=name, field="links")
            if (link.src, link.dst) in seen:
                raise DeviceSpecError(f"two links join {link.name}; merge them into one", node=name, field="links")
            seen.add((link.src, link.dst))
        self._routes = self._all_routes()

    # -- devices --------------------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @property
    def shares_executors(self) -> bool:
        """Some devices share an executor (see `executors`)."""
        return len(set(self.executors)) < len(self.executors)

    @cached_property
    def link_resources(self) -> np.ndarray:
        """int64 (L,): the simulator resource of each link: its own (num_devices + l), or the
        shared executor of its two ends when they have one."""
        out = np.arange(len(self.links), dtype=np.int64) + len(self.devices)
        for index, link in enumerate(self.links):
            a, b = self.executors[self._index[link.src]], self.executors[self._index[link.dst]]
            if a == b:
                out[index] = a
        return out

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    def device_index(self, name: str) -> int:
        """Index of a device by instance name; TensorFlow strings such as "/device:GPU:1" also work."""
        index = self._index.get(name)
        if index is None:
            lowered = name.lower()
            index = self._index.get(lowered)
            if index is None:
                match = _TF_DEVICE.search(name)
                if match is not None:
                    index = self._index.get(f"{match.group(1).lower()}{match.group(2)}")
        if index is None:
            raise DeviceSpecError(f"unknown device {name!r}; this topology has {list(self._index)}", node=self.name)
        return index

    @cached_property
    def default_device(self) -> int:
        """Where nodes without a device decision run: the first accelerator, else device 0."""
        for index, device in enumerate(self.devices):
            if device.kind != "cpu":
                return index
        return 0

    @cached_property
    def device_types(self) -> tuple[tuple[DeviceSpec, ...], np.ndarray]:
        """Distinct hardware types (one representative each) and each device's type index."""
        keys: dict[tuple, int] = {}
        reps: list[DeviceSpec] = []
        type_of = np.empty(len(self.devices), dtype=np.int32)
        for index, device in enumerate(self.devices):
            key = device.type_key()
            if key not in keys:
                keys[key] = len(reps)
                reps.append(device)
            type_of[index] = keys[key]
        return tuple(reps), type_of

    # -- routing --------------------------------------------------------------------------------
    def _all_routes(self) -> list[list[tuple[int, ...] | None]]:
        count = len(self.devices)
        out_links: list[list[int]] = [[] for _ in range(count)]
        for index, link in enumerate(self.links):
            out_links[self._index[link.src]].append(index)
        routes: list[list[tuple[int, ...] | None]] = []
        for source in range(count):
            # Dijkstra on (hops, latency, path): deterministic and minimal in hop count first.
            best: list[tuple[int, float, tuple[int, ...]] | None] = [None] * count
            best[source] = (0, 0.0, ())
            heap = [(0, 0.0, (), source)]
            while heap:
                hops, latency, path, here = heapq.heappop(heap)
                current = best[here]
                if current is not None and (hops, latency, path) > current:
                    continue
                for link_index in out_links[here]:
                    link = self.links[link_index]
                    there = self._index[link.dst]
                    candidate = (hops + 1, latency + link.latency_s, path + (link_index,))
                    known = best[there]
                    if known is None or candidate < known:
                        best[there] = candidate
                        heapq.heappush(heap, (*candidate, there))
            routes.append([None if b is None else b[2] for b in best])
        return routes

    def route(self, src: int | str, dst: int | str) -> tuple[int, ...]:
        """Indices into `links` of the hops from `src` to `dst` (empty when they are the same device)."""
        a = src if isinstance(src, int) else self.device_index(src)
        b = dst if isinstance(dst, int) else self.device_index(dst)
        path = self._routes[a][b]
        if path is None:
            raise DeviceSpecError(
                f"no route from {self.devices[a].name} to {self.devices[b].name}", node=self.name, field="links"
            )
        return path

    def link(self, src: int | str, dst: int | str) -> tuple[Link, ...]:
        """The links of the route from `src` to `dst`, in order (one for neighbours, several on a ring)."""
        return tuple(self.links[i] for i in self.route(src, dst))

    def transfer_time(self, src: int | str, dst: int | str, nbytes: float) -> float:
        """Store-and-forward time of one transfer on idle links: the sum of each hop's time."""
        return sum(link.transfer_time(nbytes) for link in self.link(src, dst))

    @cached_property
    def route_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(hops[D, D], links[D, D, max_hops]) as arrays for vectorised routing; -1 hops: unreachable."""
        count = len(self.devices)
        width = max((len(p) for row in self._routes for p in row if p is not None), default=0)
        hops = np.full((count, count), -1, dtype=np.int64)
        links = np.full((count, count, max(width, 1)), -1, dtype=np.int64)
        for a, row in enumerate(self._routes):
            for b, path in enumerate(row):
                if path is not None:
                    hops[a, b] = len(path)
                    links[a, b, : len(path)] = path
        return hops, links

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, {len(self.devices)} devices, {len(self.links)} links)"
