"""Small graph builders shared by the ONNX rewrite tests (not a test module)."""

from __future__ import annotations

import numpy as np

from graph_ir import DType, Graph, NumpyTensor, TensorType, Value


def f32(name: str, *shape: int) -> Value:
    return Value(name, TensorType(DType.FLOAT32, shape))


def const(graph: Graph, array: np.ndarray, name: str = "c") -> Value:
    return graph.add_constant(NumpyTensor(np.asarray(array)), name)


def typed(graph: Graph) -> Graph:
    """Run shape inference so every value has a type (rewrites read dtypes and shapes)."""
    from passes import run_pipeline

    return run_pipeline(graph, "shape-infer").graph


def ops(graph: Graph) -> list[str]:
    return [n.op_type for n in graph]
