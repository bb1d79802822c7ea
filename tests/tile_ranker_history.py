"""Tile rankers shipped in earlier sessions, read back from the repository's history, and the
pinned scores a feature-set change must leave unchanged (tests of `tile_code_features`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

PINNED_HOST = "llvm -mcpu=znver4"  # where the pinned scores were taken


def ensemble_from_history(commit: str, tmp_path: Path, what: str) -> Any:
    """`tile_gbdt_ens.json` as of `commit`, loaded; skips the test where the checkout lacks that
    history (`what` names the file in the message)."""
    from cost_model.learned.gbdt_ensemble import PACKAGED_GBDT_ENSEMBLE, GbdtEnsembleTilePredictor

    root = Path(__file__).resolve().parents[1]
    try:
        blob = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{PACKAGED_GBDT_ENSEMBLE.relative_to(root).as_posix()}"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"{what} is not in this checkout's history")
    path = tmp_path / f"{commit}.json"
    path.write_bytes(blob)
    return GbdtEnsembleTilePredictor.load(path)


def assert_pinned_scores(ranker: Any, expected: Sequence[float]) -> None:
    """`ranker`'s scores of four fixed configurations of a 64^3 matmul equal `expected` (rtol 1e-6).
    LLVM compiles for this host's CPU, so the scores hold only on `PINNED_HOST`: skipped elsewhere."""
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.runner import host_target_text
    from cost_model.measure.tile.space import TileConfig, TileSpace

    if host_target_text() != PINNED_HOST:
        pytest.skip(f"scores pinned on {PINNED_HOST!r}, this host compiles for {host_target_text()!r}")
    space = TileSpace(build_kernel(KernelSpec("matmul", (64, 64, 64))))
    configs = [TileConfig(((64, 1, 1), (4, 1, 16), (1, 64)), order=1, vectorize=True), TileConfig(((64, 1, 1), (64, 1, 1), (1, 64)), order=3, vectorize=False),
               TileConfig(((8, 8, 1), (8, 8, 1), (8, 8)), order=0, vectorize=False),
               TileConfig(((4, 4, 4), (4, 1, 16), (16, 4)), order=2, vectorize=True, unroll=16)]
    np.testing.assert_allclose(ranker.rank(space, configs), expected, rtol=1e-6)
