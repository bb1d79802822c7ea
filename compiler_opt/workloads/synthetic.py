"""Synthetic ONNX graphs of any size: random DAGs of realistic, fully typed ops.

The graph mimics a transformer-ish MLP soup: a [batch, hidden] activation stream through
MatMul (shared weight pool), bias Add (one bias initializer per node, like real models' many
small constants), unary activations, binary mixes of two earlier values (skip connections of
random length), Softmax, LayerNormalization, ReduceMean+Sub (centering), and Concat + MatMul
(widening then projecting back). Every value has its shape in `value_info`; the model passes
`onnx.checker` and runs in onnxruntime.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

__all__ = ["random_onnx_dag", "cached_random_dag_onnx"]

logger = logging.getLogger(__name__)

_UNARY = ("Relu", "Sigmoid", "Tanh", "Gelu", "Neg", "Abs", "Erf")
_BINARY = ("Add", "Mul", "Sub", "Max")
# (pattern, relative weight); a pattern emits 1-2 nodes.
_PATTERNS = (
    ("matmul", 10),
    ("bias", 10),
    ("unary", 30),
    ("binary", 30),
    ("softmax", 5),
    ("layernorm", 5),
    ("center", 5),
    ("concat_project", 5),
)


def random_onnx_dag(
    num_nodes: int, *, seed: int = 0, batch: int = 8, hidden: int = 64, weight_pool: int = 64, window: int = 512
) -> ModelProto:
    """A random DAG with exactly `num_nodes` nodes (opset 20).

    Each node reads the oldest not-yet-used value when there is one (so few values dangle),
    and its second operand from the last `window` values (skip connections).
    """
    if num_nodes < 1:
        raise ValueError("num_nodes must be at least 1")
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    f32 = TensorProto.FLOAT
    stream = [batch, hidden]

    initializers: list[onnx.TensorProto] = []
    made: set[str] = set()

    def constant(name: str, make: object) -> str:
        """Add a shared initializer on first use only (unused initializers would be noise)."""
        if name not in made:
            made.add(name)
            initializers.append(numpy_helper.from_array(make(), name))  # type: ignore[operator]
        return name

    def weight(rows: int) -> np.ndarray:
        return (np_rng.standard_normal((rows, hidden)) / np.sqrt(rows)).astype(np.float32)

    nodes: list[onnx.NodeProto] = []
    value_info: list[onnx.ValueInfoProto] = []
    values = ["x"]  # every [batch, hidden] value, in creation order
    unused: dict[str, None] = {"x": None}
    counter = 0

    def fresh(shape: list[int]) -> str:
        nonlocal counter
        counter += 1
        name = f"t{counter}"
        value_info.append(helper.make_tensor_value_info(name, f32, shape))
        return name

    def take_primary() -> str:
        if unused:
            name = next(iter(unused))
            del unused[name]
            return name
        return values[-1]

    def take_secondary() -> str:
        name = values[max(0, len(values) - window) + rng.randrange(min(window, len(values)))]
        unused.pop(name, None)
        return name

    def emit(op: str, inputs: list[str], shape: list[int], *, stream_value: bool = True, **attrs: object) -> str:
        out = fresh(shape)
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(nodes)}", **attrs))
        if stream_value:
            values.append(out)
            unused[out] = None
        return out

    names = [p for p, _ in _PATTERNS]
    weights = [w for _, w in _PATTERNS]
    while len(nodes) < num_nodes:
        room = num_nodes - len(nodes)
        pattern = rng.choices(names, weights)[0]
        if room < 2 and pattern in ("center", "concat_project"):
            pattern = "unary"
        if pattern == "matmul":
            emit("MatMul", [take_primary(), constant(f"w{rng.randrange(weight_pool)}", lambda: weight(hidden))], stream)
        elif pattern == "bias":
            bias = f"b{len(nodes)}"
            initializers.append(numpy_helper.from_array(np_rng.standard_normal(hidden).astype(np.float32) * 0.1, bias))
            emit("Add", [take_primary(), bias], stream)
        elif pattern == "unary":
            emit(rng.choice(_UNARY), [take_primary()], stream)
        elif pattern == "binary":
            emit(rng.choice(_BINARY), [take_primary(), take_secondary()], stream)
        elif pattern == "softmax":
            emit("Softmax", [take_primary()], stream, axis=-1)
        elif pattern == "layernorm":
            scale = constant("ln_scale", lambda: np.ones(hidden, np.float32))
            shift = constant("ln_bias", lambda: np.zeros(hidden, np.float32))
            emit("LayerNormalization", [take_primary(), scale, shift], stream, axis=-1)
        elif pattern == "center":
            source = take_primary()
            # Opset 18+ takes the axes as an input.
            axes = constant("reduce_axes", lambda: np.array([1], np.int64))
            mean = emit("ReduceMean", [source, axes], [batch, 1], stream_value=False, keepdims=1)
            emit("Sub", [source, mean], stream)
        else:  # concat_project
            wide = emit("Concat", [take_primary(), take_secondary()], [batch, 2 * hidden], stream_value=False, axis=1)
            emit("MatMul", [wide, constant("w_wide", lambda: weight(2 * hidden))], stream)

    outputs = [helper.make_tensor_value_info(name, f32, stream) for name in unused]
    output_names = set(unused)
    graph = helper.make_graph(
        nodes,
        f"random_dag_{num_nodes}",
        [helper.make_tensor_value_info("x", f32, stream)],
        outputs,
        initializer=initializers,
        value_info=[vi for vi in value_info if vi.name not in output_names],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="compiler-opt-synthetic")
    model.ir_version = 10
    return model


def cached_random_dag_onnx(num_nodes: int = 100_000, seed: int = 0, cache: str | os.PathLike[str] | None = None) -> Path:
    """`random_onnx_dag(num_nodes, seed=seed)` saved under the workload cache (built once)."""
    from compiler_opt.workloads import cache_dir

    folder = Path(cache) if cache is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"random-dag-{num_nodes}-seed{seed}-v1.onnx"
    if not path.is_file():
        model = random_onnx_dag(num_nodes, seed=seed)
        tmp = path.with_name(f".{path.name}.tmp")
        onnx.save(model, str(tmp))
        os.replace(tmp, path)
        logger.info("generated %s (%d nodes)", path, num_nodes)
    return path
