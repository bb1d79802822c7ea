"""FLOPs of every convolution-like op, layout-aware, for every frontend: the one place for them.

Each frontend's node is read into a `ConvGeometry` (batch, features, groups and per spatial dim
the input/kernel/output extents, stride, low padding, kernel and input dilation), whatever its
layout: ONNX/aten `[N, C, D...]` with `[Cout, Cin/g, k...]` weights; TF NHWC/NCHW (`data_format`)
with HWIO filters (`[k..., Cin/g, Cout]`; depthwise `[k..., Cin, multiplier]`), forward and both
backprops; XLA HLO `convolution` with its `convolution_dimension_numbers`, `window`,
`feature_group_count` and `batch_group_count`; StableHLO `convolution` with its
`#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->...>` dimension numbers.

Two conventions, each the one its framework's own counter uses, so our totals can be checked
against it (tests/cost_model/test_flops_crosscheck.py):
- **dense window** (ONNX, TF, aten; TensorFlow's profiler, fvcore, ptflops): every output
  element is a dot product over the whole kernel window, padding included:
  `2 x output elements x (Cin / groups) x prod(kernel)`;
- **valid positions** (XLA HLO and StableHLO; XLA's `HloCostAnalysis`): per spatial dim only the
  (output, kernel) pairs that land on a real input element count, so zero padding and the holes
  of input (lhs/base) dilation cost nothing. This matters for XLA's backward convolutions: the
  input gradient of a strided conv is a conv over an input dilated by the stride, where the dense
  count would be stride^2 times too high.
A multiply-add is 2 FLOPs; a fused bias adds 1 per output element (ONNX Conv with a bias input).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.types import TensorType

if TYPE_CHECKING:
    from graph_ir.core import Node, Value

__all__ = ["ConvGeometry", "conv_flops", "conv_geometry", "valid_pairs"]


@dataclass(frozen=True)
class ConvGeometry:
    """A convolution in XLA's general form (all extents static)."""

    batch: int  # input batch
    in_features: int  # input features (all groups)
    out_features: int
    feature_groups: int
    batch_groups: int
    input: tuple[int, ...]  # spatial extents
    kernel: tuple[int, ...]
    output: tuple[int, ...]
    stride: tuple[int, ...]
    pad_low: tuple[int, ...]
    kernel_dilation: tuple[int, ...]
    input_dilation: tuple[int, ...]

    def macs(self, *, valid_only: bool) -> int:
        """Multiply-adds: per output feature and batch element, (Cin / groups) x window pairs."""
        if valid_only:
            pairs = math.prod(
                valid_pairs(i, k, o, s, p, kd, idl)
                for i, k, o, s, p, kd, idl in zip(
                    self.input, self.kernel, self.output, self.stride, self.pad_low, self.kernel_dilation, self.input_dilation
                )
            )
        else:
            pairs = math.prod(self.output) * math.prod(self.kernel)
        return (self.in_features // self.feature_groups) * self.out_features * (self.batch // self.batch_groups) * pairs


@functools.lru_cache(maxsize=4096)
def valid_pairs(inp: int, kernel: int, out: int, stride: int, pad_low: int, kernel_dilation: int, input_dilation: int) -> int:
    """(output, kernel) index pairs of one spatial dim that read a real input element (XLA's rule)."""
    o = np.arange(out, dtype=np.int64)[:, None]
    k = np.arange(kernel, dtype=np.int64)[None, :]
    index = o * stride - pad_low + k * kernel_dilation  # index into the dilated, padded input
    real = (index >= 0) & (index % input_dilation == 0) & (index // input_dilation < inp)
    return int(real.sum())


# -- shape helpers ----------------------------------------------------------------------------
def _shape(value: Value | None) -> tuple[int, ...] | None:
    if value is None or not isinstance(value.type, TensorType) or value.type.shape is None:
        return None
    shape = tuple(value.type.shape)
    return shape if all(d.__class__ is int for d in shape) else None  # type: ignore[return-value]


def _in(node: Node, index: int) -> tuple[int, ...] | None:
    return _shape(node.inputs[index]) if index < len(node.inputs) else None


def _out(node: Node) -> tuple[int, ...] | None:
    return _shape(node.outputs[0]) if node.outputs else None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


# -- dense-window frontends (ONNX, aten, TF) ----------------------------------------------------
# TF ops: (filter input or None when the filter is the output, gradient/activation input whose
# elements each meet the whole window, depthwise?). The forward ops read the output instead.
_TF_FORWARD = {"Conv2D", "Conv3D", "_FusedConv2D", "FusedConv2DBiasActivation", "QuantizedConv2D", "Conv"}
_TF_DEPTHWISE_FORWARD = {"DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"}
_TF_BACKPROP_FILTER = {"Conv2DBackpropFilter", "Conv2DBackpropFilterV2", "Conv3DBackpropFilter", "Conv3DBackpropFilterV2"}
_TF_BACKPROP_INPUT = {"Conv2DBackpropInput", "Conv2DBackpropInputV2", "Conv3DBackpropInput", "Conv3DBackpropInputV2"}


def _tf_conv_flops(node: Node) -> int | None:
    """TF's convention (its profiler's registered statistics): 2 x output x filter window x Cin.

    Filters are HWIO (`[k..., Cin/groups, Cout]`) whatever `data_format` says about the
    activations; a backprop costs what its forward conv does (2 x out_backprop elements x
    window x Cin), which is TF's formula without its division by the stride.
    """
    op = node.op_type
    if op in _TF_FORWARD:
        out, filt = _out(node), _in(node, 1)
        if out is None or filt is None or len(filt) < 3:
            return None
        if op == "FusedConv2DBiasActivation" and _text(node.attr("filter_format", "HWIO")).startswith("OIHW"):
            window_cin = math.prod(filt[1:4]) if _text(node.attr("filter_format")) == "OIHW" else None
            return None if window_cin is None else 2 * math.prod(out) * window_cin
        return 2 * math.prod(out) * math.prod(filt[:-1])
    if op in _TF_DEPTHWISE_FORWARD:
        out, filt = _out(node), _in(node, 1)
        return None if out is None or filt is None or len(filt) < 3 else 2 * math.prod(out) * math.prod(filt[:-2])
    depthwise = op.startswith("DepthwiseConv2dNativeBackprop")
    if op in _TF_BACKPROP_FILTER or op == "DepthwiseConv2dNativeBackpropFilter":
        grad, filt = _in(node, 2), _out(node)
    elif op in _TF_BACKPROP_INPUT or op == "DepthwiseConv2dNativeBackpropInput":
        grad, filt = _in(node, 2), _in(node, 1)
    else:
        return None
    if grad is None or filt is None or len(filt) < 3:
        return None
    return 2 * math.prod(grad) * math.prod(filt[:-2] if depthwise else filt[:-1])


def _channels_first_flops(node: Node, weight_index: int, bias_index: int | None) -> int | None:
    """ONNX/aten Conv: weight `[Cout, Cin/groups, k...]`, so an output meets Cin/groups x window."""
    weight, out = _in(node, weight_index), _out(node)
    if weight is None or out is None or len(weight) < 2:
        return None
    flops = 2 * math.prod(out) * math.prod(weight[1:])
    if bias_index is not None and bias_index < len(node.inputs) and node.inputs[bias_index] is not None:
        flops += math.prod(out)
    return flops


def _channels_first_transpose_flops(node: Node) -> int | None:
    """ONNX/aten ConvTranspose: weight `[Cin, Cout/groups, k...]`; each input element scatters
    into Cout/groups x window outputs (the same work as the forward conv it transposes)."""
    weight, x = _in(node, 1), _in(node, 0)
    if weight is None or x is None or len(weight) < 2:
        return None
    flops = 2 * math.prod(x) * math.prod(weight[1:])
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        flops += math.prod(_out(node) or (0,))
    return flops


# -- XLA: HLO and StableHLO ---------------------------------------------------------------------
def _hlo_geometry(node: Node) -> ConvGeometry | None:
    lhs, rhs, out = _in(node, 0), _in(node, 1), _out(node)
    dn, window = node.attr("convolution_dimension_numbers"), node.attr("window")
    if lhs is None or rhs is None or out is None or dn is None:
        return None
    dims = list(getattr(window, "dimensions", ())) if window is not None else []
    spatial = list(dn.input_spatial_dimensions)
    if len(dims) != len(spatial):
        return None

    def field(name: str) -> tuple[int, ...]:  # proto fields left at 0 mean 1 (no stride/dilation)
        return tuple(int(getattr(d, name, 0)) or 1 for d in dims)

    return ConvGeometry(
        batch=lhs[dn.input_batch_dimension],
        in_features=lhs[dn.input_feature_dimension],
        out_features=rhs[dn.kernel_output_feature_dimension],
        feature_groups=int(node.attr("feature_group_count", 1) or 1),
        batch_groups=int(node.attr("batch_group_count", 1) or 1),
        input=tuple(lhs[d] for d in spatial),
        kernel=tuple(rhs[d] for d in dn.kernel_spatial_dimensions),
        output=tuple(out[d] for d in dn.output_spatial_dimensions),
        stride=field("stride"),
        pad_low=tuple(int(getattr(d, "padding_low", 0)) for d in dims),
        kernel_dilation=field("window_dilation"),
        input_dilation=field("base_dilation"),
    )


_STABLEHLO_DNUMS = re.compile(r"\[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]")


def _labels(text: str) -> list[str]:
    return [t.strip() for t in text.split(",")]


def _ints(node: Node, name: str, rank: int, default: int) -> tuple[int, ...]:
    value = node.attr(name)
    if value is None:
        return (default,) * rank
    return tuple(int(v) for v in value)


def _stablehlo_geometry(node: Node) -> ConvGeometry | None:
    lhs, rhs, out = _in(node, 0), _in(node, 1), _out(node)
    match = _STABLEHLO_DNUMS.search(_text(node.attr("dimension_numbers")))
    if lhs is None or rhs is None or out is None or match is None:
        return None
    lhs_l, rhs_l, out_l = (_labels(match.group(i)) for i in (1, 2, 3))
    rank = sum(1 for t in lhs_l if t.isdigit())
    spatial = [str(i) for i in range(rank)]
    padding = node.attr("padding")
    if padding is None:
        pad_low = (0,) * rank
    else:
        array = padding.numpy() if hasattr(padding, "numpy") else np.asarray(padding)
        pad_low = tuple(int(v) for v in np.asarray(array).reshape(-1, 2)[:, 0])
    return ConvGeometry(
        batch=lhs[lhs_l.index("b")],
        in_features=lhs[lhs_l.index("f")],
        out_features=rhs[rhs_l.index("o")],
        feature_groups=int(node.attr("feature_group_count", 1) or 1),
        batch_groups=int(node.attr("batch_group_count", 1) or 1),
        input=tuple(lhs[lhs_l.index(s)] for s in spatial),
        kernel=tuple(rhs[rhs_l.index(s)] for s in spatial),
        output=tuple(out[out_l.index(s)] for s in spatial),
        stride=_ints(node, "window_strides", rank, 1),
        pad_low=pad_low,
        kernel_dilation=_ints(node, "rhs_dilation", rank, 1),
        input_dilation=_ints(node, "lhs_dilation", rank, 1),
    )


def conv_geometry(node: Node) -> ConvGeometry | None:
    """The general form of an XLA convolution node (HLO or StableHLO); None for other nodes or
    when a shape is not static."""
    try:
        if node.domain == "hlo" and node.op_type == "convolution":
            return _hlo_geometry(node)
        if node.domain == "stablehlo" and node.op_type == "stablehlo.convolution":
            return _stablehlo_geometry(node)
    except (AttributeError, IndexError, ValueError, TypeError):
        return None  # malformed dimension numbers: counted as unknown, never an exception
    return None


_ONNX_WEIGHT_BIAS = {"QLinearConv": (3, 8), "DeformConv": (1, 3), "ConvInteger": (1, None)}


def conv_flops(node: Node) -> int:
    """FLOPs of a convolution-like node (kinds CONV and CONV_TRANSPOSE) of any frontend; 0 when
    a shape it needs is not static."""
    if node.domain in ("hlo", "stablehlo"):
        geometry = conv_geometry(node)
        return 0 if geometry is None else 2 * geometry.macs(valid_only=True)
    if node.domain == "tf":
        return _tf_conv_flops(node) or 0
    if node.domain == "aten" and "transpose" in node.op_type:
        return _channels_first_transpose_flops(node) or 0
    if node.op_type == "ConvTranspose":
        return _channels_first_transpose_flops(node) or 0
    weight_index, bias_index = _ONNX_WEIGHT_BIAS.get(node.op_type, (1, 2))
    return _channels_first_flops(node, weight_index, bias_index) or 0
