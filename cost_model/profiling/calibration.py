"""Calibration: the simulator's step time against the same decisions run for real on this CPU.

    workload = hlo_workload("mlp", fn, *args)                   # a JAX function as an HLO graph
    configs = [random_configuration(problem, rng, num_devices=2) for _ in range(30)]
    executor = GroupExecutor(workload.graph, problem.nodes)    # compiles each group once
    measured = executor.measure([executor.plan(c) for c in configs])   # min-of-N, interleaved

A configuration is a `Decisions`: fusion groups drawn at random (`random_configuration`: each
node joins the group of one of its producers with probability `fuse_prob`, when that keeps the
group graph acyclic, so groups are producer-consumer connected and never form cycles), one
device per group, and a random topological order of the groups as the schedule (priorities
descending along it). For real, every group is one XLA executable on its device, dispatched in
schedule order; a value read on another device is copied there once (`jax.device_put`), as the
simulator moves it once; graph inputs start on the device of their first consumer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cost_model.decisions import Decisions
from cost_model.profiling.subgraph import ProfilingError
from cost_model.profiling.timing import Measurement, time_interleaved
from cost_model.profiling.xla_backend import XlaBackend, XlaKernel, host_devices, random_inputs
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = [
    "Workload",
    "hlo_workload",
    "random_configuration",
    "kernel_groups",
    "ExecutionPlan",
    "GroupExecutor",
    "correlations",
]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Workload:
    name: str
    graph: Graph
    reference: Callable[..., Any] | None = None  # the JAX function, for numerical checks
    args: tuple[Any, ...] = ()


def hlo_workload(name: str, fn: Callable[..., Any], *args: Any) -> Workload:
    """Lower a JAX function to (unoptimized) HLO text and import it: one IR node per HLO op."""
    import jax

    from graph_ir.io.hlo_import import import_hlo_text

    text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    return Workload(name, import_hlo_text(text), fn, tuple(args))


def _producers(problem: SimulationProblem) -> list[list[int]]:
    """Distinct producer node indices of each node (inputs and captured values)."""
    preds: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    producer = problem.use_producer
    for p, c in zip(producer.tolist(), problem.use_node.tolist()):
        if p >= 0 and p not in preds[c]:
            preds[c].append(p)
    return preds


def random_configuration(
    problem: SimulationProblem,
    rng: np.random.Generator,
    *,
    num_devices: int = 1,
    fuse_prob: float | None = None,
    placement: str | None = None,
) -> Decisions:
    """Random valid fusion groups, a device per group and a random schedule (see module docstring).

    `placement` is "single" (all on device 0), "split" (groups before a random point of the
    schedule on device 0, the rest on device 1) or "random" (each group on a random device).
    """
    n = problem.num_nodes
    preds = _producers(problem)
    fuse_prob = float(rng.uniform(0.0, 1.0)) if fuse_prob is None else fuse_prob
    group_of = np.full(n, -1, dtype=np.int64)
    succ: list[set[int]] = []  # group -> successor groups

    def reaches(start: int, targets: set[int]) -> bool:
        stack, seen = [start], {start}
        while stack:
            g = stack.pop()
            for s in succ[g]:
                if s in targets:
                    return True
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return False

    for i in range(n):
        pred_groups = list(dict.fromkeys(int(group_of[p]) for p in preds[i]))
        chosen = -1
        if pred_groups and rng.random() < fuse_prob:
            for g in rng.permutation(pred_groups).tolist():
                others = set(pred_groups) - {g}
                if not others or not reaches(g, others):  # a path g -> h -> i would close a cycle
                    chosen = g
                    break
        if chosen < 0:
            chosen = len(succ)
            succ.append(set())
        group_of[i] = chosen
        for h in pred_groups:
            if h != chosen:
                succ[h].add(chosen)

    num_groups = len(succ)
    # Random topological order of the groups (Kahn with a random pick among the ready ones).
    indegree = np.zeros(num_groups, dtype=np.int64)
    for g in range(num_groups):
        for s in succ[g]:
            indegree[s] += 1
    ready = [g for g in range(num_groups) if indegree[g] == 0]
    order: list[int] = []
    while ready:
        g = ready.pop(int(rng.integers(len(ready))))
        order.append(g)
        for s in succ[g]:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    position = np.empty(num_groups, dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(num_groups)

    if placement is None:
        placement = "single" if num_devices == 1 else str(rng.choice(["split", "random"]))
    if placement == "single" or num_devices == 1:
        group_device = np.zeros(num_groups, dtype=np.int64)
    elif placement == "split":
        cut = int(rng.integers(1, max(num_groups, 2)))
        group_device = (position >= cut).astype(np.int64)
    elif placement == "random":
        group_device = rng.integers(0, num_devices, size=num_groups)
    else:
        raise ValueError(f"placement must be single, split or random, got {placement!r}")

    sizes = np.bincount(group_of, minlength=num_groups)
    fusion_group = np.where(sizes[group_of] > 1, group_of, -1)
    priority = (num_groups - position[group_of]).astype(np.float64)
    return Decisions(group_device[group_of], fusion_group, priority)


def kernel_groups(decisions: Decisions) -> tuple[list[list[int]], list[int]]:
    """The kernels of `decisions` as node-index lists, in schedule order, and each one's device."""
    n = decisions.num_nodes
    key = np.where(decisions.fusion_group >= 0, decisions.fusion_group.astype(np.int64) * 1_000_003 + decisions.device, -1 - np.arange(n))
    members: dict[int, list[int]] = {}
    for i, k in enumerate(key.tolist()):
        members.setdefault(k, []).append(i)
    kernels = list(members.values())
    kernels.sort(key=lambda m: (-decisions.priority[m[0]], m[0]))
    return kernels, [int(decisions.device[m[0]]) for m in kernels]


