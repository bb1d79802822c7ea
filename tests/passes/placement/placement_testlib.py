"""Small typed graphs and hand-made topologies for the placement tests.

Devices run 1 GFLOP/s with 1 GB/s memory and a 1 us launch (as in the simulator's tests), so a
node on n f32 values costs microseconds and a transfer of the same value is comparable: placement
choices matter and are easy to reason about.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from cost_model.devices import DeviceSpec, Link, Topology
from cost_model.simulator import SimulationProblem
from cost_model.simulator.problem import VALUE_CONSTANT
from graph_ir import DType, Graph, NumpyTensor, TensorType, Value

F32 = DType.FLOAT32
US = 1e-6


def device(name: str, *, memory: float = 1e9, flops: float = 1e9, bandwidth: float = 1e9) -> DeviceSpec:
    return DeviceSpec(name, "gpu", {"fp32": flops}, mem_bandwidth=bandwidth, memory_bytes=memory, launch_overhead_s=US)


def topology(
    count: int = 2, *, bandwidth: float = 1e9, latency: float = US, memory: float = 1e9, devices: list[DeviceSpec] | None = None
) -> Topology:
    specs = devices if devices is not None else [device(f"d{i}", memory=memory) for i in range(count)]
    links = []
    for a, b in itertools.permutations(range(len(specs)), 2):
        links.append(Link(specs[a].name, specs[b].name, bandwidth, latency))
    return Topology("test", specs, links)


class Builder:
    """Graphs whose values are f32[size] unless told otherwise."""

    def __init__(self, size: int = 1000) -> None:
        self.graph = Graph("g")
        self.size = size

    def input(self, name: str, size: int | None = None) -> Value:
        return self.graph.add_input(Value(name, TensorType(F32, (size or self.size,))))

    def const(self, name: str, size: int | None = None) -> Value:
        data = np.zeros(size or self.size, np.float32)
        return self.graph.add_initializer(Value(name, const=NumpyTensor(data)))

    def op(self, op_type: str, inputs: list[Value], name: str, size: int | None = None) -> Value:
        node = self.graph.add_node(op_type, inputs, name=name)
        node.outputs[0].type = TensorType(F32, (size or self.size,))
        return node.outputs[0]

    def output(self, *values: Value) -> Graph:
        for v in values:
            self.graph.add_output(v)
        return self.graph


def two_branches(length: int = 4, size: int = 100_000) -> Graph:
    """x -> two independent chains of Tanh of equal cost -> two outputs."""
    b = Builder(size)
    x = b.input("x")
    ends = []
    for branch in "ab":
        v = x
        for i in range(length):
            v = b.op("Tanh", [v], f"{branch}{i}")
        ends.append(v)
    return b.output(*ends)


def diamond() -> Graph:
    """6 nodes: a -> (b, c) -> d -> e, plus f reading a and e; sizes differ per value."""
    b = Builder(1000)
    x = b.input("x")
    w = b.const("w")
    a = b.op("Mul", [x, w], "a", size=1000)
    left = b.op("Tanh", [a], "b", size=4000)
    right = b.op("Exp", [a], "c", size=2000)
    d = b.op("Add", [left, right], "d", size=3000)
    e = b.op("Relu", [d], "e", size=500)
    f = b.op("Add", [a, e], "f", size=1000)
    return b.output(f)


def chain(sizes: list[int]) -> Graph:
    b = Builder()
    v = b.input("x", sizes[0])
    for i, size in enumerate(sizes):
        v = b.op("Tanh" if i % 2 else "Exp", [v], f"n{i}", size=size)
    return b.output(v)


def linear_extensions(preds: list[list[int]]) -> Iterator[list[int]]:
    """Every topological order of a small DAG."""
    n = len(preds)
    done = [False] * n
    order: list[int] = []

    def extend() -> Iterator[list[int]]:
        if len(order) == n:
            yield list(order)
            return
        for v in range(n):
            if not done[v] and all(done[p] for p in preds[v]):
                done[v] = True
                order.append(v)
                yield from extend()
                order.pop()
                done[v] = False

    yield from extend()


def exact_makespan(problem: SimulationProblem, device: tuple[int, ...]) -> float:
    """The CP-SAT latency model evaluated by enumeration, straight from the problem's floats:
    the best semi-active schedule over all topological orders of the nodes (optimal when links
    do not queue: order any optimal schedule by start time and left-shift it)."""
    topo = problem.topology
    n = problem.num_nodes
    duration = problem.node_time[np.arange(n), problem.device_type_of[list(device)]]
    needs: list[list[tuple[int, bool, float]]] = [[] for _ in range(n)]  # (origin, is_input, delay)
    preds: list[list[int]] = [[] for _ in range(n)]
    for value, consumer in zip(problem.use_value.tolist(), problem.use_node.tolist()):
        if problem.value_kind[value] == VALUE_CONSTANT:
            continue
        producer = int(problem.value_producer[value])
        origin = producer if producer >= 0 else int(problem.value_first_consumer[value])
        if origin == consumer:
            continue
        src, dst = device[origin], device[consumer]
        delay = topo.transfer_time(src, dst, float(problem.value_bytes[value])) if src != dst else 0.0
        needs[consumer].append((origin, producer < 0, delay))
        if producer >= 0:
            preds[consumer].append(producer)
    best = np.inf
    for order in linear_extensions(preds):
        end = [0.0] * n
        free: dict[int, float] = {}
        for v in order:
            ready = max([(0.0 if is_input else end[o]) + delay for o, is_input, delay in needs[v]], default=0.0)
            start = max(ready, free.get(device[v], 0.0))
            end[v] = start + duration[v]
            free[device[v]] = end[v]
        best = min(best, max(end))
    return float(best)
