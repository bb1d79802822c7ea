"""TensorFlow GraphDef (`.pb` binary, `.pbtxt` text) and SavedModel graphs -> IR.

Parsing uses TensorFlow's own protos; TensorFlow is imported lazily (it takes seconds).

Mapping:
- each NodeDef -> a Node (domain "tf", op_type = op, name = node name, kind from tf_ops); its
  outputs come from the op's OpDef (or the library function's signature) and its attrs, named
  `node:k`; the NodeDef itself stays in `node.meta["tf.node_def"]` so export is lossless;
- data inputs `x` / `x:k` -> the k-th output of node x; control inputs `^x` -> the names in
  `node.meta[CONTROL_PREDECESSORS]` (the IR's shared key). They are ordering dependencies that
  `graph.sort()` and `verify()` honour like data edges (`tf_topological_order` is that order,
  with a TF-specific message on cycles);
- v1 loops: the input of a Merge that comes from a NextIteration is a back edge; it is kept as
  the tensor name in `node.meta["tf.back_edges"][input_index]` and the input is None, so the
  dataflow is acyclic and `verify()` holds; the exporter restores it. Any other cycle is a
  CycleError. NextIteration has a side-effect kind so DCE keeps the loop body alive;
- attrs: int/float/bool/string/type/shape/lists -> plain Attrs (type -> TYPE `TensorType(dtype)`,
  shape -> TYPE `TensorType(None, shape)`, bool -> INT), tensors -> TENSOR (decoded lazily),
  func -> STRING (the function's name), function-body placeholders (`$T`) -> REF, others OPAQUE;
- the function library -> `root.functions[("tf", name, "")]`, bodies built the same way (inputs
  from input_arg, outputs from `ret`, body references `node:out_arg:i` resolved through the
  OpDef's output args). Functional control flow (While, If, Case, PartitionedCall...) refers to
  its functions by name (STRING attrs); nothing is inlined or owned as a subgraph;
- NodeDef.device -> node.device; other decisions travel as `_compiler_opt.*` attrs;
- types: dtypes from the OpDef, shapes from `_output_shapes`, the rest (option `infer_shapes`)
  from TensorFlow's shape inference over the graph imported into a `tf.Graph`. That enriches the
  import, it does not veto it: where TF refuses a graph that its own tools (grappler, the JIT)
  process -- node names starting with "_", a resource-typed loop variable, an op this build does
  not register -- the graph keeps the types the file states and one warning says what TF objected
  to (`strict=True`: an error instead);
- ops TensorFlow does not register (TPU ops on a CPU build, custom op libraries) -> opaque nodes
  (kind IO, `meta["tf.unregistered"]`): as many outputs as the graph reads (or `_output_shapes`
  lists), of unknown element type; inputs, attributes and the NodeDef are kept, so they round trip;
- graph outputs: the tensors named by `outputs=`, or else every output of every node that
  nothing consumes (data or control); a SavedModel's signatures are in `graph.meta`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr
from graph_ir.core import Node, Value
from graph_ir.errors import (
    CompilerOptError,
    CorruptModelError,
    CycleError,
    DuplicateNameError,
    EmptyModelError,
    LimitExceededError,
    ModelFormatError,
    TypeConsistencyError,
    UndefinedValueError,
    UnsupportedOpError,
)
from graph_ir.graph import Function, Graph, ModelInfo
from graph_ir.io import limits
from graph_ir.io.decisions import read_decision
from graph_ir.core import CONTROL_PREDECESSORS
from graph_ir.io._isolate import call_isolated, register
from graph_ir.io._native_log import import_tensorflow, native_stderr_to_log
from graph_ir.verify import topological_order
from graph_ir.io.tf_ops import (
    TF_DOMAIN,
    attr_from_tf,
    dtype_from_tf,
    expected_input_count,
    op_kind,
    output_layout,
    shape_from_tf,
)
from graph_ir.types import Shape, TensorType

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "load_tf",
    "read_graphdef",
    "import_graphdef",
    "tf_topological_order",
    "DECISION_ATTR_PREFIX",
    "graphdef_without_devices",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TEXT_BYTES = limits.Limits().max_text_bytes  # kept for callers; see graph_ir.io.limits
# Decisions other than the device ride in NodeDef attrs; a leading "_" makes TF ignore them.
DECISION_ATTR_PREFIX = "_compiler_opt."
_SAVED_MODEL_NAMES = ("saved_model.pb", "saved_model.pbtxt")
_MERGE_OPS = ("Merge", "RefMerge")
_NEXT_ITERATION_OPS = ("NextIteration", "RefNextIteration")


# -- reading files ---------------------------------------------------------------------------
def load_tf(
    path: str | os.PathLike[str],
    *,
    infer_shapes: bool = True,
    max_text_bytes: int | None = None,
    meta_graph: int = 0,
    outputs: Sequence[str] | None = None,
    strict: bool = False,
) -> Graph:
    """Import a `.pb`/`.pbtxt` GraphDef, a SavedModel file, or a SavedModel folder (`strict`:
    see `import_graphdef`)."""
    graph_def, extra = read_graphdef(path, max_text_bytes=max_text_bytes, meta_graph=meta_graph)
    file = os.fspath(path)
    try:
        graph = import_graphdef(graph_def, file=file, infer_shapes=infer_shapes, outputs=outputs, strict=strict)
    except CompilerOptError as err:
        raise err.with_context(file=file)
    limits.check_graph_size(graph, file=file)
    graph.model.extra.update(extra)
    if "tf.signatures" in extra:
        graph.meta["tf.signatures"] = extra["tf.signatures"]
    return graph


def read_graphdef(
    path: str | os.PathLike[str], *, max_text_bytes: int | None = None, meta_graph: int = 0
) -> tuple[Any, dict[str, Any]]:
    """Parse a file into a GraphDef; for a SavedModel also return its signatures (in `extra`).

    Sizes are checked against `graph_ir.io.limits` (`max_text_bytes` overrides its text limit)."""
    import_tensorflow()
    path = Path(path)
    file = os.fspath(path)
    if path.is_dir():
        found = [path / name for name in _SAVED_MODEL_NAMES if (path / name).is_file()]
        if not found:
            raise EmptyModelError("folder holds no saved_model.pb or saved_model.pbtxt", file=file)
        path, file = found[0], os.fspath(found[0])
    size = path.stat().st_size
    if size == 0:
        raise EmptyModelError("file is empty", file=file)
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    is_text = path.name.lower().endswith(".pbtxt")
    if is_text:
        if max_text_bytes is not None and size > max_text_bytes:
            raise LimitExceededError(
                f"text GraphDef is {size} bytes, over the {max_text_bytes}-byte limit (raise max_text_bytes, "
                "or convert it to binary .pb)", file=file, field="max_text_bytes",
            )
        limits.check_file_size(file, text=True)
        raw = path.read_bytes()
        limits.check_nesting(raw, file=file)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorruptModelError(f"not a text proto: byte {err.start} is not UTF-8", file=file) from None
        saved = _looks_like_saved_model_text(text) or path.name.lower().endswith(_SAVED_MODEL_NAMES[1])
        message = saved_model_pb2.SavedModel() if saved else graph_pb2.GraphDef()
        _parse_text(text, message, file)
    else:
        limits.check_file_size(file, text=False)
        raw = path.read_bytes()
        # SavedModel starts with field 1 as a varint (schema version); GraphDef's field 1 is a message.
        saved = path.name.lower().endswith(_SAVED_MODEL_NAMES[0]) or raw[:1] == b"\x08"
        message = saved_model_pb2.SavedModel() if saved else graph_pb2.GraphDef()
        _parse_binary(raw, message, file)
    extra: dict[str, Any] = {}
    if saved:
        if not message.meta_graphs:
            raise EmptyModelError("SavedModel holds no meta graph", file=file)
        if not 0 <= meta_graph < len(message.meta_graphs):
            raise ModelFormatError(f"meta graph {meta_graph} requested, the SavedModel holds {len(message.meta_graphs)}", file=file)
        meta = message.meta_graphs[meta_graph]
        extra["tf.saved_model_tags"] = list(meta.meta_info_def.tags)
        extra["tf.signatures"] = {
            key: {
                "inputs": {k: v.name for k, v in sig.inputs.items()},
                "outputs": {k: v.name for k, v in sig.outputs.items()},
            }
            for key, sig in meta.signature_def.items()
        }
        message = meta.graph_def
    if not message.node and not message.library.function:
        raise EmptyModelError("the GraphDef holds no nodes and no functions", file=file)
    nodes = len(message.node) + sum(len(f.node_def) for f in message.library.function)
    limits.check("max_nodes", nodes, "the GraphDef's node count", file=file)
    return message, extra


def _looks_like_saved_model_text(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped.startswith(("saved_model_schema_version", "meta_graphs"))
    return False


def _parse_text(text: str, message: Any, file: str) -> None:
    from google.protobuf import text_format

    try:
        text_format.Parse(text, message)
    except text_format.ParseError as err:
        line, column = err.GetLine(), err.GetColumn()
        where = f"line {line}, column {column}: " if line else ""
        detail = re.sub(r"^\d+:\d+ : ", "", str(err))
        raise CorruptModelError(f"{where}malformed text proto: {detail}", file=file, field=f"{line}:{column}") from None
    except ValueError as err:  # a scalar protobuf refuses to store (an integer out of its field's range)
        detail = str(err)
        raise CorruptModelError(f"malformed text proto: {detail[:200]}{'...' if len(detail) > 200 else ''}", file=file) from None


def _parse_binary(raw: bytes, message: Any, file: str) -> None:
    from google.protobuf.message import DecodeError

    try:
        message.ParseFromString(raw)
    except DecodeError as err:
        raise CorruptModelError(f"not a valid binary {message.DESCRIPTOR.name} (truncated or corrupt): {err}", file=file) from None
    from google.protobuf.unknown_fields import UnknownFieldSet

    if len(UnknownFieldSet(message)):
        # Random bytes that happen to decode land in unknown fields; a real GraphDef has none.
        raise CorruptModelError(f"bytes decode only as unknown fields: not a {message.DESCRIPTOR.name}", file=file)


# -- GraphDef -> IR ----------------------------------------------------------------------------
def import_graphdef(
    graph_def: Any,
    *,
    file: str | None = None,
    infer_shapes: bool = True,
    outputs: Sequence[str] | None = None,
    strict: bool = False,
) -> Graph:
    """Convert a parsed GraphDef (see the module doc for the mapping).

    TensorFlow's own importer enriches the graph with inferred types; it does not veto it.
    Where it refuses the graph (node names it does not accept, a resource-typed loop variable,
    an op this build does not register) the graph keeps the types the file states, unregistered
    ops become opaque nodes, and one warning says what TensorFlow objected to (also kept in
    `graph.meta["tf.import_warning"]`). `strict=True` turns those objections into errors.
    """
    import_tensorflow()
    with gc_paused():
        importer = _Importer(graph_def, file, strict=strict)
        graph = importer.run(outputs)
    objections = []
    if importer.unregistered:
        import tensorflow as tf

        listed = ", ".join(f"{op} (node {node!r})" for op, node in sorted(importer.unregistered.items()))
        objections.append(
            f"ops not registered in TensorFlow {tf.__version__}, kept as opaque nodes with unknown output types: {listed}"
        )
    if importer.tf_hazards:
        # TensorFlow's importer can hang on such a node (N = 2**31 - 1) or abort the process (a Const whose value is
        # not of its dtype): do not hand it the graph.
        objections.append("nodes disagree with their op definition, so TensorFlow's shape inference was skipped: "
                          + "; ".join(importer.tf_hazards[:3]))
    elif infer_shapes:
        objection = _infer_shapes(graph, graph_def, file, strict=strict)
        if objection:
            objections.append(f"{objection}; types are those the file states")
    if objections:
        message = "; ".join(objections)
        graph.meta["tf.import_warning"] = message
        logger.warning("%s: %s", file or "<GraphDef>", message)
    return graph


# TensorFlow's largest tensor rank (`TensorShape::MaxDimensions`), and the attrs that count or index dimensions, which
# its shape functions do arithmetic with.
TF_MAX_RANK = 254
RANK_ATTRS = ("batch_dims", "axis", "squeeze_dims", "num_lower", "num_upper", "seq_dim", "batch_dim")


def _type_name(dtype: int) -> str:
    """A DataType enum value's name, or the number where the enum has none."""
    from tensorflow.core.framework import types_pb2

    try:
        return types_pb2.DataType.Name(dtype)
    except ValueError:
        return f"DataType {dtype}"