@dataclass(eq=False)
class ExecutionPlan:
    """One configuration, ready to run: kernels in schedule order with their argument routing."""

    decisions: Decisions
    steps: list[tuple[XlaKernel, list[tuple[int, int]], list[int]]]  # kernel, [(slot, device)], output slots
    outputs: list[int]  # slots of the graph outputs
    num_slots: int
    initial: dict[int, Any] = field(default_factory=dict)  # slot -> array (graph inputs, on their home device)
    devices: list[Any] = field(default_factory=list)
    one_in_flight: bool = True

    def run(self) -> list[Any]:
        """Execute once; returns the graph outputs (blocked until ready).

        With `one_in_flight` (the default) a kernel is dispatched to a device only after that
        device's previous kernel finished: each device runs one kernel at a time and pays its
        dispatch inside the kernel's time, as the simulator and the isolated profiles assume,
        while two devices still overlap. Without it, dispatch is fully asynchronous and the host
        prepares kernel k+1 while kernel k runs, an overlap the simulator does not model.
        """
        import jax

        env: list[Any] = [None] * self.num_slots
        moved: dict[tuple[int, int], Any] = {}
        devices = self.devices
        for slot, array in self.initial.items():
            env[slot] = array
        produced: list[Any] = []
        last: dict[Any, list[Any]] = {}
        for kernel, args, out_slots in self.steps:
            if self.one_in_flight:
                for out in last.get(kernel.device, ()):
                    out.block_until_ready()
            call_args = []
            for slot, device in args:
                if device < 0:
                    call_args.append(env[slot])
                else:
                    copy = moved.get((slot, device))
                    if copy is None:
                        copy = moved[(slot, device)] = jax.device_put(env[slot], devices[device])
                    call_args.append(copy)
            outs = kernel.run(call_args)
            last[kernel.device] = outs
            for slot, out in zip(out_slots, outs):
                env[slot] = out
            produced.extend(outs)
        for out in produced:
            out.block_until_ready()
        return [env[s] for s in self.outputs]


