"""Shared checks for the ONNX conformance and round-trip tests.

Not a test module (no `test_` prefix): the test files import it from their own folder.

- `ModelSource`: one model to check (a shipped file or an `onnx.backend` node case).
- `model_differences(original, exported)`: what a lossless export must keep, as a list of
  human-readable differences (empty when the two ModelProtos agree semantically).
- `OrtCheck`: run the original and the exported model in onnxruntime on the same inputs.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TypeProto, numpy_helper

ONNX_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
SHIPPED_FOLDERS = ("light", "simple", "pytorch-converted", "pytorch-operator")

# Tolerances for original-vs-exported outputs. Both run through the same onnxruntime kernels
# with graph optimisation off, so any real difference is an export bug; the tolerance only
# absorbs nothing-but-noise such as reduction order changes between sessions.
FLOAT_TOLERANCE = {
    np.dtype(np.float16): (1e-3, 1e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-10, 1e-12),
}


def shipped_model_paths() -> list[str]:
    paths: list[str] = []
    for folder in SHIPPED_FOLDERS:
        paths.extend(glob.glob(os.path.join(ONNX_DATA, folder, "**", "*.onnx"), recursive=True))
    return sorted(paths)


def shipped_model_id(path: str) -> str:
    return os.path.relpath(path, ONNX_DATA).removesuffix(".onnx").replace(os.sep, "/")


def original_check_failure(model: ModelProto) -> str | None:
    """Why onnx's own full checker rejects the ORIGINAL model, or None when it accepts it."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:  # noqa: BLE001 - any checker failure is a reason to exclude
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return None


# -- semantic comparison of ModelProtos ---------------------------------------------------------


def canonical_bytes(message: Any) -> bytes:
    """Deterministic bytes of `message` with empty string fields unset.

    proto2 records whether an optional string was assigned, even an empty one; producers differ
    in that (onnx.helper leaves them unset, others assign ""), and it carries no meaning.
    """
    copy = type(message)()
    copy.CopyFrom(message)
    _clear_empty_strings(copy)
    return copy.SerializeToString(deterministic=True)


def _clear_empty_strings(message: Any) -> None:
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            if field.label == field.LABEL_REPEATED:
                if not field.message_type.GetOptions().map_entry:
                    for item in value:
                        _clear_empty_strings(item)
            else:
                _clear_empty_strings(value)
        elif field.label != field.LABEL_REPEATED and field.type in (field.TYPE_STRING, field.TYPE_BYTES) and not value:
            message.ClearField(field.name)


def _type_text(proto: TypeProto) -> str:
    return canonical_bytes(proto).hex()


def _attr_key(attr: AttributeProto) -> Any:
    if attr.type == AttributeProto.GRAPH:
        return ("graph", attr.name, attr.ref_attr_name, attr.doc_string)
    if attr.type == AttributeProto.GRAPHS:
        return ("graphs", attr.name, len(attr.graphs), attr.doc_string)
    return canonical_bytes(attr)