@lru_cache(maxsize=None)
def _registered_op(op: str) -> Any | None:
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)


class _Importer:
    def __init__(self, graph_def: Any, file: str | None, *, strict: bool = False) -> None:
        self.graph_def = graph_def
        self.file = file
        self.strict = strict
        self.unregistered: dict[str, str] = {}  # op -> first node using it
        self.tf_hazards: list[str] = []  # nodes TensorFlow's importer must not see: inputs against the OpDef, mistyped Consts
        self.library = {f.signature.name: f for f in graph_def.library.function}
        # node name -> output arg -> index of its first tensor, for the body being built
        self.arg_offsets: dict[str, dict[str, int]] = {}

    def check_arity(self, node_def: Any, op_def: Any) -> None:
        expected = expected_input_count(op_def, node_def.attr)
        actual = sum(1 for text in node_def.input if not text.startswith("^"))
        if expected is not None and expected != actual:
            self.hazard(f"node {node_def.name!r} ({node_def.op}) has {actual} data inputs, its attrs say {expected}", node_def, "input")

    def hazard(self, message: str, node_def: Any, field: str, error: type[CompilerOptError] = ModelFormatError) -> None:
        """A node TensorFlow's importer must not see: `error` under `strict`, else TF's shape inference is skipped."""
        if self.strict:
            raise error(message, file=self.file, node=node_def.name, field=field)
        self.tf_hazards.append(message)

    def check_rank_attrs(self, node_def: Any) -> None:
        """Attrs that count or index tensor dimensions (`RANK_ATTRS`) beyond any rank TensorFlow allows
        (`TF_MAX_RANK`): its shape functions do rank arithmetic with them and abort the process on the result (a
        GatherV2 with batch_dims = 2**31 - 1, found by fuzzing)."""
        for name in RANK_ATTRS:
            if name not in node_def.attr:
                continue
            value = node_def.attr[name]
            numbers = list(value.list.i) if value.HasField("list") else [value.i] if value.WhichOneof("value") == "i" else []
            bad = next((n for n in numbers if abs(n) > TF_MAX_RANK), None)
            if bad is None:
                continue
            self.hazard(f"node {node_def.name!r} ({node_def.op}) has {name} = {bad}, beyond any tensor rank ({TF_MAX_RANK})", node_def, f"attr.{name}")

    def check_const_type(self, node_def: Any) -> None:
        """A constant whose value tensor is not of its `dtype` attr: TensorFlow's shape functions read the tensor as the
        type they expect and abort the process (a CHECK-failure: ConcatV2's axis held as int16, found by fuzzing)."""
        if node_def.op not in ("Const", "HostConst") or "value" not in node_def.attr or "dtype" not in node_def.attr:
            return
        stated, held = node_def.attr["dtype"].type, node_def.attr["value"].tensor.dtype
        if stated == held:
            return
        self.hazard(f"node {node_def.name!r} ({node_def.op}) holds a {_type_name(held)} value but its dtype is {_type_name(stated)}", node_def,
                    "attr.value.tensor.dtype", CorruptModelError)

    def run(self, outputs: Sequence[str] | None) -> Graph:
        graph_def = self.graph_def
        root = Graph("main")
        self.body(root, graph_def.node, {}, in_function=False)
        if outputs is not None:
            for name in outputs:
                root.add_output(self.resolve(name, root, {}, None, -1, in_function=False))
        else:
            _add_sink_outputs(root)
            root.meta["tf.outputs_inferred"] = True
        for fdef in graph_def.library.function:
            function = self.function(fdef)
            root.functions[function.id] = function
        shell = type(graph_def.library)()
        for field, value in graph_def.library.ListFields():
            if field.name != "function":  # gradients (and anything newer) stay verbatim
                getattr(shell, field.name).extend(value)
        versions = type(graph_def.versions)()
        versions.CopyFrom(graph_def.versions)
        root.opset_imports = {TF_DOMAIN: graph_def.versions.producer}
        root.model = ModelInfo(
            source_format="tf_graphdef",
            source_path=self.file,
            producer_version=str(graph_def.versions.producer),
            extra={"tf.versions": versions, "tf.library_shell": shell},
        )
        return root

    def signature(self, node_def: Any) -> tuple[Any | None, bool]:
        """(OpDef or function signature, is a library function); None for an op this build of
        TensorFlow does not register (a TPU op on a CPU build, a custom op library)."""
        function = self.library.get(node_def.op)
        if function is not None:
            return function.signature, True
        op_def = _registered_op(node_def.op)
        if op_def is None:
            if self.strict:
                import tensorflow as tf

                raise UnsupportedOpError(
                    f"op {node_def.op!r} is neither registered in TensorFlow {tf.__version__} nor a function of the "
                    "graph's library", file=self.file, node=node_def.name, field="op",
                )
            self.unregistered.setdefault(node_def.op, node_def.name)
        return op_def, False

    def body(self, graph: Graph, node_defs: Iterable[Any], args: dict[str, Value], *, in_function: bool) -> None:
        entries: list[tuple[Any, Node]] = []
        self.arg_offsets = {}
        node_defs = list(node_defs)
        references = _referenced_output_args(node_defs) if in_function else {}
        opaque_counts: dict[str, int] | None = None
        for node_def in node_defs:
            if graph.find_node(node_def.name) is not None:
                raise DuplicateNameError(f"two nodes are named {node_def.name!r}", file=self.file, node=node_def.name)
            signature, is_function = self.signature(node_def)
            if signature is None:
                # An unregistered op: an opaque node whose outputs are what the graph reads of
                # it (or what `_output_shapes` lists), of unknown element type.
                if opaque_counts is None:
                    opaque_counts = _referenced_outputs(node_defs, in_function=in_function)
                try:
                    layout = _opaque_layout(node_def, opaque_counts, references, in_function=in_function)
                except CompilerOptError as err:
                    raise err.with_context(file=self.file, node=node_def.name)
                guessed_layout = layout
            else:
                try:
                    layout = output_layout(signature, node_def.attr)
                except CompilerOptError as err:
                    raise err.with_context(file=self.file, node=node_def.name)
                if not is_function:
                    self.check_arity(node_def, signature)
                    self.check_const_type(node_def)
                    self.check_rank_attrs(node_def)
                if layout is None:
                    # a count set by a placeholder attr: trust the body's references
                    seen = references.get(node_def.name, {})
                    layout = [(arg.name, [0] * (seen.get(arg.name, -1) + 1)) for arg in signature.output_arg]
                    guessed_layout = layout
                else:
                    guessed_layout = None
            offsets, flat = {}, []
            for arg_name, dtypes in layout:
                offsets[arg_name] = len(flat)
                flat.extend(dtypes)
            self.arg_offsets[node_def.name] = offsets
            try:
                shapes = _output_shapes(node_def, len(flat))
            except CompilerOptError as err:
                raise err.with_context(file=self.file, node=node_def.name, field="attr._output_shapes")
            values = []
            for index, code in enumerate(flat):
                dtype, is_ref = dtype_from_tf(code)
                value = Value(f"{node_def.name}:{index}", TensorType(dtype, shapes[index]))
                if is_ref:
                    value.meta["tf.ref"] = True
                values.append(value)
            # An unknown op may have side effects: stateful (IO) so that DCE keeps it.
            stateful = signature is None or bool(getattr(signature, "is_stateful", False))
            kind = op_kind(node_def.op, is_stateful=stateful, is_function=is_function)
            node = Node(node_def.op, (), outputs=values, domain=TF_DOMAIN, name=node_def.name, kind=kind)
            graph.append(node)
            if signature is None:
                node.meta["tf.unregistered"] = True
            if node_def.device:
                node.device = node_def.device
            node.meta["tf.node_def"] = node_def
            if guessed_layout is not None:
                node.meta["tf.output_args"] = guessed_layout
            _set_attrs(node, node_def)
            entries.append((node_def, node))
        for node_def, node in entries:
            inputs: list[Value | None] = []
            control: list[str] = []
            back_edges: dict[int, str] = {}
            for position, text in enumerate(node_def.input):
                if text.startswith("^"):
                    control.append(text[1:])
                    if graph.find_node(text[1:]) is None:
                        raise UndefinedValueError(
                            f"control input {text!r} names a node that does not exist", file=self.file,
                            node=node_def.name, field=f"input[{position}]",
                        )
                    continue
                value = self.resolve(text, graph, args, node_def, position, in_function=in_function)
                if node_def.op in _MERGE_OPS and value.producer is not None and value.producer.op_type in _NEXT_ITERATION_OPS:
                    back_edges[len(inputs)] = text
                    value = None
                inputs.append(value)
            node.replace_inputs(inputs)
            if control:
                node.meta[CONTROL_PREDECESSORS] = control
            if back_edges:
                node.meta["tf.back_edges"] = back_edges
        graph.reorder(tf_topological_order(graph))

    def resolve(self, text: str, graph: Graph, args: dict[str, Value], node_def: Any, position: int, *, in_function: bool) -> Value:
        """A data input string -> the Value it names."""
        where = node_def.name if node_def is not None else None
        parts = text.split(":")

        def missing(why: str) -> UndefinedValueError:
            return UndefinedValueError(f"input {text!r} {why}", file=self.file, node=where, field=f"input[{position}]" if position >= 0 else None)

        name = parts[0]
        if in_function and name in args:
            if len(parts) > 1 and parts[-1] != "0":
                raise missing("indexes into a function argument (list arguments are not supported)")
            return args[name]
        producer = graph.find_node(name)
        if producer is None:
            raise missing("names a node that does not exist")
        try:
            if in_function and len(parts) >= 2 and not parts[1].isdigit():
                offsets = self.arg_offsets.get(name, {})
                if parts[1] not in offsets:
                    raise missing(f"names output arg {parts[1]!r}, which op {producer.op_type} does not have")
                index = offsets[parts[1]] + (int(parts[2]) if len(parts) > 2 else 0)
            else:
                index = int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            raise missing("is not of the form name[:index]") from None
        if not 0 <= index < len(producer.outputs):
            raise missing(f"asks for output {index}, node {name!r} has {len(producer.outputs)}")
        return producer.outputs[index]

    def function(self, fdef: Any) -> Function:
        signature = fdef.signature
        graph = Graph(signature.name)
        args: dict[str, Value] = {}
        for field in ("input_arg", "output_arg"):
            seen: set[str] = set()
            for arg in getattr(signature, field):
                if arg.name in seen:
                    raise DuplicateNameError(f"in function {signature.name!r}: two {field}s are named {arg.name!r}", file=self.file,
                                             field=f"signature.{field}")
                seen.add(arg.name)
        for arg in signature.input_arg:
            code = arg.type or _function_attr_type(fdef, arg.type_attr)
            dtype, is_ref = dtype_from_tf(code)
            value = graph.add_input(Value(arg.name, TensorType(dtype)))
            if is_ref or arg.is_ref:
                value.meta["tf.ref"] = True
            args[arg.name] = value
        try:
            self.body(graph, fdef.node_def, args, in_function=True)
            for arg in signature.output_arg:
                if arg.name not in fdef.ret:
                    raise UndefinedValueError(f"output arg {arg.name!r} has no ret entry", file=self.file, field=arg.name)
                graph.add_output(self.resolve(fdef.ret[arg.name], graph, args, None, -1, in_function=True))
        except CompilerOptError as err:
            err.message = f"in function {signature.name!r}: {err.message}"
            raise
        shell = type(fdef)()
        shell.CopyFrom(fdef)
        del shell.node_def[:]
        shell.ClearField("ret")
        graph.meta["tf.function_def"] = shell
        return Function(TF_DOMAIN, signature.name, graph, attributes=[a.name for a in signature.attr])


