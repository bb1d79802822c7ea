"""Named optimisation levels for ONNX graphs (`compiler-opt optimize -O0..-O3`, `optimize()`).

- `-O0`: nothing.
- `-O1`: the basics: shape inference, constant folding within the default size limit, CSE, DCE.
- `-O2` (the default for ONNX outputs): `-O1` plus every rewrite of `passes/onnx` (no-op
  elimination, Cast simplification, Conv+BatchNormalization, Conv+bias, Pad into Conv,
  Transpose/Reshape chains, Reshape pairs around elementwise ops, MatMul+Add -> Gemm, Constant nodes as initializers), and constant folding that also folds results no
  bigger than their constant inputs (weight Transposes, Casts), twice over so one rewrite's
  result feeds the next.
- `-O3`: `-O2` with the size limit lifted entirely (the model file may grow).
"""

from __future__ import annotations

__all__ = ["OPT_LEVELS", "opt_level_pipeline"]

_REWRITES = "eliminate-noops,simplify-casts,fold-conv-bn,fold-conv-bias,fold-pad-into-conv,fold-chains,cancel-reshape-pairs,fuse-gemm"
_O2_ROUND = f"simplify-casts,eliminate-noops,constant-folding{{same-size=true}},{_REWRITES},eliminate-noops,constants-to-initializers,cse,dce"

OPT_LEVELS: dict[int, str] = {
    0: "",
    1: "shape-infer,constant-folding,cse,dce,topo-sort",
    2: f"shape-infer,{_O2_ROUND},shape-infer,{_O2_ROUND},topo-sort",
    3: f"shape-infer,{_O2_ROUND.replace('same-size=true', 'size-limit=-1')},shape-infer,"
    f"{_O2_ROUND.replace('same-size=true', 'size-limit=-1')},topo-sort",
}


def opt_level_pipeline(level: int) -> str:
    """The pipeline string of optimisation level `level` (0..3)."""
    if level not in OPT_LEVELS:
        raise ValueError(f"optimisation level must be 0..3, got {level}")
    return OPT_LEVELS[level]