def graph_differences(a: GraphProto, b: GraphProto, where: str) -> list[str]:
    """Differences that matter between two graphs (recursively into subgraphs)."""
    diffs: list[str] = []

    def check(label: str, left: Any, right: Any) -> None:
        if left != right:
            diffs.append(f"{where}: {label}: {left!r} != {right!r}")

    check("name", a.name, b.name)
    check("doc_string", a.doc_string, b.doc_string)
    check("input names", [v.name for v in a.input], [v.name for v in b.input])
    check("output names", [v.name for v in a.output], [v.name for v in b.output])
    for side, left, right in (("input", a.input, b.input), ("output", a.output, b.output)):
        for lv, rv in zip(left, right):
            if _type_text(lv.type) != _type_text(rv.type):
                # A subgraph output may declare no type while value_info types it: the export
                # then writes the type on the output itself, which says the same thing.
                if not (side == "output" and lv.type == TypeProto() and _type_text(rv.type) == _value_info_type(a, lv.name)):
                    diffs.append(f"{where}: {side} {lv.name!r} type: {lv.type} != {rv.type}")
            check(f"{side} {lv.name!r} doc_string", lv.doc_string, rv.doc_string)
            check(f"{side} {lv.name!r} metadata_props", _props(lv.metadata_props), _props(rv.metadata_props))
    check("initializer names", [t.name for t in a.initializer], [t.name for t in b.initializer])
    for lt, rt in zip(a.initializer, b.initializer):
        if canonical_bytes(lt) != canonical_bytes(rt):
            diffs.append(f"{where}: initializer {lt.name!r} differs (dtype/dims/bytes)")
    check(
        "sparse initializers",
        [canonical_bytes(s) for s in a.sparse_initializer],
        [canonical_bytes(s) for s in b.sparse_initializer],
    )
    check("node count", len(a.node), len(b.node))
    for index, (ln, rn) in enumerate(zip(a.node, b.node)):
        label = f"node {index} ({ln.name or ln.op_type})"
        check(f"{label} op", (ln.domain, ln.op_type, ln.overload), (rn.domain, rn.op_type, rn.overload))
        if ln.name:
            check(f"{label} name", ln.name, rn.name)
        check(f"{label} inputs", list(ln.input), list(rn.input))
        check(f"{label} outputs", list(ln.output), list(rn.output))
        check(f"{label} doc_string", ln.doc_string, rn.doc_string)
        check(f"{label} metadata_props", _props(ln.metadata_props), _props(rn.metadata_props))
        check(f"{label} attributes", [_attr_key(x) for x in ln.attribute], [_attr_key(x) for x in rn.attribute])
        for la, ra in zip(ln.attribute, rn.attribute):
            if la.type == AttributeProto.GRAPH and ra.type == AttributeProto.GRAPH:
                diffs.extend(graph_differences(la.g, ra.g, f"{where}/{label}.{la.name}"))
            elif la.type == AttributeProto.GRAPHS and ra.type == AttributeProto.GRAPHS:
                for k, (lg, rg) in enumerate(zip(la.graphs, ra.graphs)):
                    diffs.extend(graph_differences(lg, rg, f"{where}/{label}.{la.name}[{k}]"))
    # value_info is an unordered annotation: compare by name, for the names that a node defines
    # (entries for graph outputs live on the output declaration in the export).
    outputs = {v.name for v in a.output}
    defined = {name for node in a.node for name in node.output if name}
    left_info = {v.name: _type_text(v.type) for v in a.value_info if v.name in defined and v.name not in outputs}
    right_info = {v.name: _type_text(v.type) for v in b.value_info}
    dropped = sorted(set(left_info) - set(right_info))
    if dropped:
        diffs.append(f"{where}: value_info dropped for {dropped[:5]}")
    changed = sorted(n for n in left_info.keys() & right_info.keys() if left_info[n] != right_info[n])
    if changed:
        diffs.append(f"{where}: value_info types changed for {changed[:5]}")
    stray = sorted(v.name for v in a.value_info if v.name not in defined)
    if stray:
        # value_info for names that no node of this graph defines (inputs, initializers, outer
        # values) carries no information an importer could attach to a node output.
        pass
    check("metadata_props", _props(a.metadata_props), _props(b.metadata_props))
    check(
        "quantization_annotation",
        [canonical_bytes(q) for q in a.quantization_annotation],
        [canonical_bytes(q) for q in b.quantization_annotation],
    )
    return diffs


def _value_info_type(graph: GraphProto, name: str) -> str | None:
    for info in graph.value_info:
        if info.name == name:
            return _type_text(info.type)
    return None


def _props(entries: Sequence[onnx.StringStringEntryProto]) -> dict[str, str]:
    return {e.key: e.value for e in entries}


