"""Per-node convolution attributes (`conv_features`): read from real imported graphs (XLA HLO of
JAX convs, an ONNX grouped conv), stored in the fusion `.npz` and read back, and recomputed for a
file written without them (`fusion_merge.refeaturize_record`)."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.learned.conv_features import CONV_FEATURE_NAMES, fusion_conv_features
from cost_model.learned.tpugraphs import DatasetError, load_npz, save_npz

COL = {name: i for i, name in enumerate(CONV_FEATURE_NAMES)}


def _convs(nodes) -> np.ndarray:  # type: ignore[no-untyped-def]
    feats = fusion_conv_features(nodes)
    return feats[[n.kind.value == "conv" for n in nodes]]


def test_hlo_depthwise_strided_dilated_and_transposed_convs() -> None:
    pytest.importorskip("jax")
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order

    dw_stride = _convs(node_order(fusion_graph("dw_stride@1")))  # depthwise 3x3 stride 2 on (2, 16, 16, 16), then a 1x1 16 -> 16
    assert dw_stride.shape == (2, len(CONV_FEATURE_NAMES))
    depthwise, pointwise = sorted(dw_stride, key=lambda r: -r[COL["feature_groups"]])
    assert depthwise[[COL["feature_groups"], COL["depthwise"], COL["window"], COL["stride"]]].tolist() == [16, 1, 9, 2]
    # 8x8 outputs x 16 channels x 2 images, each 3x3 taps of one channel, less the taps off the padded edge
    assert 0.9 * 1e-6 * 2 * 8 * 8 * 16 * 9 < depthwise[COL["mmacs"]] <= 1e-6 * 2 * 8 * 8 * 16 * 9
    assert pointwise[[COL["feature_groups"], COL["depthwise"], COL["window"], COL["stride"]]].tolist() == [1, 0, 1, 1]
    assert pointwise[COL["mmacs"]] == pytest.approx(1e-6 * 2 * 8 * 8 * 16 * 16, rel=1e-5)
    (grouped,) = [r for r in _convs(node_order(fusion_graph("grouped@1"))) if r[COL["window"]] == 9]
    assert grouped[COL["feature_groups"]] == 4 and grouped[COL["depthwise"]] == 0 and grouped[[COL["in_features"], COL["out_features"]]].tolist() == [16, 16]
    (dilated,) = _convs(node_order(fusion_graph("dilated@1")))
    assert dilated[COL["kernel_dilation"]] == 2 and dilated[COL["input_dilation"]] == 1 and dilated[COL["feature_groups"]] == 1
    (transposed,) = _convs(node_order(fusion_graph("conv_t@1")))
    assert transposed[COL["input_dilation"]] == 2 and transposed[COL["kernel_dilation"]] == 1
    mlp = node_order(fusion_graph("mlp@1"))
    assert not fusion_conv_features(mlp).any()  # no conv: all zeros


def test_onnx_grouped_conv(tmp_path) -> None:  # type: ignore[no-untyped-def]
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from graph_ir.io.onnx_import import load_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 5, 5])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 1, 3, 3], np.zeros(72, np.float32).tolist())
    conv = helper.make_node("Conv", ["x", "w"], ["y"], group=8, strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    model = helper.make_model(helper.make_graph([conv], "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "dw.onnx")
    graph = load_onnx(tmp_path / "dw.onnx")
    (row,) = _convs([n for n in graph.nodes])
    assert row[[COL["feature_groups"], COL["depthwise"], COL["window"], COL["stride"], COL["kernel_dilation"]]].tolist() == [8, 1, 9, 2, 1]
    assert row[COL["mmacs"]] == pytest.approx(1e-6 * 8 * 5 * 5 * 9, rel=1e-5)
    assert row[COL["in_features"]] == 8 and row[COL["out_features"]] == 8


def test_npz_round_trip_and_refeaturize(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("jax")
    from compiler_opt.costmodel.fusion_collect import fusion_record
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from compiler_opt.costmodel.fusion_merge import refeaturize_record
    from cost_model.decisions import Decisions, node_order

    nodes = node_order(fusion_graph("dw_sep@1"))
    one = Decisions.default(len(nodes))
    one.fusion_group[:] = 0
    configs = [Decisions.default(len(nodes)), one]
    record = fusion_record("dw_sep@1", nodes, configs, [2e-4, 1e-4], {})
    assert record.node_conv_feat is not None and record.node_conv_feat[:, COL["depthwise"]].sum() == 1
    save_npz(record, tmp_path / "dw_sep@1.npz")
    back = load_npz(tmp_path / "dw_sep@1.npz")
    np.testing.assert_array_equal(back.node_conv_feat, record.node_conv_feat)
    # a file from before the column: loads with None; re-featurized from the program rebuilt by name
    record.node_conv_feat = None
    save_npz(record, tmp_path / "old.npz")
    old = load_npz(tmp_path / "old.npz")
    assert old.node_conv_feat is None
    np.testing.assert_array_equal(refeaturize_record(old).node_conv_feat, back.node_conv_feat)
    old.node_feat = old.node_feat + 1.0  # not the graph the program builds today
    with pytest.raises(DatasetError, match="differs"):
        refeaturize_record(old)
    bad = load_npz(tmp_path / "dw_sep@1.npz")
    bad.node_conv_feat = bad.node_conv_feat[:-1]
    with pytest.raises(DatasetError, match="node_conv_feat"):
        save_npz(bad, tmp_path / "bad.npz")
