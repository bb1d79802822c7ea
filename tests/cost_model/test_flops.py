"""FLOP and byte counts against numbers worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cost_model.flops import graph_bytes, graph_flops, node_bytes, node_flops
from graph_ir import Attr, AttrKind, DType, Graph, Node, NumpyTensor, OpKind, TensorType, Value

F32 = DType.FLOAT32


def _value(name: str, shape: tuple | None, dtype: DType = F32) -> Value:
    return Value(name, TensorType(dtype, shape))


def _node(op_type: str, in_shapes: list, out_shape: tuple | None, **attrs: object) -> Node:
    """A node with typed inputs (None entries are omitted optional inputs) and one typed output."""
    graph = Graph()
    inputs = []
    for index, shape in enumerate(in_shapes):
        if shape is None:
            inputs.append(None)
        else:
            inputs.append(graph.add_input(_value(f"in{index}", shape)))
    node = graph.add_node(op_type, inputs, attrs=attrs)
    node.outputs[0].type = TensorType(F32, out_shape)
    return node


def test_matmul_2d() -> None:
    # [4,3] x [3,5]: 4*5 dot products of length 3 -> 2*60 = 120.
    assert node_flops(_node("MatMul", [(4, 3), (3, 5)], (4, 5))) == 120


def test_matmul_batch_broadcast() -> None:
    # batch dims (2,1) and (7,) broadcast to (2,7): 14 * 2*M*N*K = 14 * 2*4*5*3 = 1680.
    assert node_flops(_node("MatMul", [(2, 1, 4, 3), (7, 3, 5)], (2, 7, 4, 5))) == 1680


def test_matmul_vector_operands() -> None:
    assert node_flops(_node("MatMul", [(3,), (3, 5)], (5,))) == 2 * 3 * 5
    assert node_flops(_node("MatMul", [(4, 3), (3,)], (4,))) == 2 * 4 * 3


def test_gemm_with_bias_and_transpose() -> None:
    # A^T: [K=6, M=2] -> M=2, K=6; B^T: [N=4, K=6] -> N=4; 2*2*4*6 + 2*4 (bias) = 96 + 8.
    node = _node("Gemm", [(6, 2), (4, 6), (4,)], (2, 4), transA=1, transB=1)
    assert node_flops(node) == 104
    assert node_flops(_node("Gemm", [(2, 6), (6, 4)], (2, 4))) == 96


def test_einsum() -> None:
    # bij,bjk->bik with b=2,i=3,j=4,k=5: 2 * 2*3*4*5 = 240.
    assert node_flops(_node("Einsum", [(2, 3, 4), (2, 4, 5)], (2, 3, 5), equation="bij,bjk->bik")) == 240


def test_conv_grouped_with_bias() -> None:
    # out [1,8,5,5] = 200 elements; weight [8, 4/2=2, 3, 3]: 2*200*2*9 = 7200, + 200 bias.
    node = _node("Conv", [(1, 4, 7, 7), (8, 2, 3, 3), (8,)], (1, 8, 5, 5), group=2)
    assert node_flops(node) == 7400


def test_conv_transpose() -> None:
    # x [1,2,3,3] = 18 elements, weight [2, 4, 2, 2]: 2*18*4*4 = 576; no bias.
    assert node_flops(_node("ConvTranspose", [(1, 2, 3, 3), (2, 4, 2, 2)], (1, 4, 6, 6))) == 576


def test_elementwise_and_variadic() -> None:
    assert node_flops(_node("Relu", [(2, 3)], (2, 3))) == 6
    assert node_flops(_node("Gelu", [(2, 3)], (2, 3))) == 6
    assert node_flops(_node("Add", [(2, 3), (3,)], (2, 3))) == 6
    # Sum of 4 operands: 3 additions per output element.
    assert node_flops(_node("Sum", [(5,), (5,), (5,), (5,)], (5,))) == 15


def test_reduce_softmax_norm() -> None:
    assert node_flops(_node("ReduceSum", [(4, 6)], (4, 1))) == 24
    assert node_flops(_node("Softmax", [(4, 6)], (4, 6))) == 5 * 24
    bn_inputs = [(2, 3, 4, 4), (3,), (3,), (3,), (3,)]
    assert node_flops(_node("BatchNormalization", bn_inputs, (2, 3, 4, 4))) == 2 * 96
    assert node_flops(_node("LayerNormalization", [(2, 8), (8,)], (2, 8))) == 5 * 16


def test_pool() -> None:
    # out [1,3,4,4] = 48 elements, 3x3 window -> 432.
    assert node_flops(_node("MaxPool", [(1, 3, 8, 8)], (1, 3, 4, 4), kernel_shape=[3, 3])) == 432
    # Global pool reads every input element once.
    assert node_flops(_node("GlobalAveragePool", [(2, 3, 7, 7)], (2, 3, 1, 1))) == 294


def test_lstm() -> None:
    # seq=5, batch=2, input=3, hidden=4, one direction, with bias: per step
    #   2*2*16*(3+4) = 448 (gate matmuls) + 2*2*16 = 64 (biases) + 2*16 = 32 (activations)
    #   + 2*4*5 = 40 (cell update) = 584; times 5 steps = 2920.
    node = _node("LSTM", [(5, 2, 3), (1, 16, 3), (1, 16, 4), (1, 32)], (5, 1, 2, 4), hidden_size=4)
    assert node_flops(node) == 2920


def test_gru_bidirectional_batch_first() -> None:
    # layout=1: X is [batch=2, seq=3, input=4]; hidden=5, gates=15, 2 directions, no bias:
    #   per step 2*2*15*(4+5) = 540 + 2*15 = 30 + 2*5*4 = 40 -> 610; * 3 steps * 2 dirs = 3660.
    node = _node("GRU", [(2, 3, 4), (2, 15, 4), (2, 15, 5)], (2, 3, 2, 5), hidden_size=5, layout=1)
    assert node_flops(node) == 3660


def test_attention_4d_and_3d() -> None:
    # batch 1, 2 heads, seq_q 3, seq_kv 4, head 8: scores 24; 2*24*8 (QK) + 2*24*8 (PV) + 5*24.
    expected = 2 * 24 * 8 + 2 * 24 * 8 + 5 * 24
    node = _node("Attention", [(1, 2, 3, 8), (1, 2, 4, 8), (1, 2, 4, 8)], (1, 2, 3, 8))
    assert node_flops(node) == expected
    node3 = _node("Attention", [(1, 3, 16), (1, 4, 16), (1, 4, 16)], (1, 3, 16), q_num_heads=2, kv_num_heads=2)
    assert node_flops(node3) == expected


@pytest.mark.parametrize(
    "in_shapes",
    [
        [("batch", 3), (3, 5)],  # symbolic dim
        [(None, 3), (3, 5)],  # unknown dim
        [None, (3, 5)],  # missing input
    ],
)
def test_unknown_shapes_count_zero(in_shapes: list) -> None:
    assert node_flops(_node("MatMul", in_shapes, None)) == 0


def test_unknown_rank_and_untyped_values_count_zero() -> None:
    graph = Graph()
    x = graph.add_input(Value("x"))  # no type at all
    conv = graph.add_node("Conv", [x, graph.add_input(_value("w", None))])
    assert node_flops(conv) == 0
    assert node_bytes(conv) == 0


def test_data_movement_is_free() -> None:
    node = _node("Transpose", [(4, 5)], (5, 4), perm=[1, 0])
    assert node.kind is OpKind.TRANSPOSE
    assert node_flops(node) == 0


def test_node_bytes_reads_distinct_inputs_once() -> None:
    graph = Graph()
    x = graph.add_input(_value("x", (2, 3)))
    node = graph.add_node("Mul", [x, x])
    node.outputs[0].type = TensorType(DType.FLOAT16, (2, 3))
    # read 6 f32 once = 24 bytes, write 6 f16 = 12 bytes.
    assert node_bytes(node) == 36


def test_node_bytes_counts_constants() -> None:
    graph = Graph()
    x = graph.add_input(_value("x", (1, 4)))
    w = graph.add_constant(NumpyTensor(np.zeros((4, 2), np.float32)), "w")
    node = graph.add_node("MatMul", [x, w])
    node.outputs[0].type = TensorType(F32, (1, 2))
    assert node_bytes(node) == 16 + 32 + 8


def test_graph_flops_counts_subgraph_bodies_once() -> None:
    body = Graph("body")
    bx = body.add_input(_value("bx", (3, 3)))
    relu = body.add_node("Relu", [bx])
    relu.outputs[0].type = TensorType(F32, (3, 3))
    body.add_output(relu.outputs[0])

    graph = Graph()
    x = graph.add_input(_value("x", (2, 2)))
    exp = graph.add_node("Exp", [x])
    exp.outputs[0].type = TensorType(F32, (2, 2))
    trip = graph.add_input(_value("trip", (), DType.INT64))
    graph.add_node("Loop", [trip, None], attrs={"body": body})
    # 4 (Exp) + 9 (Relu in the loop body, once) + 0 (Loop itself).
    assert graph_flops(graph) == 13
    assert graph_bytes(graph) == (16 + 16) + (36 + 36) + 8


# -- XLA HLO conventions -------------------------------------------------------------------------
def _hlo_node(op_type: str, kind: OpKind, in_shapes: list, out_shape: tuple, **opaque: object) -> Node:
    graph = Graph()
    inputs = [graph.add_input(_value(f"in{i}", shape)) for i, shape in enumerate(in_shapes)]
    attrs = [Attr(name, AttrKind.OPAQUE, value) for name, value in opaque.items()]
    node = graph.add_node(op_type, inputs, attrs=attrs, domain="hlo", kind=kind)
    node.outputs[0].type = TensorType(F32, out_shape)
    return node


def test_hlo_dot_uses_contracting_dims() -> None:
    # lhs [K=3, M=4] contracted on dim 0 with rhs [3, 5]: 2 * 4*5 * 3 = 120 (ONNX's rule would say 2*?*4).
    dnums = SimpleNamespace(lhs_contracting_dimensions=(0,), rhs_contracting_dimensions=(0,))
    node = _hlo_node("dot", OpKind.MATMUL, [(3, 4), (3, 5)], (4, 5), dot_dimension_numbers=dnums)
    assert node_flops(node) == 120


def test_hlo_convolution_any_layout() -> None:
    # Depthwise 3x3 SAME, NHWC input, kernel laid out [3, 3, 1, 256] (output features last): 9
    # MACs per output element, less the (output, kernel) pairs that land on padding, as XLA counts:
    # per spatial dim 56 * 3 - 2 = 166 pairs.
    dnums = SimpleNamespace(
        input_batch_dimension=0, input_feature_dimension=3, input_spatial_dimensions=(1, 2),
        kernel_input_feature_dimension=2, kernel_output_feature_dimension=3, kernel_spatial_dimensions=(0, 1),
        output_batch_dimension=0, output_feature_dimension=3, output_spatial_dimensions=(1, 2),
    )
    dim = SimpleNamespace(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=1)
    node = _hlo_node(
        "convolution", OpKind.CONV, [(1, 56, 56, 256), (3, 3, 1, 256)], (1, 56, 56, 256),
        convolution_dimension_numbers=dnums, window=SimpleNamespace(dimensions=[dim, dim]),
        feature_group_count=256, batch_group_count=1,
    )
    assert node_flops(node) == 2 * 256 * 166 * 166


def test_hlo_reduce_window() -> None:
    window = SimpleNamespace(dimensions=[SimpleNamespace(size=1), SimpleNamespace(size=3), SimpleNamespace(size=3)])
    node = _hlo_node("reduce-window", OpKind.POOL, [(2, 8, 8), ()], (2, 4, 4), window=window)
    assert node_flops(node) == 32 * 9


def test_hlo_files_from_shared_testdata(shared_testdata) -> None:
    import graph_ir

    folder = shared_testdata / "external" / "hlo"
    prefix = "openxla-xla__xla__backends__cpu__benchmarks__hlo__"
    conv = folder / f"{prefix}depthwise_conv_3x3_1x256x56x56_bf16.hlo"
    mha = folder / f"{prefix}mha_block_1x12x128x64_bf16.hlo"
    if not conv.is_file() or not mha.is_file():
        pytest.skip("XLA benchmark HLO files not in the shared test data")
    # One depthwise 3x3 SAME convolution (the other nodes are a constant and a broadcast),
    # padding positions excluded as XLA's cost analysis does.
    assert graph_flops(graph_ir.load(str(conv))) == 2 * 256 * 166 * 166
    # Two batched dots of 12 x 128x128x64 MACs, plus under 3% of elementwise and reductions.
    dots = 2 * 2 * 12 * 128 * 128 * 64
    assert dots < graph_flops(graph_ir.load(str(mha))) < 1.03 * dots


def test_views_and_tuple_plumbing_move_no_bytes() -> None:
    graph = Graph()
    x = graph.add_input(_value("x", (4, 8)))
    node = graph.add_node("Reshape", [x, graph.add_input(_value("s", (2,)))])
    node.outputs[0].type = TensorType(F32, (32,))
    assert node_bytes(node) == 0
