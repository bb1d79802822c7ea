"""Time ONNX ops (or groups of them) in onnxruntime: each cut becomes a small model in a session.

A single node keeps its initializers (a Conv's weights stay constant inputs, as in the model);
other inputs are fed seeded random data. Graph optimizations stay on (ORT_ENABLE_ALL), so a group
of several nodes is fused the way onnxruntime would fuse it in the full model.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cost_model.profiling.subgraph import ProfilingError, cut_group
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["OrtBackend", "old_opset_hint"]

logger = logging.getLogger(__name__)


class OrtBackend:
    """`ProfilingBackend` over onnxruntime's CPU execution provider."""

    name = "onnxruntime-cpu"

    def __init__(self, intra_op_threads: int = 0) -> None:
        self.intra_op_threads = intra_op_threads  # 0: onnxruntime's default (all cores)

    def prepare(self, graph: Graph, members: Sequence[Node], *, seed: int = 0) -> Callable[[], Any]:
        import onnxruntime as ort

        from graph_ir.io.onnx_export import export_onnx

        cut = cut_group(graph, members)
        feeds = _random_feeds(cut.graph.inputs, seed)  # first: it names an untyped input clearly
        model = export_onnx(cut.graph)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own exception types
            names = ", ".join(n.name for n in cut.members[:4])
            raise ProfilingError(f"onnxruntime cannot load group [{names}]: {err}{old_opset_hint(str(err))}") from err
        return lambda: session.run(None, feeds)


# onnxruntime's words for an operator version it has no kernel for, e.g. "BatchNormalization(6)".
_NO_KERNEL = re.compile(r"Could not find an implementation for \w+\((\d+)\)")
# onnxruntime keeps kernels from opset 7 on (it dropped the older ones).
_OLDEST_RUN = 7


def old_opset_hint(message: str) -> str:
    """A hint to upgrade the model when onnxruntime's error is an operator version older than any
    it runs; "" otherwise."""
    found = _NO_KERNEL.search(message)
    if found is None or int(found.group(1)) >= _OLDEST_RUN:
        return ""
    return ("; this onnxruntime has no kernels for operator versions below opset 7: upgrade the model first "
            "(compiler-opt convert MODEL OUT -p upgrade-opset)")


def _random_feeds(values: Sequence[Value], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in values:
        vtype = value.type
        if not isinstance(vtype, TensorType) or vtype.dtype is None or vtype.shape is None or not vtype.shape.is_static:
            raise ProfilingError(
                f"input %{value.name} needs a static tensor type to be timed (run the shape-infer pass first)"
            )
        dtype = np.dtype(vtype.dtype.numpy)
        shape = tuple(int(d) for d in vtype.shape)
        if dtype == np.bool_:
            feeds[value.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 4, size=shape).astype(dtype)
        else:
            feeds[value.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    return feeds
