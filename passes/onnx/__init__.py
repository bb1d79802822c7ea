"""ONNX graph clean-up rewrites, one module per family, each a registered pass:

| pass | module | what |
|---|---|---|
| `eliminate-noops` | `noop.py` | Identity, inference Dropout, same-type Cast/CastLike, same-shape Reshape/Expand, identity Transpose, zero Pad, ... |
| `simplify-casts` | `casts.py` | CastLike -> Cast; Cast of a lossless Cast |
| `fold-conv-bn`, `fold-conv-bias`, `fold-pad-into-conv` | `conv_fold.py` | what a Conv absorbs |
| `fold-chains`, `fuse-gemm` | `chains.py` | Transpose/Reshape pairs; MatMul+Add -> Gemm |
| `cancel-reshape-pairs` | `reshape_pairs.py` | a Reshape and the Reshapes that undo it around elementwise ops |
| `constants-to-initializers` | `constants.py` | Constant nodes -> initializers |
| `upgrade-opset` | `opset.py` | the graph moved to a newer ai.onnx opset (onnx's version converter), for runtimes that dropped old operator versions |

`pipelines.py` holds the `-O0..-O3` levels. Every rewrite is checked in the tests against
onnxruntime on seeded random inputs.
"""

from __future__ import annotations

from passes.onnx.casts import SimplifyCasts
from passes.onnx.chains import FoldChains, FuseGemm
from passes.onnx.constants import ConstantsToInitializers
from passes.onnx.conv_fold import FoldConvBatchNorm, FoldConvBias, FoldPadIntoConv
from passes.onnx.noop import EliminateNoops
from passes.onnx.opset import UpgradeOpset
from passes.onnx.pipelines import OPT_LEVELS, opt_level_pipeline
from passes.onnx.reshape_pairs import CancelReshapePairs

__all__ = [
    "CancelReshapePairs",
    "ConstantsToInitializers",
    "EliminateNoops",
    "FoldChains",
    "UpgradeOpset",
    "FoldConvBatchNorm",
    "FoldConvBias",
    "FoldPadIntoConv",
    "FuseGemm",
    "OPT_LEVELS",
    "SimplifyCasts",
    "opt_level_pipeline",
]
