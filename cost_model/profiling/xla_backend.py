"""Compile a group of HLO nodes into one XLA CPU executable and run it.

Why HLO protos and not JAX functions: every node imported from HLO keeps its instruction proto,
so a cut of the graph (`subgraph.cut_group`) exports through the project's own HLO exporter into
an `HloModuleProto` that computes exactly those instructions, whatever they are (custom calls,
reducers, layouts, precision configs). Re-expressing ops as JAX calls would need a translation
table per opcode and would silently differ where the table is incomplete. XLA then compiles the
module as it would a fused kernel: one executable, intermediates never leave it.

Compiling goes through `graph_ir.io.xla_bridge.compile_hlo_module`, the one wrapper of JAX's
private compile entry points.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cost_model.profiling.signature import group_signature, signature_key
from cost_model.profiling.subgraph import GroupCut, ProfilingError, cut_group
from graph_ir.attrs import AttrKind
from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["XlaBackend", "XlaKernel", "compile_hlo_group", "host_devices", "isomorphism_key", "random_inputs"]

logger = logging.getLogger(__name__)


def host_devices() -> list[Any]:
    """The XLA CPU devices (several when XLA_FLAGS has --xla_force_host_platform_device_count)."""
    from graph_ir.io.xla_bridge import cpu_devices

    return cpu_devices()


@dataclass(eq=False)
class XlaKernel:
    """One compiled group bound to one CPU device."""

    cut: GroupCut
    executable: Any
    device: Any
    compile_seconds: float

    def run(self, args: Sequence[Any]) -> list[Any]:
        """Dispatch once (asynchronously); results are device arrays, tuples already unpacked."""
        return self.executable.execute(list(args))

    def run_blocking(self, args: Sequence[Any]) -> list[Any]:
        outs = self.executable.execute(list(args))
        for out in outs:
            out.block_until_ready()
        return outs


class XlaBackend:
    """`ProfilingBackend` over XLA on one CPU device: a group is one compiled executable."""

    name = "xla-cpu"

    def __init__(self, device: Any | None = None, *, share: bool = True) -> None:
        self.device = device
        # Compiled kernels by (graph, members, device): the calibration's executor and the
        # profiler ask for the same groups, and compiling dominates their cost.
        self._kernels: dict[tuple[int, tuple[int, ...], int], XlaKernel] = {}
        # Executables by (isomorphism key, device): the 16 bottlenecks of a ResNet or the layers
        # of a BERT repeat the same groups, and one XLA CPU compile costs ~0.1-0.2 s here.
        self.share = share
        self._executables: dict[tuple[str, int], Any] = {}
        self.compiled = 0  # distinct executables compiled
        self.shared = 0  # kernels served by an executable compiled for an isomorphic group

    def kernel(self, graph: Graph, members: Sequence[Node], device: Any | None = None) -> XlaKernel:
        target = device if device is not None else self.device
        if target is None:
            target = host_devices()[0]
        key = (id(graph), tuple(sorted(id(n) for n in members)), target.id)
        kernel = self._kernels.get(key)
        if kernel is None:
            if not self.share:
                kernel = compile_hlo_group(graph, members, target)
                self.compiled += 1
            else:
                cut = cut_group(graph, members, tuple_op="tuple")
                share_key = (isomorphism_key(cut), target.id)
                executable = self._executables.get(share_key)
                if executable is None:
                    kernel = compile_hlo_group(graph, members, target, cut=cut)
                    self._executables[share_key] = kernel.executable
                    self.compiled += 1
                else:
                    kernel = XlaKernel(cut, executable, target, 0.0)
                    self.shared += 1
            self._kernels[key] = kernel
        return kernel

    def prepare(self, graph: Graph, members: Sequence[Node], *, seed: int = 0) -> Callable[[], Any]:
        kernel = self.kernel(graph, members)
        args = random_inputs(kernel.cut.inputs, kernel.device, seed=seed)
        return lambda: kernel.run_blocking(args)


def isomorphism_key(cut: GroupCut) -> str:
    """Equal for two cuts that compile to the same program with the same argument and result
    order: the group's signature (ops, attributes, types, operands by position), which of its
    values leave it, in order, and the contents of constants (signatures count those by type)."""
    position = {node: index for index, node in enumerate(cut.members)}
    parts = [group_signature(list(cut.members))]
    parts.append("out:" + ",".join(f"{position[v.producer]}.{v.index}" for v in cut.outputs))  # type: ignore[index]
    digest = hashlib.sha256()
    for node in cut.members:
        for value in node.inputs:
            if value is not None and value.is_constant:
                digest.update(np.ascontiguousarray(value.const.numpy()).tobytes())  # type: ignore[union-attr]
        for name, attr in sorted(node.attrs.items()):
            if attr.kind is AttrKind.TENSOR:
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(attr.value.numpy()).tobytes())
    parts.append("const:" + digest.hexdigest())
    return signature_key("\n".join(parts))


def compile_hlo_group(graph: Graph, members: Sequence[Node], device: Any | None = None, *, cut: GroupCut | None = None) -> XlaKernel:
    """Cut `members` out of an HLO-imported `graph` and compile them as one executable on `device`."""
    import time

    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import compile_hlo_module

    cut = cut if cut is not None else cut_group(graph, members, tuple_op="tuple")
    _strip_module_shell(cut.graph)
    began = time.perf_counter()
    try:
        # Fusions the module came with (XLA's optimized dumps) compile as calls: XLA:CPU refuses a
        # pre-made fusion without its backend config ("Fusion must have backend config").
        proto = _with_program_shape(export_hlo_proto(cut.graph, fusion_kinds="call"))
        target = device if device is not None else host_devices()[0]
        executable = compile_hlo_module(proto, target)
    except Exception as err:  # XLA raises its own runtime errors; name the group
        names = ", ".join(n.name for n in cut.members[:4])
        raise ProfilingError(f"cannot compile group [{names}{', ...' if len(cut.members) > 4 else ''}]: {err}") from err
    return XlaKernel(cut, executable, target, time.perf_counter() - began)


def _strip_module_shell(graph: Graph) -> None:
    # The original module's program shape and I/O aliasing describe the whole graph, not the cut.
    if graph.model is None:
        return
    shell = graph.model.extra.get("hlo.module")
    if shell is not None:
        shell = type(shell)(name=shell.name or "group")
        graph.model.extra["hlo.module"] = shell


def _with_program_shape(module: Any) -> Any:
    """Set the entry's program shape (and the module's) from its parameters and ROOT: the copied
    shells still describe the whole graph."""
    entry = next(c for c in module.computations if c.id == module.entry_computation_id)
    params = sorted((i for i in entry.instructions if i.opcode == "parameter"), key=lambda i: i.parameter_number)
    root = next(i for i in entry.instructions if i.id == entry.root_id)
    for shape in (entry.program_shape, module.host_program_shape):
        shape.Clear()
        for inst in params:
            shape.parameters.add().CopyFrom(inst.shape)
            shape.parameter_names.append(inst.name)
        shape.result.CopyFrom(root.shape)
    return module


def random_inputs(values: Sequence[Value], device: Any | None = None, *, seed: int = 0) -> list[Any]:
    """Seeded random device arrays matching `values` (floats in [-1, 1), small ints, random bools)."""
    from graph_ir.io.xla_bridge import device_put

    rng = np.random.default_rng(seed)
    out = []
    for value in values:
        vtype = value.type
        if not isinstance(vtype, TensorType) or vtype.dtype is None or vtype.shape is None:
            raise ProfilingError(f"input %{value.name} needs a known tensor type to be timed")
        dtype = np.dtype(vtype.dtype.numpy)
        shape = tuple(int(d) for d in vtype.shape)
        if dtype == np.bool_:
            array = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            array = rng.integers(0, 4, size=shape).astype(dtype)
        else:
            array = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        out.append(device_put(array, device))  # an f64 / s64 / u64 input keeps its width
    return out
