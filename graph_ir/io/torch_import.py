"""PyTorch -> IR: a `torch.export.ExportedProgram` or a `torch.fx.GraphModule`, imported directly.

Mapping:
- user inputs -> graph inputs; parameters, buffers and lifted constants -> initializers that
  reference the torch tensors (no copy; `numpy()` converts on demand);
- each `call_function` node -> a node (domain "aten", op_type = the overload, e.g.
  "aten.conv2d.default"); tensor arguments (also inside lists, e.g. `cat`) are inputs in order,
  every other argument becomes an attribute named after the op schema's argument;
- a node returning a tuple gets one output per element, and `getitem` nodes disappear (their
  users read that output directly); types come from `node.meta["val"]` (symbolic sizes -> named
  dims).
`call_module` / `call_method` nodes of a plain (non-exported) GraphModule keep their target as
op_type (domain "torch.fx"). The IR of aten ops is for analysis and decisions (placement, fusion,
scheduling); to run a torch model through ONNX, use `torch_to_onnx_graph`, which goes through
`torch.onnx.export(dynamo=True)` and the ONNX importer.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

import numpy as np

from graph_ir._gc import gc_paused
from graph_ir.attrs import Attr, AttrKind
from graph_ir.core import Node, Value
from graph_ir.dtypes import DType
from graph_ir.errors import GraphIRError, ModelFormatError
from graph_ir.graph import Graph, ModelInfo
from graph_ir.op_kinds import OpKind, register_op_kinds
from graph_ir.tensors import Tensor
from graph_ir.types import Shape, TensorType, TupleType, Type

__all__ = ["import_torch", "import_exported_program", "import_fx_graph_module", "torch_to_onnx_graph", "ATEN_DOMAIN"]

ATEN_DOMAIN = "aten"
FX_DOMAIN = "torch.fx"

_KIND_BY_OP = {
    OpKind.MATMUL: "mm addmm bmm baddbmm matmul linear einsum _scaled_dot_product_flash_attention_for_cpu",
    OpKind.CONV: "conv1d conv2d conv3d convolution _convolution",
    OpKind.CONV_TRANSPOSE: "conv_transpose1d conv_transpose2d conv_transpose3d",
    OpKind.ATTENTION: "scaled_dot_product_attention _scaled_dot_product_efficient_attention",
    OpKind.UNARY: "relu relu_ gelu silu sigmoid tanh exp log sqrt rsqrt neg abs sin cos erf hardtanh leaky_relu elu "
    "hardswish hardsigmoid softplus mish dropout native_dropout reciprocal sign floor ceil round logical_not bitwise_not "
    "clamp clamp_min clamp_max pow exp2 log1p expm1",
    OpKind.BINARY: "add sub mul div rsub maximum minimum eq ne lt le gt ge logical_and logical_or bitwise_and "
    "bitwise_or remainder fmod atan2",
    OpKind.SELECT: "where masked_fill",
    OpKind.CAST: "_to_copy to type_as",
    OpKind.REDUCE: "sum mean amax amin max min prod var var_mean std norm linalg_vector_norm any all logsumexp",
    OpKind.ARG_REDUCE: "argmax argmin",
    OpKind.SOFTMAX: "_softmax softmax _log_softmax log_softmax",
    OpKind.NORM: "batch_norm native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
    "layer_norm native_layer_norm group_norm native_group_norm instance_norm rms_norm",
    OpKind.POOL: "max_pool2d max_pool2d_with_indices avg_pool2d adaptive_avg_pool2d adaptive_max_pool2d "
    "max_pool1d avg_pool1d max_pool3d avg_pool3d",
    OpKind.RESHAPE: "view reshape _unsafe_view squeeze unsqueeze flatten unflatten view_as",
    OpKind.TRANSPOSE: "permute transpose t pixel_shuffle",
    OpKind.BROADCAST: "expand expand_as broadcast_to full_like zeros_like ones_like",
    OpKind.CONCAT: "cat stack concat",
    OpKind.SPLIT: "split split_with_sizes chunk unbind",
    OpKind.SLICE: "slice select narrow",
    OpKind.GATHER: "index index_select gather embedding take",
    OpKind.SCATTER: "index_put scatter scatter_add index_add",
    OpKind.PAD: "constant_pad_nd pad",
    OpKind.RESIZE: "upsample_nearest2d upsample_bilinear2d interpolate",
    OpKind.COPY: "clone contiguous alias detach copy lift_fresh_copy",
    OpKind.CONSTANT: "full zeros ones scalar_tensor empty",
    OpKind.IOTA: "arange",
    OpKind.RANDOM: "rand randn randint bernoulli normal uniform",
    OpKind.CUMULATIVE: "cumsum cumprod",
    OpKind.SORT: "sort",
    OpKind.TOPK: "topk",
    OpKind.SHAPE: "sym_size size",
}
ATEN_OP_KINDS = {name: kind for kind, names in _KIND_BY_OP.items() for name in names.split()}
register_op_kinds(ATEN_DOMAIN, ATEN_OP_KINDS)


class TorchTensor(Tensor):
    """A parameter or buffer, referenced (not copied) until someone asks for numpy."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        super().__init__(_dtype(tensor.dtype), tuple(int(d) for d in tensor.shape))
        self.tensor = tensor

    def numpy(self) -> np.ndarray:
        import torch

        tensor = self.tensor.detach().cpu()
        if tensor.dtype is torch.bfloat16:
            return tensor.view(torch.int16).numpy().view(self.dtype.numpy)
        return tensor.numpy()