def _function_attr_type(fdef: Any, attr_name: str) -> int:
    value = fdef.attr.get(attr_name) if attr_name else None
    return value.type if value is not None and value.WhichOneof("value") == "type" else 0


def _referenced_output_args(node_defs: list[Any]) -> dict[str, dict[str, int]]:
    """node -> output arg -> highest index the function body references."""
    seen: dict[str, dict[str, int]] = {}
    for node_def in node_defs:
        for text in node_def.input:
            parts = text.split(":")
            if len(parts) == 3 and parts[2].isascii() and parts[2].isdigit():  # '²' is a digit to isdigit, not to int()
                per_node = seen.setdefault(parts[0], {})
                per_node[parts[1]] = max(per_node.get(parts[1], -1), int(parts[2]))
    return seen


def _referenced_outputs(node_defs: list[Any], *, in_function: bool) -> dict[str, int]:
    """node -> how many outputs the other nodes read of it (highest `x:k` index + 1)."""
    counts: dict[str, int] = {}
    for node_def in node_defs:
        for text in node_def.input:
            if text.startswith("^"):
                continue
            parts = text.split(":")
            if in_function and len(parts) == 3:
                continue  # `node:out_arg:i`: counted per output arg by _referenced_output_args
            index = int(parts[1]) if len(parts) == 2 and parts[1].isascii() and parts[1].isdigit() else 0
            counts[parts[0]] = max(counts.get(parts[0], 0), index + 1)
    return counts


