"""`Profiler`: measured time of ops and fused groups, deduplicated by signature and cached.

    profiler = Profiler(XlaBackend())               # or OrtBackend(), or backend_for(graph)
    times = profiler.profile_groups(graph, [[a], [b, c]])   # Measurement per group
    profiler.profile_nodes(graph)                    # {node: Measurement}, every node alone

Each distinct signature is prepared (compiled) once and timed with `time_interleaved`: warm-up,
`repeats` rounds in a random order, min and median; results go to the SQLite cache, so the next
call (or the next process) with the same op on the same machine does not run anything.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from cost_model.profiling.cache import ProfileCache
from cost_model.profiling.signature import group_signature, machine_fingerprint, signature_key
from cost_model.profiling.subgraph import ProfilingError
from cost_model.profiling.timing import Measurement, time_interleaved

if TYPE_CHECKING:
    from graph_ir.core import Node
    from graph_ir.graph import Graph

__all__ = ["Profiler", "ProfilingBackend", "backend_for"]

logger = logging.getLogger(__name__)


class ProfilingBackend(Protocol):
    name: str

    def prepare(self, graph: Graph, members: Sequence[Node], *, seed: int = 0) -> Callable[[], Any]:
        """Compile `members` as one unit and return a runner that executes it once, blocking."""
        ...


def backend_for(graph: Graph) -> ProfilingBackend:
    """XLA for graphs imported from HLO/StableHLO, onnxruntime for ONNX graphs."""
    model = graph.root.model
    source = model.source_format if model is not None else ""
    if source in ("hlo", "stablehlo"):
        from cost_model.profiling.xla_backend import XlaBackend

        return XlaBackend()
    if source == "onnx" or any(n.domain in ("", "ai.onnx") for n in graph):
        from cost_model.profiling.ort_backend import OrtBackend

        return OrtBackend()
    raise ProfilingError(f"no profiling backend for a graph from {source or 'an unknown source'!r} (HLO or ONNX expected)")


class Profiler:
    """Times groups of nodes on this machine through a backend; `cache=None` opens the default
    SQLite cache, `cache=False` disables caching."""

    def __init__(
        self,
        backend: ProfilingBackend,
        *,
        cache: ProfileCache | None | bool = None,
        repeats: int = 20,
        warmup: int = 3,
        seed: int = 0,
    ) -> None:
        self.backend = backend
        # Not `cache or None`: an empty ProfileCache is falsy (it has __len__).
        self.cache: ProfileCache | None = cache if isinstance(cache, ProfileCache) else (ProfileCache() if cache in (None, True) else None)
        self.repeats = repeats
        self.warmup = warmup
        self.seed = seed
        self.machine = machine_fingerprint()
        self.measured = 0  # distinct signatures actually run by this profiler

    def profile_groups(self, graph: Graph, groups: Sequence[Sequence[Node]]) -> list[Measurement]:
        """One Measurement per group (members in any order; a group is one compiled unit)."""
        keys, found, todo = self._lookup(graph, groups)
        if todo:
            runners = self.prepare(graph, todo)
            measurements = time_interleaved(runners, repeats=self.repeats, warmup=self.warmup, seed=self.seed)
            found.update(self.store(todo, measurements))
        return [found[key] for key in keys]

    def pending(self, graph: Graph, groups: Sequence[Sequence[Node]]) -> dict[str, tuple[list[Node], str]]:
        """The groups not in the cache yet, by key: (members in graph order, signature text).

        With `prepare` and `store` this lets a caller time them in one interleaved pool with
        other work (the calibration times profiles and whole steps side by side).
        """
        return self._lookup(graph, groups)[2]

    def prepare(self, graph: Graph, todo: dict[str, tuple[list[Node], str]]) -> list[Callable[[], Any]]:
        return [self.backend.prepare(graph, members, seed=self.seed) for members, _ in todo.values()]

    def store(self, todo: dict[str, tuple[list[Node], str]], measurements: Sequence[Measurement]) -> dict[str, Measurement]:
        out = dict(zip(todo, measurements))
        self.measured += len(out)
        if self.cache is not None:
            for key, measurement in out.items():
                self.cache.put(key, self.backend.name, self.machine, measurement, todo[key][1])
        logger.debug("profiled %d new signatures with %s", len(out), self.backend.name)
        return out

    def _lookup(
        self, graph: Graph, groups: Sequence[Sequence[Node]]
    ) -> tuple[list[str], dict[str, Measurement], dict[str, tuple[list[Node], str]]]:
        position = {node: index for index, node in enumerate(graph)}
        keys: list[str] = []
        todo: dict[str, tuple[list[Node], str]] = {}
        found: dict[str, Measurement] = {}
        for members in groups:
            ordered = sorted(dict.fromkeys(members), key=position.__getitem__)
            text = group_signature(ordered)
            key = signature_key(text)
            keys.append(key)
            if key in found or key in todo:
                continue
            cached = self.cache.get(key, self.backend.name, self.machine) if self.cache is not None else None
            if cached is not None:
                found[key] = cached
            else:
                todo[key] = (ordered, text)
        return keys, found, todo

    def profile_nodes(self, graph: Graph, nodes: Sequence[Node] | None = None) -> dict[Node, Measurement]:
        """Every node (default: all top-level nodes) timed as its own kernel."""
        chosen = list(graph) if nodes is None else list(nodes)
        return dict(zip(chosen, self.profile_groups(graph, [[n] for n in chosen])))
