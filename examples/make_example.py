"""Regenerate examples/small_cnn.onnx: a small residual CNN exported from PyTorch.

    python examples/make_example.py [--out examples/small_cnn.onnx]

The model is a ResNet-style network for 32x32 RGB images (conv/batch-norm/ReLU stem, two
residual stages, a strided downsampling conv, max-pool, global average pool, Flatten, Gemm),
with seeded random weights. It is exported with the dynamo-based `torch.onnx.export` without
the exporter's optimizer, so the file keeps what real exports contain and the passes have work
to do: BatchNormalization after each Conv (foldable), repeated Shape/Expand/CastLike chains
(common subexpressions, constant-foldable) and Constant nodes. Shapes are inferred into
`value_info` so FLOP counts are exact, and the result is checked against PyTorch in
onnxruntime before it is written.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

INPUT_SHAPE = (1, 3, 32, 32)
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "small_cnn.onnx")


def build_model():  # -> torch.nn.Module (torch imported lazily: only this script needs it)
    import torch
    from torch import nn

    class Residual(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(x + y)

    class SmallCNN(nn.Module):
        def __init__(self, num_classes: int = 10) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.stage1 = Residual(16)
            self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.stage2 = Residual(32)
            self.head = nn.Linear(32, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stage2(self.down(self.stage1(self.stem(x))))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.head(x)

    torch.manual_seed(0)
    model = SmallCNN().eval()
    # Non-trivial batch-norm statistics, so a wrong rewrite of them shows up numerically.
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model


def export(out_path: str) -> None:
    import onnx
    import onnxruntime as ort
    import torch

    model = build_model()
    example = torch.randn(*INPUT_SHAPE, generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        program = torch.onnx.export(
            model, (example,), dynamo=True, input_names=["image"], output_names=["logits"], optimize=False
        )
        program.save(raw)
        proto = onnx.load(raw)
    proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    proto.doc_string = "Small residual CNN (examples/make_example.py), seeded random weights."
    onnx.checker.check_model(proto, full_check=True)

    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: example.numpy()})[0]
    with torch.no_grad():
        want = model(example).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    tmp_out = out_path + ".tmp"
    onnx.save(proto, tmp_out)
    os.replace(tmp_out, out_path)
    size = os.path.getsize(out_path)
    print(f"wrote {out_path}: {len(proto.graph.node)} nodes, {size / 1024:.1f} KiB, matches PyTorch in onnxruntime")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="where to write the model (default: %(default)s)")
    args = parser.parse_args(argv)
    export(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
