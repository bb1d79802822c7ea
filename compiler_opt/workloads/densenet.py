"""DenseNet-121 (Huang et al., 2017) as a PyTorch module, and its ONNX export.

Written here because torchvision is not installable in this environment; the architecture
follows torchvision's `densenet121` (growth 32, blocks (6, 12, 24, 16), 64 initial features,
bottleneck width 4 x growth, compression 0.5), so parameter counts match (7,978,856).
Weights are random (seeded); nothing is downloaded.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from torch import nn

__all__ = [
    "DenseNet",
    "densenet121",
    "export_densenet121_onnx",
    "cached_densenet121_onnx",
    "onnx_bytes",
    "DENSENET121_PARAMETERS",
]

logger = logging.getLogger(__name__)

DENSENET121_PARAMETERS = 7_978_856


class _DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1 (bottleneck) then BN-ReLU-Conv3x3, producing `growth_rate` new channels."""

    def __init__(self, in_channels: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, bn_size * growth_rate, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(torch.relu(self.norm1(x)))
        return self.conv2(torch.relu(self.norm2(x)))


class _DenseBlock(nn.Module):
    def __init__(self, num_layers: int, in_channels: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            _DenseLayer(in_channels + i * growth_rate, growth_rate, bn_size) for i in range(num_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Each layer sees the concatenation of the block input and every earlier layer's output.
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.BatchNorm2d(in_channels),
            nn.ReLU(),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.AvgPool2d(2, stride=2),
        )


class DenseNet(nn.Module):
    def __init__(
        self,
        growth_rate: int = 32,
        block_config: tuple[int, ...] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        num_classes: int = 1000,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, num_init_features, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(num_init_features),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        channels = num_init_features
        for index, num_layers in enumerate(block_config):
            layers.append(_DenseBlock(num_layers, channels, growth_rate, bn_size))
            channels += num_layers * growth_rate
            if index != len(block_config) - 1:
                layers.append(_Transition(channels, channels // 2))
                channels //= 2
        layers.append(nn.BatchNorm2d(channels))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.features(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(x)


def densenet121(num_classes: int = 1000, seed: int = 0) -> DenseNet:
    """DenseNet-121 in eval mode with seeded random weights."""
    torch.manual_seed(seed)
    return DenseNet(num_classes=num_classes).eval()


def export_densenet121_onnx(path: str | os.PathLike[str], *, batch: int = 1, image_size: int = 224) -> Path:
    """Export DenseNet-121 with the dynamo-based exporter (its default optimizer on)."""
    import onnx

    path = Path(path)
    model = densenet121()
    example = torch.randn(batch, 3, image_size, image_size, generator=torch.Generator().manual_seed(1))
    program = torch.onnx.export(
        model, (example,), dynamo=True, input_names=["image"], output_names=["logits"], verbose=False
    )
    tmp = path.with_name(f".{path.name}.tmp")
    program.save(str(tmp))
    # Shapes for every intermediate value, so importers and FLOP counts see a fully typed graph.
    proto = onnx.shape_inference.infer_shapes(onnx.load(str(tmp)))
    onnx.save(proto, str(tmp))
    os.replace(tmp, path)
    logger.info("exported DenseNet-121 to %s (%d nodes)", path, len(proto.graph.node))
    return path


def cached_densenet121_onnx(cache: str | os.PathLike[str] | None = None) -> Path:
    """The exported model under the workload cache, exported on first use (about a minute)."""
    from compiler_opt.workloads import cache_dir

    folder = Path(cache) if cache is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"densenet121-torch{torch.__version__.split('+')[0]}.onnx"
    if not path.is_file():
        export_densenet121_onnx(path)
    return path


def onnx_bytes(mode: str, *, batch: int, image_size: int) -> bytes:
    """The workload registry's source: the exported model's bytes (inference only)."""
    import tempfile

    if mode != "inference":
        raise ValueError(f"DenseNet-121 is exported for inference only, not {mode!r}")
    with tempfile.TemporaryDirectory() as folder:
        return export_densenet121_onnx(Path(folder) / "densenet.onnx", batch=batch, image_size=image_size).read_bytes()