def _opaque_layout(
    node_def: Any, counts: dict[str, int], references: dict[str, dict[str, int]], *, in_function: bool
) -> list[tuple[str, list[int]]]:
    """Output args of an unregistered op, guessed from how the graph uses it. The output count
    comes from the file's `node:k` references, so it is checked against `max_node_arity` before
    a list of that length is made (`Add:z:9223372036854775807` once asked for 2**63 outputs)."""
    shapes = node_def.attr.get("_output_shapes")
    listed = len(shapes.list.shape) if shapes is not None else 0
    if in_function and node_def.name in references:
        arity = {arg: index + 1 for arg, index in references[node_def.name].items()}
    else:
        arity = {"output": max(listed, counts.get(node_def.name, 0))}
    for arg, count in arity.items():
        limits.check("max_node_arity", count, f"the outputs of unregistered op {node_def.op!r} the graph reads (output arg {arg!r})", node=node_def.name)
    return [(arg, [0] * count) for arg, count in arity.items()]


def _add_sink_outputs(graph: Graph) -> None:
    controlled = {name for node in graph for name in node.meta.get(CONTROL_PREDECESSORS, ())}
    back = {text.split(":")[0] for node in graph for text in node.meta.get("tf.back_edges", {}).values()}
    for node in graph:
        if node.name in controlled or node.name in back:
            continue
        if not any(value.has_uses() for value in node.outputs):
            for value in node.outputs:
                graph.add_output(value)