class GroupExecutor:
    """Compiles kernels of an HLO graph (cached by members and device) and builds plans."""

    def __init__(self, graph: Graph, nodes: Sequence[Node], *, seed: int = 0, backend: XlaBackend | None = None) -> None:
        self.graph = graph
        self.nodes = list(nodes)
        self.backend = backend if backend is not None else XlaBackend()  # shares its compiled kernels
        self.devices = host_devices()
        self.kernels: dict[tuple[tuple[int, ...], int], XlaKernel] = {}
        self.compile_seconds = 0.0
        self.slot: dict[Any, int] = {}  # a Value, or (Value, k) for leaf k of a tuple
        self.home: dict[Value, int] = {}
        self._whole: Any = None  # the whole graph as one executable (run_whole)
        self.on_compile: Callable[[], object] | None = None  # called after each kernel compiled (a progress bar)
        rng_inputs = random_inputs(graph.inputs, self.devices[0], seed=seed)
        self.input_arrays = {value: np.asarray(a) for value, a in zip(graph.inputs, rng_inputs)}

    def kernel(self, members: Sequence[int], device: int) -> XlaKernel:
        key = (tuple(members), device)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.backend.kernel(self.graph, [self.nodes[i] for i in members], self.devices[device])
            for value in kernel.cut.outputs:
                if _tensor_leaves(value.type) is None:
                    raise ProfilingError(f"group output %{value.name} is a {value.type}; only tensors and tuples of tensors are routed")
            self.kernels[key] = kernel
            self.compile_seconds += kernel.compile_seconds
            if self.on_compile is not None:
                self.on_compile()
        return kernel

    def uncompiled(self, decisions: Decisions) -> set[tuple[tuple[int, ...], int]]:
        """The kernels `plan(decisions)` would still have to compile (keys of `kernels`)."""
        groups, devices = self._tuples_inside(*kernel_groups(decisions))
        return {(tuple(m), d) for m, d in zip(groups, devices)} - self.kernels.keys()

    def run_whole(self) -> list[np.ndarray]:
        """The graph as one XLA executable (the module as written, its own fusions as calls) on
        the plans' inputs: the reference a configuration's outputs are checked against, computed
        without this executor's routing (and with one compile instead of one per node)."""
        from graph_ir.io.hlo_export import export_hlo_proto
        from graph_ir.io.xla_bridge import compile_hlo_module, run_executable

        if self._whole is None:  # compiled once; the check runs it twice
            self._whole = compile_hlo_module(export_hlo_proto(self.graph, fusion_kinds="call"))
        return run_executable(self._whole, [self.input_arrays[v] for v in self.graph.inputs])

    def _leaf_slots(self, value: Value) -> list[int]:
        """The slots of a value's tensors: itself, or each leaf of a tuple (XLA returns a tuple
        result as its leaves)."""
        if isinstance(value.type, TensorType):
            return [self._slot(value)]
        return [self._slot((value, k)) for k in range(len(_tensor_leaves(value.type) or ()))]  # type: ignore[arg-type]

    def _slot(self, value: Value) -> int:
        slot = self.slot.get(value)
        if slot is None:
            slot = self.slot[value] = len(self.slot)
        return slot

    def plan(self, decisions: Decisions, *, one_in_flight: bool = True) -> ExecutionPlan:
        from graph_ir.io.xla_bridge import device_put

        if len(self.devices) < int(decisions.device.max()) + 1:
            raise ProfilingError(
                f"decisions use {int(decisions.device.max()) + 1} devices but XLA has {len(self.devices)} "
                "(set XLA_FLAGS=--xla_force_host_platform_device_count=N before importing jax)"
            )
        groups, group_device = self._tuples_inside(*kernel_groups(decisions))
        node_device = decisions.device
        index = {node: i for i, node in enumerate(self.nodes)}
        location: dict[Value, int] = {}
        initial: dict[int, Any] = {}
        for value in self.graph.inputs:  # home: the device of the first consumer in node order
            users = [index[u.node] for u in value.uses if u.node in index]
            home = int(node_device[min(users)]) if users else 0
            location[value] = home
            initial[self._slot(value)] = device_put(self.input_arrays[value], self.devices[home])  # 64-bit kept
        steps = []
        for members, device in zip(groups, group_device):
            kernel = self.kernel(members, device)
            args = []
            for value in kernel.cut.inputs:
                source = location.get(value)
                if source is None:
                    raise ProfilingError(f"%{value.name} is read before it is produced: the schedule is not topological")
                if not isinstance(value.type, TensorType):
                    raise ProfilingError(f"%{value.name} ({value.type}) would cross kernels as an argument; only tensors are passed between executables")
                args.append((self._slot(value), -1 if source == device else device))
            outs = [slot for v in kernel.cut.outputs for slot in self._leaf_slots(v)]
            for value in kernel.cut.outputs:
                location[value] = device
            steps.append((kernel, args, outs))
        return ExecutionPlan(decisions, steps, self._output_slots(), len(self.slot) + 1, initial, self.devices, one_in_flight)

    def _output_slots(self) -> list[int]:
        """The graph outputs as tensor slots: a ROOT `tuple` stands for its operands, another
        tuple-valued output (a variadic reduce, a multi-output fusion) for its leaves (XLA's own
        result is the leaves either way)."""
        out: list[int] = []
        for value in self.graph.outputs:
            producer = value.producer
            if not isinstance(value.type, TensorType) and producer is not None and producer.op_type == "tuple":
                out.extend(slot for v in producer.inputs if v is not None for slot in self._leaf_slots(v))
            else:
                out.extend(self._leaf_slots(value))
        return out

    def _tuples_inside(self, groups: list[list[int]], devices: list[int]) -> tuple[list[list[int]], list[int]]:
        """Kernels whose boundary carries no tuple: only tensors are routed between executables, so
        a `get-tuple-element` joins the kernel that makes its tuple (XLA gives it no kernel of its
        own either), and a `tuple` that only packs a ROOT output or one kernel's operand is left
        out / joins that kernel. A tuple crossing kernels in any other way stays an error."""
        index = {node: i for i, node in enumerate(self.nodes)}
        group_of = {i: g for g, members in enumerate(groups) for i in members}
        members = [list(m) for m in groups]
        changed = True
        while changed:
            changed = False
            for i, node in enumerate(self.nodes):
                for value in node.outputs:
                    if isinstance(value.type, TensorType):
                        continue
                    users = [index[u.node] for u in value.uses if u.node in index]
                    if node.op_type == "tuple" and value.is_graph_output() and not users:
                        if i in group_of:  # the ROOT tuple: its operands are the outputs (_output_slots)
                            members[group_of.pop(i)].remove(i)
                            changed = True
                        continue
                    home = group_of.get(i)
                    for user in users:
                        if group_of.get(user) == home or home is None:
                            continue
                        if self.nodes[user].op_type == "get-tuple-element":
                            members[group_of[user]].remove(user)
                            members[home].append(user)
                            group_of[user] = home
                            changed = True
                    targets = {group_of.get(u) for u in users} - {home}
                    if node.op_type == "tuple" and home is not None and len(targets) == 1 and None not in targets and not value.is_graph_output():
                        target = targets.pop()
                        members[home].remove(i)
                        members[target].append(i)
                        group_of[i] = target
                        changed = True
        kept = [(sorted(m), d) for m, d in zip(members, devices) if m]  # cut_group takes members in graph order anyway
        return [m for m, _ in kept], [d for _, d in kept]

    def measure(self, plans: Sequence[ExecutionPlan], *, repeats: int = 20, warmup: int = 3, seed: int = 0) -> list[Measurement]:
        """Step time of each plan: min/median of `repeats` interleaved runs."""
        return time_interleaved([p.run for p in plans], repeats=repeats, warmup=warmup, seed=seed)


