"""The one place that touches XLA's own HLO tooling (jaxlib) and its proto schema.

- Text -> `HloModule` uses XLA's parser shipped in jaxlib (`jaxlib._hlo.hlo_module_from_text`).
- The `HloModuleProto` schema comes from the `hlo.proto` descriptors that the TensorFlow wheel
  ships (`tensorflow/compiler/xla/service/hlo_pb2.py`), loaded into a private descriptor pool
  WITHOUT importing TensorFlow (which takes seconds): we read the serialized descriptors out of
  those generated files.
- Shapes are verified by converting the module to StableHLO (`hlo_to_stablehlo`) and running
  the MLIR verifier, because XLA's text parser alone accepts wrong result shapes.

A jaxlib or TensorFlow upgrade that moves any of this breaks only this module.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from graph_ir.io._isolate import call_isolated, register
from graph_ir.io._native_log import native_stderr_to_log
from graph_ir.errors import CompilerOptError, CorruptModelError, ModelFormatError, TypeConsistencyError

__all__ = [
    "hlo_cost_analysis",
    "HloSyntaxError",
    "hlo_module_proto_class",
    "parse_hlo_text",
    "hlo_proto_to_text",
    "verify_with_stablehlo",
    "primitive_type_name",
    "mlir_context",
    "hlo_to_stablehlo_bytecode",
    "cpu_devices",
    "compile_hlo_module",
    "run_hlo_module",
]


logger = logging.getLogger(__name__)


class HloSyntaxError(CorruptModelError):
    """XLA's (or MLIR's) parser rejected the text; `line` and `column` locate the fault."""


_SCHEMA_FILES = (
    "compiler/xla/xla_data_pb2.py",
    "compiler/xla/service/metrics_pb2.py",
    "compiler/xla/service/hlo_pb2.py",
)


def _serialized_descriptor(path: str) -> bytes:
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return ast.literal_eval(node.args[0])
    raise ModelFormatError(f"no serialized descriptor found in {path}")


@cache
def hlo_module_proto_class() -> type:
    """The `xla.HloModuleProto` message class, built from TensorFlow's shipped descriptors."""
    from google.protobuf import any_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

    spec = importlib.util.find_spec("tensorflow")
    if spec is None or spec.origin is None:
        raise ModelFormatError(
            "reading HLO needs the XLA proto schema that ships with TensorFlow: pip install 'compiler-opt[tf,jax]'"
        )
    root = os.path.dirname(spec.origin)
    pool = descriptor_pool.DescriptorPool()
    for module in (any_pb2, duration_pb2, timestamp_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    for relative in _SCHEMA_FILES:
        pool.AddSerializedFile(_serialized_descriptor(os.path.join(root, relative)))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xla.HloModuleProto"))


@cache
def _primitive_types() -> dict[int, str]:
    enum = hlo_module_proto_class().DESCRIPTOR.file.pool.FindEnumTypeByName("xla.PrimitiveType")
    return {value.number: value.name for value in enum.values}


def primitive_type_name(number: int) -> str:
    return _primitive_types().get(number, f"UNKNOWN_{number}")


def _hlo_lib() -> Any:
    try:
        from jaxlib import _hlo
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ModelFormatError("reading HLO text needs jaxlib: pip install 'compiler-opt[jax]'") from err
    return _hlo


_POSITION = re.compile(r"(?:was parsing |^)(\d+):(\d+): error: (.*)", re.MULTILINE)


def parse_hlo_text(text: str, *, file: str | None = None, line_offset: int = 0) -> Any:
    """Parse one HLO module with XLA's parser; return its `HloModuleProto` message."""
    _hlo_lib()
    try:
        with native_stderr_to_log(logger):
            # XLA's parser CHECK-fails (aborts) on some malformed text: it runs in the helper.
            serialized = call_isolated("hlo_parse", text.encode("utf-8"), what="XLA's HLO parser",
                                       timeout_s=native_timeout(len(text)), file=file)
    except CompilerOptError:
        raise
    except Exception as err:  # jaxlib raises its own runtime error type
        message = str(err)
        match = _POSITION.search(message)
        if match:
            line, column, what = int(match.group(1)) + line_offset, int(match.group(2)), match.group(3)
            raise HloSyntaxError(what.strip(), line=line, column=column, file=file) from None
        first = message.splitlines()[0] if message else type(err).__name__
        raise HloSyntaxError(first.replace("INVALID_ARGUMENT: ", ""), file=file) from None
    return hlo_module_proto_class().FromString(serialized)


def native_timeout(size: int) -> float:
    """Seconds a native parse or conversion of `size` bytes may take in its child."""
    return 120.0 + 30.0 * size / 2**20


def hlo_proto_to_text(proto: Any, *, elided: frozenset[str] | set[str] = frozenset()) -> str:
    """Print an `HloModuleProto` as HLO text with XLA's own printer, every constant in full
    (XLA's default prints `{...}` for large ones, which would lose data) except the instructions
    named in `elided`, whose data the source had left out and which stay `{...}`."""
    hlo = _hlo_lib()
    module = hlo.HloModule.from_serialized_hlo_module_proto(proto.SerializeToString())
    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    text = module.to_string(options)
    return _elide_constants(text, elided) if elided else text


def _elide_constants(text: str, names: set[str] | frozenset[str]) -> str:
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        match = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?\bconstant\(", line)
        if not match or match.group(1) not in names:
            continue
        start = match.end()
        depth, end = 0, start
        for end in range(start, len(line)):  # the literal: balanced braces up to the closing ')'
            char = line[end]
            if char in "{(":
                depth += 1
            elif char in "})":
                if depth == 0:
                    break
                depth -= 1
        lines[index] = line[:start] + "{...}" + line[end:]
    return "".join(lines)


# MLIR verifier messages that mean "the types do not fit the op", as opposed to an HLO construct
# the StableHLO converter does not support (which we do not treat as the user's error).
_TYPE_ERROR = re.compile(r"op (requires|inferred|expects|failed to verify|operand|result)|incompatible|mismatch", re.I)
_LOCATION = re.compile(r'error: "([^"]+)"')


def verify_with_stablehlo(proto: Any, *, file: str | None = None) -> bool:
    """Raise TypeConsistencyError when MLIR's verifier rejects the module's shapes.

    Returns False when the module could not be converted (an unsupported construct): the caller
    then relies on the parser's own checks alone.
    """
    try:
        from jaxlib.mlir import ir
    except ImportError:  # pragma: no cover
        return False
    _check_convertible(proto, file)
    try:
        bytecode = hlo_to_stablehlo_bytecode(proto)
    except Exception:
        return False
    context = mlir_context()
    try:
        with context:
            ir.Module.parse(bytecode)
    except Exception as err:
        message = str(err)
        if not _TYPE_ERROR.search(message):
            return False
        where = _LOCATION.search(message)
        detail = next((line.strip() for line in message.splitlines() if "op " in line and "error" in line), message)
        detail = detail.split(": ", 2)[-1] if ": " in detail else detail
        raise TypeConsistencyError(f"shape mismatch: {detail}", file=file, node=where.group(1) if where else None) from None
    return True


def _check_convertible(proto: Any, file: str | None) -> None:
    """What XLA's HLO -> MLIR importer assumes without checking (it aborts or segfaults)."""
    _check_tuple_indices(proto, file)
    _check_entry_layout(proto, file)


def _check_entry_layout(proto: Any, file: str | None) -> None:
    """XLA's HLO -> MLIR importer CHECK-fails (aborts the process) when the module's
    entry_computation_layout disagrees with the ENTRY computation's parameters, which XLA's text
    parser lets through: refuse that here (found by fuzzing)."""
    from graph_ir.errors import ModelFormatError

    if not proto.HasField("host_program_shape"):
        return
    entry = next((c for c in proto.computations if c.id == proto.entry_computation_id), None)
    if entry is None:
        return
    params = sorted((i for i in entry.instructions if i.opcode == "parameter"), key=lambda i: i.parameter_number)
    layout = proto.host_program_shape.parameters
    if len(layout) != len(params):
        raise ModelFormatError(
            f"entry_computation_layout lists {len(layout)} parameters, the ENTRY computation has {len(params)}",
            file=file, node=entry.name, field="entry_computation_layout",
        )
    for instruction, shape in zip(params, layout):
        if (instruction.shape.element_type, list(instruction.shape.dimensions)) != (shape.element_type, list(shape.dimensions)):
            raise ModelFormatError(
                f"entry_computation_layout's parameter {instruction.parameter_number} does not match the shape of "
                f"parameter {instruction.name!r}", file=file, node=instruction.name, field="entry_computation_layout",
            )
    result = proto.host_program_shape.result
    root = next((i for i in entry.instructions if i.id == entry.root_id), None)
    if root is not None and (root.shape.element_type, list(root.shape.dimensions)) != (result.element_type, list(result.dimensions)):
        raise ModelFormatError(
            "entry_computation_layout's result does not match the ENTRY computation's root", file=file,
            node=root.name, field="entry_computation_layout",
        )


def _check_tuple_indices(proto: Any, file: str | None) -> None:
    """get-tuple-element's index must name an element: XLA's parser lets `index=-7` through and
    its HLO -> MLIR importer then segfaults (found by fuzzing)."""
    from graph_ir.errors import ModelFormatError

    for computation in proto.computations:
        by_id = {i.id: i for i in computation.instructions}
        for instruction in computation.instructions:
            if instruction.opcode != "get-tuple-element" or not instruction.operand_ids:
                continue
            operand = by_id.get(instruction.operand_ids[0])
            count = len(operand.shape.tuple_shapes) if operand is not None else None
            if count is not None and not 0 <= instruction.tuple_index < count:
                raise ModelFormatError(
                    f"get-tuple-element index {instruction.tuple_index} is outside the {count}-element tuple",
                    file=file, node=instruction.name, field="index",
                )


def mlir_context() -> Any:
    """A fresh MLIR context with the dialects JAX uses (func, stablehlo, chlo, mhlo, sdy...).

    Unregistered dialects stay disallowed, so an unknown dialect is a parse error.
    """
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext
    from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo

    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    context = ir.Context()
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    stablehlo.register_dialect(context)
    chlo.register_dialect(context)
    mhlo.register_mhlo_dialect(context)
    sdy.register_dialect(context)
    return context


def hlo_to_stablehlo_bytecode(proto: Any) -> bytes:
    """XLA's HLO -> StableHLO converter (MLIR bytecode) for an `HloModuleProto`."""
    _check_convertible(proto, None)
    serialized = proto.SerializeToString()
    # The converter CHECK-fails or segfaults on some modules the parser accepted: in the helper.
    return call_isolated("hlo_to_stablehlo", serialized, what="XLA's HLO -> StableHLO converter",
                         timeout_s=native_timeout(len(serialized)))


def _parse_hlo_bytes(text: bytes) -> bytes:
    return _hlo_lib().hlo_module_from_text(text.decode("utf-8")).as_serialized_hlo_module_proto()


def _hlo_to_stablehlo_bytes(serialized: bytes) -> bytes:
    from jaxlib import _jax

    return bytes(_jax.mlir.hlo_to_stablehlo(serialized))


register("hlo_parse", _parse_hlo_bytes)
register("hlo_to_stablehlo", _hlo_to_stablehlo_bytes)


# Compiling and running: JAX keeps these entry points private (`jax._src`), so they live here only.
def cpu_devices() -> list[Any]:
    """XLA's CPU devices (several with XLA_FLAGS=--xla_force_host_platform_device_count=N)."""
    from jax._src import xla_bridge

    return list(xla_bridge.get_backend("cpu").devices())


def _compile_on_cpu(module: bytes | str, device: Any | None = None) -> Any:
    """Compile a StableHLO module (bytecode or MLIR text) into a loaded XLA CPU executable bound
    to `device` (default: the first CPU device)."""
    import numpy as np
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    backend = xla_bridge.get_backend("cpu")
    target = device if device is not None else backend.devices()[0]
    options = xla_client.CompileOptions()
    # Replica 0 defaults to device 0; bind it to the target so inputs placed there are accepted.
    options.device_assignment = xla_client.DeviceAssignment.create(np.array([[target.id]]))
    return backend.compile_and_load(module, [target], options)


def device_put(array: Any, device: Any | None = None) -> Any:
    """`jax.device_put` that keeps an f64 / s64 / u64 array's width (outside x64 mode jax would
    place a 32-bit copy, which an executable with a 64-bit parameter refuses)."""
    import jax

    with jax.enable_x64(True):
        return jax.device_put(array, device)


def run_executable(executable: Any, args: Sequence[Any]) -> list[Any]:
    """Run a loaded executable once on host arrays; the outputs as numpy arrays."""
    import numpy as np

    return [np.asarray(out) for out in executable.execute([device_put(a) for a in args])]


def compile_hlo_module(proto: Any, device: Any | None = None) -> Any:
    """Compile an `HloModuleProto` into a loaded XLA CPU executable bound to `device` (default:
    the first CPU device)."""
    return _compile_on_cpu(hlo_to_stablehlo_bytecode(proto), device)


def run_hlo_module(proto: Any, *args: Any) -> list[Any]:
    """Compile `proto` on the CPU and run it once on `args`; the outputs as numpy arrays."""
    return run_executable(compile_hlo_module(proto), args)


def run_stablehlo_text(text: str, *args: Any) -> list[Any]:
    """Compile a StableHLO module (MLIR text) on the first CPU device and run it once on `args`;
    the outputs as numpy arrays."""
    return run_executable(_compile_on_cpu(text), args)


def hlo_cost_analysis(text: str) -> dict[str, float]:
    """XLA's own `HloCostAnalysis` of one HLO module (text), as the CPU client runs it on the
    unoptimized module: keys such as "flops", "transcendentals", "bytes accessed"."""
    from jax._src import xla_bridge
    from jaxlib import _jax

    module = _hlo_lib().hlo_module_from_text(text)
    with native_stderr_to_log(logger):
        return dict(_jax.hlo_module_cost_analysis(xla_bridge.get_backend("cpu"), module))
