"""Roofline times against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.devices import DeviceSpec
from cost_model.flops import node_bytes
from cost_model.roofline import dtype_family, group_boundary_bytes, group_time, node_dtype_family, node_time, roofline_time
from graph_ir import DType, Graph, NumpyTensor, TensorType, Value

F32 = DType.FLOAT32
# 1 GFLOP/s fp32, 4 GFLOP/s fp16, 1 GB/s, 1 us launch: times come out in whole microseconds.
DEVICE = DeviceSpec("d0", "gpu", {"fp32": 1e9, "fp16": 4e9}, mem_bandwidth=1e9, memory_bytes=1e9, launch_overhead_s=1e-6)


def _chain(length: int, size: int = 1000, dtype: DType = F32) -> Graph:
    graph = Graph()
    value = graph.add_input(Value("x", TensorType(dtype, (size,))))
    for i in range(length):
        node = graph.add_node("Relu", [value], name=f"r{i}")
        node.outputs[0].type = TensorType(dtype, (size,))
        value = node.outputs[0]
    graph.add_output(value)
    return graph


def test_memory_bound_elementwise() -> None:
    # Relu on 1000 f32: 1000 FLOPs (1 us) vs 4000 + 4000 bytes (8 us) -> 8 us + 1 us launch.
    (relu,) = _chain(1).nodes
    assert node_time(relu, DEVICE) == pytest.approx(9e-6, rel=1e-12)


def test_compute_bound_matmul() -> None:
    # [10,10] x [10,10]: 2000 FLOPs -> 2 us; 3 x 400 bytes -> 1.2 us; + 1 us launch = 3 us.
    graph = Graph()
    a = graph.add_input(Value("a", TensorType(F32, (10, 10))))
    w = graph.add_initializer(Value("w", const=NumpyTensor(np.ones((10, 10), np.float32))))
    node = graph.add_node("MatMul", [a, w])
    node.outputs[0].type = TensorType(F32, (10, 10))
    assert node_time(node, DEVICE) == pytest.approx(3e-6, rel=1e-12)
    assert roofline_time(2000, 1200, DEVICE) == pytest.approx(3e-6, rel=1e-12)


def test_dtype_family_picks_the_peak() -> None:
    assert dtype_family(DType.FLOAT16) == "fp16" and dtype_family(DType.BFLOAT16) == "fp16"
    assert dtype_family(DType.INT8) == "int8" and dtype_family(DType.UINT8) == "int8"
    assert dtype_family(DType.INT32) == "fp32" and dtype_family(None) == "fp32"
    assert dtype_family(DType.FLOAT64) == "fp64"
    # 4M-element fp16 Relu, made compute-bound by a slow memory: 4e6 FLOPs at 4 GFLOP/s = 1 ms.
    slow_memory = DeviceSpec("s", "gpu", {"fp32": 1e9, "fp16": 4e9}, 1e12, 1e9, 0.0)
    (relu,) = _chain(1, size=4_000_000, dtype=DType.FLOAT16).nodes
    assert node_dtype_family(relu) == "fp16"
    assert node_time(relu, slow_memory) == pytest.approx(1e-3, rel=1e-12)


def test_fused_group_pays_boundary_bytes_and_one_launch() -> None:
    graph = _chain(3)
    nodes = graph.nodes
    # Alone: 3 x 9 us. Fused: 3000 FLOPs (3 us) vs 4000 in + 4000 out (8 us) -> 8 + 1 = 9 us.
    assert sum(node_time(n, DEVICE) for n in nodes) == pytest.approx(27e-6, rel=1e-12)
    assert group_boundary_bytes(nodes) == 8000
    assert group_time(nodes, DEVICE) == pytest.approx(9e-6, rel=1e-12)
    # A group whose middle output is also used outside writes it too.
    extra = graph.add_node("Neg", [nodes[1].outputs[0]], name="outside")
    extra.outputs[0].type = TensorType(F32, (1000,))
    assert group_boundary_bytes(nodes) == 12000


def test_single_node_group_equals_node_bytes() -> None:
    (relu,) = _chain(1).nodes
    assert group_boundary_bytes([relu]) == node_bytes(relu)
    assert group_time([relu], DEVICE) == node_time(relu, DEVICE)
    assert group_time([], DEVICE) == 0.0