def _tensor_leaves(vtype: Any) -> list[Any] | None:
    """A type's tensors in order (a tensor: itself; a tuple: its elements', depth first); None
    when it holds something else (a token)."""
    if isinstance(vtype, TensorType):
        return [vtype]
    elements = getattr(vtype, "elements", None)
    if elements is None:
        return None
    leaves: list[Any] = []
    for element in elements:
        inner = _tensor_leaves(element)
        if inner is None:
            return None
        leaves.extend(inner)
    return leaves


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.arange(1, values.size + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse.reshape(-1), weights=ranks)
    return (sums / counts)[inverse.reshape(-1)]  # ties share their average rank, as scipy does


def correlations(simulated: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    """Spearman (Pearson of average ranks) and Pearson correlation of simulated vs measured.

    The same numbers as `scipy.stats.spearmanr` / `pearsonr` (the benchmark checks that), in
    numpy, because importing scipy.stats costs seconds in every test process.
    """
    sim = np.asarray(simulated, dtype=np.float64)
    real = np.asarray(measured, dtype=np.float64)
    if sim.size < 3 or np.ptp(sim) == 0 or np.ptp(real) == 0:
        return {"spearman": float("nan"), "pearson": float("nan")}
    pearson = float(np.corrcoef(sim, real)[0, 1])
    spearman = float(np.corrcoef(_average_ranks(sim), _average_ranks(real))[0, 1])
    return {"spearman": spearman, "pearson": pearson}
