"""Fixtures for pass tests: an isolated pass registry, and an onnxruntime equivalence check."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from graph_ir import DType, Graph, TensorType
from passes.infra import registry

# Tolerances for comparing a rewritten model with the original (float32 arithmetic, where
# folding may reorder operations): rtol 1e-5, atol 1e-6.
RTOL = 1e-5
ATOL = 1e-6


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The registry as it is now, restored after the test (plugins count as not yet loaded)."""
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    return registry._registry


def random_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input that is not also an initializer."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        if value.const is not None:
            continue
        assert isinstance(value.type, TensorType) and value.shape is not None and value.shape.is_static
        dtype = value.dtype.numpy
        if value.dtype.is_floating:
            feeds[value.name] = rng.standard_normal(tuple(value.shape)).astype(dtype)
        elif value.dtype is DType.BOOL:
            feeds[value.name] = np.asarray(rng.random(tuple(value.shape)) > 0.5)
        else:
            feeds[value.name] = rng.integers(-5, 6, tuple(value.shape)).astype(dtype)
    return feeds


def run_onnxruntime(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnx
    import onnxruntime as ort

    from graph_ir.io.onnx_export import export_onnx

    # Hand-built graphs may leave output types unset; onnx's inference fills them in.
    model = onnx.shape_inference.infer_shapes(export_onnx(graph), strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.fixture
def assert_same_numerics() -> Callable[[Graph, Graph], None]:
    """`check(before, after)`: both graphs give the same outputs in onnxruntime (seeded inputs).

    `before` must be a copy taken before the pass ran (passes work in place).
    """

    def check(before: Graph, after: Graph, seed: int = 0) -> None:
        feeds = random_feeds(before, seed)
        expected = run_onnxruntime(before, feeds)
        actual = run_onnxruntime(after, feeds)
        assert list(actual) == list(expected), "the rewrite changed the graph's output names"
        for name, value in expected.items():
            np.testing.assert_allclose(actual[name], value, rtol=RTOL, atol=ATOL, err_msg=f"output {name}")

    return check