def model_differences(a: ModelProto, b: ModelProto) -> list[str]:
    """What differs between an original model and its export (empty: semantically equal)."""
    diffs: list[str] = []

    def check(label: str, left: Any, right: Any) -> None:
        if left != right:
            diffs.append(f"model: {label}: {left!r} != {right!r}")

    check("ir_version", a.ir_version, b.ir_version)
    check("opset_import", _opsets(a.opset_import), _opsets(b.opset_import))
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        check(field, getattr(a, field), getattr(b, field))
    check("metadata_props", _props(a.metadata_props), _props(b.metadata_props))
    check("training_info", len(a.training_info), len(b.training_info))
    diffs.extend(graph_differences(a.graph, b.graph, "graph"))
    check("functions", [(f.domain, f.name) for f in a.functions], [(f.domain, f.name) for f in b.functions])
    for fa, fb in zip(a.functions, b.functions):
        where = f"function {fa.domain}::{fa.name}"
        for field in ("input", "output", "attribute"):
            check(f"{where} {field}", list(getattr(fa, field)), list(getattr(fb, field)))
        check(f"{where} opset_import", _opsets(fa.opset_import), _opsets(fb.opset_import))
        check(f"{where} doc_string", fa.doc_string, fb.doc_string)
        check(
            f"{where} attribute_proto",
            [canonical_bytes(x) for x in fa.attribute_proto],
            [canonical_bytes(x) for x in fb.attribute_proto],
        )
        ga = onnx.GraphProto(node=fa.node, value_info=fa.value_info)
        gb = onnx.GraphProto(node=fb.node, value_info=fb.value_info)
        diffs.extend(graph_differences(ga, gb, where))
    return diffs


def _opsets(entries: Sequence[onnx.OperatorSetIdProto]) -> dict[str, int]:
    return {("" if e.domain == "ai.onnx" else e.domain): e.version for e in entries}


# -- onnxruntime ---------------------------------------------------------------------------------


@dataclasses.dataclass
class OrtOutcome:
    """What running a model pair in onnxruntime showed."""

    status: str  # "equal", "refused" (ORT cannot run the original), "nondeterministic"
    reason: str = ""


def ort_session(model_bytes: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def _dim_size(dim: onnx.TensorShapeProto.Dimension) -> int:
    if dim.HasField("dim_value"):
        return dim.dim_value
    return 2  # symbolic or unknown dims get a small size


def random_value(type_proto: TypeProto, rng: np.random.Generator) -> Any:
    """A seeded random input for a graph input type: floats in [-1, 1), ints in [0, 3), bools."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        elem = type_proto.tensor_type.elem_type
        shape = [_dim_size(d) for d in type_proto.tensor_type.shape.dim]
        np_dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if elem == onnx.TensorProto.STRING:
            return np.array([f"s{i}" for i in range(int(np.prod(shape)))], dtype=object).reshape(shape)
        if np_dtype == np.bool_:
            return np.asarray(rng.random(shape) < 0.5)
        if np.issubdtype(np_dtype, np.integer):
            return np.asarray(rng.integers(0, 3, size=shape), dtype=np_dtype)
        return np.asarray(rng.random(shape) * 2 - 1, dtype=np_dtype)
    if which == "sequence_type":
        return [random_value(type_proto.sequence_type.elem_type, rng) for _ in range(2)]
    if which == "optional_type":
        return random_value(type_proto.optional_type.elem_type, rng)
    raise NotImplementedError(f"no random input for type {which}")


def random_inputs(model: ModelProto, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    return {v.name: random_value(v.type, rng) for v in model.graph.input if v.name not in initializers}


def case_inputs(model: ModelProto, inputs: Sequence[Any]) -> dict[str, Any]:
    """Feed dict from an onnx node test case's own input data (TensorProtos decoded)."""
    feeds: dict[str, Any] = {}
    for info, value in zip(model.graph.input, inputs):
        if value is None:
            continue  # an absent optional input
        if isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, list):
            value = [numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in value]
        elif isinstance(value, np.generic):
            value = np.asarray(value)
        feeds[info.name] = value
    return feeds


