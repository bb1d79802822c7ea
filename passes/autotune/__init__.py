"""Autotuning with the learned cost model: rank all candidates, measure the top-k, keep the best.

- `search.tune_candidates`: the generic step (rank, measure top-k, keep the fastest measured);
- `tile.TileTuner` / the `autotune-tiles` pass: tile configurations of a graph's dot, conv and
  reduce kernels (TVM on this CPU), written to `node.tile` and `node.meta["tile_config"]`;
- `fusion.FusionTuner` / the `autotune-fusion` pass: fusion groups of an HLO graph (random legal
  `fuse-by-priority` draws and the default fusion, ranked by a layout-form model, top-k run on
  XLA), written to `node.fusion_group`.
Importing this package registers both passes; they import TVM, JAX and torch only when they run.
"""

from __future__ import annotations

from passes.autotune.fusion import AutotuneFusion, FusionTuner, FusionTuning
from passes.autotune.search import TuneOutcome, random_search_measurements, tune_candidates
from passes.autotune.tile import AutotuneTiles, KernelTuning, TileTuner

__all__ = ["AutotuneFusion", "AutotuneTiles", "FusionTuner", "FusionTuning", "KernelTuning", "TileTuner", "TuneOutcome", "random_search_measurements", "tune_candidates"]
