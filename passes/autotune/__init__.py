"""Autotuning with the learned cost model: rank all candidates, measure the top-k, keep the best.

- `search.tune_candidates`: the generic step (rank, measure top-k, keep the fastest measured);
- `tile.TileTuner` / the `autotune-tiles` pass: tile configurations of a graph's dot, conv and
  reduce kernels (TVM on this CPU), written to `node.tile` and `node.meta["tile_config"]`.
Importing this package registers `autotune-tiles`; it imports TVM and torch only when it runs.
"""

from __future__ import annotations

from passes.autotune.search import TuneOutcome, random_search_measurements, tune_candidates
from passes.autotune.tile import AutotuneTiles, KernelTuning, TileTuner

__all__ = ["AutotuneTiles", "KernelTuning", "TileTuner", "TuneOutcome", "random_search_measurements", "tune_candidates"]