def _output_shapes(node_def: Any, count: int) -> list[Shape | None]:
    attr = node_def.attr.get("_output_shapes")
    if attr is None or len(attr.list.shape) != count:
        return [None] * count
    return [shape_from_tf(s) for s in attr.list.shape]


# -- attributes --------------------------------------------------------------------------------
def _set_attrs(node: Node, node_def: Any) -> None:
    imported: dict[str, Attr] = {}
    for name, value in node_def.attr.items():
        if name.startswith(DECISION_ATTR_PREFIX):
            read_decision(node, name[1:], value.s.decode("utf-8", "replace"))
            continue
        try:
            attr = attr_from_tf(name, value)
        except CompilerOptError as err:
            raise err.with_context(node=node.name, field=f"attr.{name}")
        node.set_attr(attr)
        imported[name] = attr
    # The exporter writes an attr from the kept AttrValue while the IR still holds this object.
    node.meta["tf.attrs"] = imported


# -- shape inference ---------------------------------------------------------------------------
_TF_NODE_IN_MESSAGE = re.compile(r"\{\{node ([^}]+)\}\}|node '?([\w/.\-]+)'?", re.IGNORECASE)


_TYPE_PROBLEM = re.compile(r"[Ss]hape|[Dd]imension|rank|type|DT_|incompatible with expected")