def outputs_differ(left: Any, right: Any, where: str = "output") -> str | None:
    """Why two ORT results differ (floats within FLOAT_TOLERANCE, NaNs equal), or None."""
    if isinstance(left, list) or isinstance(right, list):
        if not (isinstance(left, list) and isinstance(right, list)) or len(left) != len(right):
            return f"{where}: sequence structure differs"
        for index, (lv, rv) in enumerate(zip(left, right)):
            reason = outputs_differ(lv, rv, f"{where}[{index}]")
            if reason:
                return reason
        return None
    if left is None or right is None:
        return None if left is right else f"{where}: one optional is empty"
    if isinstance(left, RawTensor) or isinstance(right, RawTensor):
        return None if left == right else f"{where}: raw tensors differ"
    left, right = np.asarray(left), np.asarray(right)
    if left.dtype != right.dtype or left.shape != right.shape:
        return f"{where}: {left.dtype}{left.shape} vs {right.dtype}{right.shape}"
    tolerance = FLOAT_TOLERANCE.get(left.dtype)
    if tolerance is not None or np.issubdtype(left.dtype, np.complexfloating):
        rtol, atol = tolerance or (1e-5, 1e-6)
        if not np.allclose(left, right, rtol=rtol, atol=atol, equal_nan=True):
            return f"{where}: values differ (max abs diff {np.nanmax(np.abs(left - right))})"
        return None
    if left.dtype == object:
        same = all(x == y for x, y in zip(left.ravel().tolist(), right.ravel().tolist()))
    elif left.dtype.type.__module__ != "numpy":  # bfloat16/float8 (ml_dtypes): as float32, NaNs equal
        same = np.array_equal(left.astype(np.float32), right.astype(np.float32), equal_nan=True)
    else:
        same = np.array_equal(left, right)
    return None if same else f"{where}: values differ"


@dataclasses.dataclass(frozen=True)
class RawTensor:
    """An ORT output whose element type numpy cannot hold (bfloat16, float8, int4...): its bytes."""

    type_name: str
    shape: tuple[int, ...]
    data: bytes


_ONNX_CODES = {name.lower(): code for name, code in onnx.TensorProto.DataType.items()}


def _is_native(value: Any) -> bool:
    """True when ORT's numpy bridge accepts `value` (not an ml_dtypes array such as bfloat16)."""
    if isinstance(value, list):
        return all(_is_native(v) for v in value)
    return not isinstance(value, np.ndarray) or value.dtype.type.__module__ == "numpy"


def _to_ort_value(value: Any, elem_type: int) -> Any:
    import onnxruntime as ort

    if not isinstance(value, np.ndarray):
        raise NotImplementedError(f"ORT's Python API takes sequence/optional inputs only as numpy ({type(value).__name__})")
    if value.dtype.type.__module__ == "numpy":
        return ort.OrtValue.ortvalue_from_numpy(value)
    if "int4" in value.dtype.name or "int2" in value.dtype.name or "float4" in value.dtype.name:
        raise NotImplementedError(f"ORT's Python API cannot take packed sub-byte {value.dtype.name} inputs")
    # bfloat16 and the float8 types: same bits as an unsigned int of the same width.
    carrier = {1: np.uint8, 2: np.uint16}[value.dtype.itemsize]
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(value).view(carrier), elem_type)


def _ort_value_data(value: Any) -> Any:
    import ctypes

    try:
        return value.numpy()
    except RuntimeError:
        type_name = value.data_type()  # e.g. "tensor(bfloat16)"
        code = _ONNX_CODES[type_name.removeprefix("tensor(").removesuffix(")")]
        from graph_ir.dtypes import DType

        shape = tuple(value.shape())
        nbytes = DType.from_onnx(code).nbytes(int(np.prod(shape, dtype=np.int64)))
        return RawTensor(type_name, shape, ctypes.string_at(value.data_ptr(), nbytes))


def _densify(value: Any) -> Any:
    """ORT returns sparse outputs as SparseTensor objects: make them dense arrays to compare."""
    if not hasattr(value, "dense_shape"):
        return value
    shape = tuple(value.dense_shape())
    dense = np.zeros(shape, dtype=value.values().dtype)
    indices = value.get_coo_data().indices()
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = value.values()
    else:
        dense[tuple(indices.T)] = value.values()
    return dense


