"""`cost_model.learned.code_feature_pool`: candidates compiled on threads give the same code features
as one after another, and the worker count comes from the environment or the CPU affinity."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cost_model.learned.code_feature_pool import WORKERS_ENV, compile_workers


def test_threads_give_the_same_features_as_one_by_one() -> None:
    pytest.importorskip("tvm")
    from cost_model.learned.tile_code_features import configs_code_block
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    space = TileSpace(build_kernel(KernelSpec("conv2d_nchw", (1, 8, 8, 4, 8, 3, 3, 1))))
    configs = kernel_configs(space, 3, 6)
    one_by_one = configs_code_block(space, configs, "s18", workers=1)
    threaded = configs_code_block(space, configs, "s18", workers=3)
    assert threaded.shape == one_by_one.shape == (6, one_by_one.shape[1]) and np.isfinite(one_by_one).all()
    assert np.array_equal(threaded, one_by_one)


def test_the_worker_count(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert compile_workers() == 3
    monkeypatch.delenv(WORKERS_ENV)
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert compile_workers() == expected
    for bad in ("0", "two"):
        monkeypatch.setenv(WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=WORKERS_ENV):
            compile_workers()


def test_child_process_compiles_match_in_process_ones_and_time_out_to_nan() -> None:
    """`probed_code_features` (what `configs_code_block` runs for this host) gives the in-process numbers; a
    compile past its timeout gives a NaN row, which `ranked_last_if_uncompiled` puts after every other candidate."""
    pytest.importorskip("tvm")
    from cost_model.learned.code_feature_pool import probed_code_features
    from cost_model.learned.gbdt_predictor import ranked_last_if_uncompiled
    from cost_model.learned.tile_code_features import config_code_features
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    space = TileSpace(build_kernel(KernelSpec("matmul", (16, 32, 16))))
    configs = kernel_configs(space, 1, 3)
    in_process = np.stack([config_code_features(space, c, feature_set="s18") for c in configs])
    assert np.array_equal(probed_code_features(space, configs, "s18", 2), in_process)
    timed_out = probed_code_features(space, configs[:1], "s18", 1, timeout=0.01)  # a fresh child is still importing TVM
    assert timed_out.shape == (1, in_process.shape[1]) and np.isnan(timed_out).all()
    rows = np.vstack([in_process[:1], timed_out, in_process[1:]])
    scores = ranked_last_if_uncompiled(np.array([0.5, -9.0, 0.1, 0.2]), rows)
    assert np.argsort(scores).tolist() == [2, 3, 0, 1]
    assert np.array_equal(ranked_last_if_uncompiled(np.array([0.3, 0.1]), np.full((2, 2), np.nan)), [0.3, 0.1])  # all missing: order kept