def _dtype(torch_dtype: Any) -> DType:
    import torch

    table = {
        torch.float32: DType.FLOAT32, torch.float64: DType.FLOAT64, torch.float16: DType.FLOAT16,
        torch.bfloat16: DType.BFLOAT16, torch.int8: DType.INT8, torch.int16: DType.INT16, torch.int32: DType.INT32,
        torch.int64: DType.INT64, torch.uint8: DType.UINT8, torch.bool: DType.BOOL, torch.complex64: DType.COMPLEX64,
        torch.complex128: DType.COMPLEX128,
    }
    for name, dtype in (("float8_e4m3fn", DType.FLOAT8E4M3FN), ("float8_e5m2", DType.FLOAT8E5M2), ("uint16", DType.UINT16),
                        ("uint32", DType.UINT32), ("uint64", DType.UINT64)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = dtype
    try:
        return table[torch_dtype]
    except KeyError:
        raise ModelFormatError(f"torch dtype {torch_dtype} has no IR element type") from None


def _type_of(val: Any) -> Type | None:
    import torch

    if isinstance(val, torch.Tensor):
        # Static sizes are ints; symbolic ones (SymInt) keep their symbol name, e.g. "s0".
        return TensorType(_dtype(val.dtype), Shape(d if isinstance(d, int) else str(d) for d in val.shape))
    if isinstance(val, (tuple, list)):
        return TupleType(tuple(_type_of(v) for v in val))
    return None


def import_torch(model: Any, example_inputs: tuple | None = None) -> Graph:
    """An nn.Module (exported with torch.export on `example_inputs`), an ExportedProgram or a
    GraphModule -> Graph."""
    import torch

    if isinstance(model, torch.export.ExportedProgram):
        return import_exported_program(model)
    if isinstance(model, torch.fx.GraphModule) and example_inputs is None:
        return import_fx_graph_module(model)
    if isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise GraphIRError("import_torch(nn.Module) needs example_inputs to export the module")
        return import_exported_program(torch.export.export(model, tuple(example_inputs)))
    raise GraphIRError(f"cannot import a {type(model).__name__}: expected nn.Module, ExportedProgram or GraphModule")


def import_exported_program(program: Any) -> Graph:
    from torch.export.graph_signature import InputKind

    signature = program.graph_signature
    constants: dict[str, Any] = {}
    state = program.state_dict
    for spec in signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = state[spec.target] if spec.target in state else program.constants[spec.target]
            constants[spec.arg.name] = tensor
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            constants[spec.arg.name] = program.constants[spec.target]
    graph = _FxImporter(constants).run(program.graph_module.graph, name=type(program.module()).__name__)
    graph.model = ModelInfo(source_format="torch.export", producer_name="torch")
    return graph


def import_fx_graph_module(module: Any) -> Graph:
    constants = {}
    for node in module.graph.nodes:
        if node.op == "get_attr":
            constants[node.name] = _fetch_attr(module, node.target)
    graph = _FxImporter(constants).run(module.graph, name=type(module).__name__)
    graph.model = ModelInfo(source_format="torch.fx", producer_name="torch")
    return graph


def _fetch_attr(module: Any, target: str) -> Any:
    value = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


class _FxImporter:
    def __init__(self, constants: dict[str, Any]) -> None:
        self.constants = constants

    def run(self, fx_graph: Any, name: str) -> Graph:
        import torch

        with gc_paused():
            graph = Graph(name)
            values: dict[Any, Any] = {}  # fx node -> Value, or a tuple of Values for multi-output nodes
            for fx_node in fx_graph.nodes:
                op = fx_node.op
                if op in ("placeholder", "get_attr"):
                    tensor = self.constants.get(fx_node.name)
                    if isinstance(tensor, torch.Tensor):
                        values[fx_node] = graph.add_initializer(Value(fx_node.name, const=TorchTensor(tensor)))
                    elif op == "placeholder":
                        values[fx_node] = graph.add_input(Value(fx_node.name, _type_of(fx_node.meta.get("val"))))
                    else:
                        raise ModelFormatError(f"get_attr {fx_node.target} is not a tensor", node=fx_node.name)
                elif op == "output":
                    for value in _flatten(fx_node.args[0]):
                        if value is None:  # AOTAutograd backward graphs: no gradient for this input
                            continue
                        graph.add_output(self.resolve(values, value, fx_node))
                elif op == "call_function" and fx_node.target is operator.getitem and isinstance(
                    values.get(fx_node.args[0]), tuple
                ):
                    values[fx_node] = values[fx_node.args[0]][fx_node.args[1]]
                else:
                    values[fx_node] = self.node(graph, fx_node, values)
        graph.opset_imports = {ATEN_DOMAIN: 1}
        return graph

    def resolve(self, values: dict[Any, Any], item: Any, user: Any) -> Value:
        value = values.get(item)
        if not isinstance(value, Value):
            raise ModelFormatError(f"argument {item} is not a single tensor value", node=user.name)
        return value

    def node(self, graph: Graph, fx_node: Any, values: dict[Any, Any]) -> Value | tuple[Value, ...]:
        import torch

        target = fx_node.target
        schema = getattr(target, "_schema", None)
        if fx_node.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            op_type, domain = f"{target.namespace}.{target._opname}.{target._overloadname}", ATEN_DOMAIN
            base = target._opname.rstrip("_")
            kind = ATEN_OP_KINDS.get(base, ATEN_OP_KINDS.get(target._opname, OpKind.OTHER))
        else:
            # Untyped GraphModules keep tuple results as one value, read by `getitem` nodes.
            op_type, domain = str(getattr(target, "__name__", target)), FX_DOMAIN
            kind = OpKind.CALL if fx_node.op == "call_module" else OpKind.OTHER
            if target is operator.getitem:
                kind = OpKind.GET_TUPLE_ELEMENT
        arg_names = [a.name for a in schema.arguments] if schema is not None else []
        inputs: list[Value] = []
        attrs: list[Attr] = []
        structure: list[Any] = []  # per argument: number of tensor inputs it took, or None
        items = list(enumerate(fx_node.args)) + [(k, v) for k, v in fx_node.kwargs.items()]
        for key, arg in items:
            arg_name = arg_names[key] if isinstance(key, int) and key < len(arg_names) else str(key)
            tensors = [a for a in _flatten(arg) if a in values]
            if tensors:
                inputs.extend(self.resolve(values, t, fx_node) for t in tensors)
                structure.append(len(tensors))
            else:
                structure.append(None)
                attr = _plain_attr(arg_name, arg)
                if attr is not None:
                    attrs.append(attr)
        attrs.append(Attr("arg_structure", AttrKind.OPAQUE, tuple(structure)))
        val = fx_node.meta.get("val")
        multi = isinstance(val, (tuple, list))
        outputs = [Value(f"{fx_node.name}_{i}", _type_of(v)) for i, v in enumerate(val)] if multi else [
            Value(fx_node.name, _type_of(val))
        ]
        node = Node(op_type, inputs, outputs=outputs, attrs=attrs, domain=domain, name=fx_node.name, kind=kind)
        graph.append(node)
        trace = fx_node.meta.get("stack_trace")
        if trace:
            node.meta["torch.stack_trace"] = trace.strip().splitlines()[-1]
        return tuple(node.outputs) if multi else node.outputs[0]


def _flatten(arg: Any) -> Iterable[Any]:
    if isinstance(arg, (list, tuple)):
        for item in arg:
            yield from _flatten(item)
    else:
        yield arg


def _plain_attr(name: str, value: Any) -> Attr | None:
    import torch

    if value is None:
        return None
    if isinstance(value, torch.dtype):
        return Attr(name, AttrKind.STRING, str(_dtype(value)))
    if isinstance(value, (torch.device, torch.memory_format, torch.layout)):
        return Attr(name, AttrKind.STRING, str(value))
    try:
        return Attr.infer(name, value)
    except (TypeError, ValueError):
        return Attr(name, AttrKind.OPAQUE, repr(value))


def torch_to_onnx_graph(module: Any, example_inputs: tuple, *, opset: int | None = None) -> Graph:
    """The runnable path: torch.onnx.export(dynamo=True) -> ModelProto -> our ONNX importer."""
    import torch

    from graph_ir.io.onnx_import import import_onnx

    program = torch.onnx.export(module, tuple(example_inputs), dynamo=True, opset_version=opset, verbose=False)
    return import_onnx(program.model_proto)