def run_session(session: Any, feeds: dict[str, Any]) -> list[Any]:
    """Run a session; element types numpy lacks go through OrtValues and come back as bytes."""
    if all(_is_native(v) for v in feeds.values()):
        try:
            return [_densify(v) for v in session.run(None, feeds)]
        except RuntimeError as err:  # an output type numpy cannot hold
            if "Numpy" not in str(err) and "numpy" not in str(err):
                raise
    elem_types = {i.name: _ONNX_CODES.get(i.type.removeprefix("tensor(").removesuffix(")"), 0) for i in session.get_inputs()}
    ort_feeds = {name: _to_ort_value(value, elem_types[name]) for name, value in feeds.items()}
    return [_ort_value_data(v) for v in session.run_with_ort_values(None, ort_feeds)]


def shipped_inputs(model: ModelProto, model_path: str) -> dict[str, Any] | None:
    """The inputs of `test_data_set_0` beside a shipped model, when it has them."""
    folder = os.path.join(os.path.dirname(model_path), "test_data_set_0")
    if not os.path.isdir(folder):
        return None
    initializers = {t.name for t in model.graph.initializer}
    feeds: dict[str, Any] = {}
    for index, info in enumerate(v for v in model.graph.input if v.name not in initializers):
        path = os.path.join(folder, f"input_{index}.pb")
        with open(path, "rb") as handle:
            raw = handle.read()
        which = info.type.WhichOneof("value")
        if which == "sequence_type":
            feeds[info.name] = numpy_helper.to_list(onnx.SequenceProto.FromString(raw))
        elif which == "optional_type":
            feeds[info.name] = numpy_helper.to_optional(onnx.OptionalProto.FromString(raw))
        else:
            feeds[info.name] = numpy_helper.to_array(onnx.TensorProto.FromString(raw))
    return feeds


def compare_in_ort(
    original: ModelProto,
    exported: ModelProto,
    feeds: dict[str, Any] | None,
    fallback_feeds: dict[str, Any] | None = None,
) -> OrtOutcome:
    """Run both models on the same inputs; `feeds=None` draws seeded random inputs, and when the
    original cannot run on those, `fallback_feeds` (the model's own test data) are used.

    The original runs twice: when the two runs disagree the model is nondeterministic
    (random ops without a seed) and only output types and shapes can be compared.
    """
    try:
        session = ort_session(original.SerializeToString())
    except Exception as err:  # noqa: BLE001 - ORT's refusal is a recorded outcome
        return OrtOutcome("refused", f"session: {_first_line(err)}")
    expected_names = {i.name for i in session.get_inputs()}
    attempts: list[dict[str, Any]] = []
    if feeds is None:
        try:
            attempts.append(random_inputs(original))
        except NotImplementedError as err:
            if fallback_feeds is None:
                return OrtOutcome("refused", str(err))
        if fallback_feeds is not None:
            attempts.append(fallback_feeds)
    else:
        attempts.append(feeds)
    reason = ""
    for attempt in attempts:
        attempt = {k: v for k, v in attempt.items() if k in expected_names}
        try:
            first = run_session(session, attempt)
            second = run_session(session, attempt)
        except Exception as err:  # noqa: BLE001
            reason = f"run: {_first_line(err)}"
            continue
        break
    else:
        return OrtOutcome("refused", reason)
    exported_session = ort_session(exported.SerializeToString())  # must not fail: the original ran
    got = run_session(exported_session, attempt)
    names = [o.name for o in session.get_outputs()]
    assert names == [o.name for o in exported_session.get_outputs()], "output names differ"
    nondeterministic = any(outputs_differ(x, y) for x, y in zip(first, second))
    for name, want, have in zip(names, first, got):
        if nondeterministic:
            assert _signature(want) == _signature(have), f"output {name!r}: {_signature(want)} != {_signature(have)}"
            continue
        difference = outputs_differ(want, have, f"output {name!r}")
        assert difference is None, difference
    if nondeterministic:
        return OrtOutcome("nondeterministic", "two runs of the original disagree (unseeded random op)")
    return OrtOutcome("equal")


def _signature(value: Any) -> Any:
    if isinstance(value, list):
        return [_signature(v) for v in value]
    if isinstance(value, RawTensor):
        return (value.type_name, value.shape)
    if value is None:
        return None
    array = np.asarray(value)
    return (str(array.dtype), array.shape)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {(text[0] if text else '')[:200]}"