def _missing_shapes(graph: Graph) -> bool:
    return any(isinstance(v.type, TensorType) and v.type.shape is None for node in graph for v in node.outputs)


def graphdef_without_devices(graph_def: Any) -> Any:
    """A copy with every node's device cleared: devices do not change shapes, and TensorFlow's
    importer refuses a device string it cannot parse (a bare "1" in TensorBoard's demo graph),
    which would cost the whole graph its inferred shapes."""
    if not any(node.device for node in graph_def.node) and not any(
        node.device for function in graph_def.library.function for node in function.node_def
    ):
        return graph_def
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    for node in copy.node:
        node.ClearField("device")
    for function in copy.library.function:
        for node in function.node_def:
            node.ClearField("device")
    return copy


def _infer_shapes(graph: Graph, graph_def: Any, file: str | None, *, strict: bool = False) -> str | None:
    """Fill unknown output types from TensorFlow's shape inference (the graph imported into a
    tf.Graph); function bodies get what their signatures allow. Returns what TensorFlow objected
    to when it refuses the main graph, crashes or hangs on it (raised instead under `strict`).

    TensorFlow's shape functions CHECK-fail (abort the process) on some malformed graphs the
    importer's own checks do not foresee, so inference runs in the forked helper
    (`graph_ir.io._isolate`) and only the types come back."""
    library = {f.signature.name for f in graph_def.library.function}
    functions = sorted(f.name for f in graph.functions.values() if f.name in library and _missing_shapes(f.graph))
    main = _missing_shapes(graph)
    if not main and not functions:
        return None
    request = json.dumps({"main": main, "functions": functions}).encode()
    serialized = graphdef_without_devices(graph_def).SerializeToString()
    try:
        with native_stderr_to_log(logger):  # in process (COMPILER_OPT_NATIVE_IN_PROCESS=1), TF logs to fd 2
            reply = call_isolated("tf_shapes", _REQUEST_SIZE.pack(len(request)) + request + serialized,
                                  what="TensorFlow's shape inference", timeout_s=60.0 + 30.0 * len(serialized) / 2**20, file=file)
    except CorruptModelError as err:  # a crash or a hang: the file's own types stand
        if strict:
            raise
        return err.message.replace(" on this input", "")
    answer = json.loads(reply)
    refusal = answer["refusal"]
    if refusal is not None:
        message = refusal.strip().splitlines()[0] if refusal.strip() else answer["refusal_type"]
        if strict:
            match = _TF_NODE_IN_MESSAGE.search(refusal)
            node = next((g for g in match.groups() if g), None) if match else None
            # Shape and dtype conflicts are type errors; anything else (names...) a format error.
            error = TypeConsistencyError if _TYPE_PROBLEM.search(message) else ModelFormatError
            raise error(f"TensorFlow rejects the graph: {message}", file=file, node=node) from None
        refusal = f"TensorFlow's importer refused the graph ({message})"
    elif answer["main"] is not None:
        _copy_types(graph, answer["main"])
    for function in graph.functions.values():
        if function.name in answer["functions"]:
            _copy_types(function.graph, answer["functions"][function.name])
    for name, err in answer["function_errors"].items():  # polymorphic bodies may not instantiate alone; types stay as read
        logger.debug("%s: no shape inference for function %s: %s", file, name, err)
    return refusal


