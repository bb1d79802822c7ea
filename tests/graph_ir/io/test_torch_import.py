"""PyTorch import: ExportedProgram / fx GraphModule directly, and the runnable ONNX path."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graph_ir import DType, TensorType  # noqa: E402
from graph_ir.errors import GraphIRError  # noqa: E402
from graph_ir.io.onnx_export import export_onnx  # noqa: E402
from graph_ir.io.torch_import import import_torch, torch_to_onnx_graph  # noqa: E402
from graph_ir.op_kinds import OpKind  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        y = torch.relu(self.norm(self.conv(x)))
        peak, where = torch.max(y, dim=1)
        pooled = torch.cat([y.mean(dim=(2, 3)), y.amax(dim=(2, 3))], dim=1)
        return self.head(pooled) + peak.sum(), where


def test_exported_program_maps_ops_params_and_tuples():
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    graph = import_torch(model, (x,))
    graph.verify()
    assert [v.name for v in graph.inputs] == ["x"]
    assert graph.inputs[0].type == TensorType(DType.FLOAT32, (2, 3, 8, 8))
    weight = graph.initializers["p_conv_weight"]
    np.testing.assert_array_equal(weight.const.numpy(), model.conv.weight.detach().numpy())
    kinds = {n.op_type: n.kind for n in graph}
    assert kinds["aten.conv2d.default"] is OpKind.CONV
    assert kinds["aten.linear.default"] is OpKind.MATMUL
    assert kinds["aten.cat.default"] is OpKind.CONCAT
    # max.dim returns (values, indices): one node with two outputs, no getitem nodes
    maximum = next(n for n in graph if n.op_type == "aten.max.dim")
    assert len(maximum.outputs) == 2 and maximum.attr("dim") == 1
    assert maximum.outputs[1].dtype is DType.INT64
    assert graph.outputs[1] is maximum.outputs[1]
    assert not any("getitem" in n.op_type for n in graph)
    cat = next(n for n in graph if n.op_type == "aten.cat.default")
    assert len(cat.inputs) == 2 and cat.attr("dim") == 1  # a list of tensors becomes inputs


def test_dynamic_batch_dimension_is_symbolic():
    model = Block().eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    program = torch.export.export(model, (torch.randn(4, 3, 8, 8),), dynamic_shapes={"x": {0: batch}})
    graph = import_torch(program)
    graph.verify()
    first = graph.inputs[0].shape[0]
    assert isinstance(first, str) and graph.outputs[0].shape[0] == first


def test_fx_graph_module_from_symbolic_trace():
    traced = torch.fx.symbolic_trace(Block().eval())
    graph = import_torch(traced)
    graph.verify()
    assert any(n.kind is OpKind.CALL and n.op_type == "conv" for n in graph)
    assert "conv.weight" not in graph.initializers  # modules stay calls; no weights are lifted


def test_rejects_other_objects():
    with pytest.raises(GraphIRError, match="example_inputs"):
        import_torch(Block())
    with pytest.raises(GraphIRError, match="cannot import"):
        import_torch(object())


def test_torch_module_through_ir_and_onnx_matches_torch_in_onnxruntime():
    import onnxruntime as ort

    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 3, 8, 8)
    graph = torch_to_onnx_graph(model, (x,))
    graph.verify()
    graph.find_node(next(iter(graph)).name).device = "cpu:0"  # a decision must not change results
    model_proto = export_onnx(graph)
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        expected = model(x)
    np.testing.assert_allclose(got[0], expected[0].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[1], expected[1].numpy())