_REQUEST_SIZE = struct.Struct("<I")


def _output_types(operations: Iterable[Any]) -> dict[str, list[tuple[int, list[int | None] | None]]]:
    """Op name -> (DataType enum, dims or None) per output, as TensorFlow inferred them."""
    return {op.name: [(t.dtype.as_datatype_enum, t.shape.as_list() if t.shape.rank is not None else None) for t in op.outputs]
            for op in operations}


def _tf_shapes_in_helper(payload: bytes) -> bytes:
    """The helper's side of `_infer_shapes`: a JSON request and a serialized GraphDef in, the
    inferred output types (or TensorFlow's refusal) out as JSON."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

    (size,) = _REQUEST_SIZE.unpack_from(payload)
    request = json.loads(payload[_REQUEST_SIZE.size : _REQUEST_SIZE.size + size])
    graph_def = graph_pb2.GraphDef.FromString(payload[_REQUEST_SIZE.size + size :])
    answer: dict[str, Any] = {"refusal": None, "refusal_type": None, "main": None, "functions": {}, "function_errors": {}}
    tf_graph = tf.Graph()
    if request["main"]:
        try:
            with tf_graph.as_default():
                tf.graph_util.import_graph_def(graph_def, name="")
        except (ValueError, TypeError, KeyError, tf.errors.OpError) as err:
            answer["refusal"], answer["refusal_type"] = str(err), type(err).__name__
        else:
            answer["main"] = _output_types(tf_graph.get_operations())
    library = {f.signature.name: f for f in graph_def.library.function}
    for name in request["functions"]:
        try:
            with tf_graph.as_default():
                func_graph = function_def_to_graph(library[name])
        except Exception as err:  # noqa: BLE001 - reported back, logged at debug level
            answer["function_errors"][name] = str(err)
            continue
        answer["functions"][name] = _output_types(func_graph.get_operations())
    return json.dumps(answer).encode()


register("tf_shapes", _tf_shapes_in_helper)


def _copy_types(graph: Graph, inferred: dict[str, list[Any]]) -> None:
    for name, outputs in inferred.items():
        node = graph.find_node(name)
        if node is None or len(node.outputs) != len(outputs):
            continue
        for value, (tf_dtype, dims) in zip(node.outputs, outputs):
            current = value.type
            if not isinstance(current, TensorType) or current.shape is not None:
                continue
            dtype = current.dtype
            if dtype is None:
                dtype, _ = dtype_from_tf(tf_dtype)
            value.type = TensorType(dtype, Shape(dims) if dims is not None else None)


# -- ordering ----------------------------------------------------------------------------------
def tf_topological_order(graph: Graph) -> list[Node]:
    """Nodes ordered by data and control edges (back edges excluded), close to the current order;
    the IR's own order with TF's explanation on a cycle."""
    try:
        return topological_order(graph)
    except CycleError as err:
        raise CycleError(
            err.message.replace("has a cycle", "has a cycle that is not a v1 loop back edge (NextIteration -> Merge)"),
            node=err.node,
        ) from None

