"""`cost_model.learned.code_feature_store`: candidates' code features kept on disk and read back, so a
second autotune of the same kernels compiles nothing to rank them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")


def _kernel():  # type: ignore[no-untyped-def]
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    space = TileSpace(build_kernel(KernelSpec("matmul", (16, 24, 8))))
    return space, kernel_configs(space, 1, 5)


def test_rows_are_stored_and_read_back_without_compiling(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned import tile_code_features
    from cost_model.learned.code_feature_store import CodeFeatureStore, active

    space, configs = _kernel()
    compiled = tile_code_features.configs_code_block(space, configs, "s18", workers=1)  # no store active: nothing kept
    with CodeFeatureStore(tmp_path / "f.sqlite") as store:
        with active(store):
            first = tile_code_features.configs_code_block(space, configs[:3], "s18", workers=1)
        assert store.misses == 3 and store.hits == 0
        assert np.array_equal(first, compiled[:3])
        from cost_model.learned import code_feature_pool

        calls = []  # one entry per candidate compiled (for this host in child processes: probed_code_features)
        real = code_feature_pool.probed_code_features
        monkeypatch.setattr(code_feature_pool, "probed_code_features", lambda space, chosen, *a, **k: calls.extend(chosen) or real(space, chosen, *a, **k))
        with active(store):
            again = tile_code_features.configs_code_block(space, configs, "s18", workers=1)
        assert len(calls) == 2 and store.hits == 3  # only the two it had not seen were compiled
        assert np.array_equal(again, compiled)
        with active(store):  # another feature set is another key
            tile_code_features.configs_code_block(space, configs[:1], "s16", workers=1)
        assert len(calls) == 3
    assert CodeFeatureStore.key("llvm -mcpu=a", "s18", "k", "c") != CodeFeatureStore.key("llvm -mcpu=b", "s18", "k", "c")


def test_the_tuner_keeps_them_beside_its_measurement_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("xgboost")
    from cost_model.learned.predictor import load_tile_ranker
    from cost_model.measure.tile.collect import tile_harness
    from cost_model.profiling.cache import ProfileCache
    from passes.autotune.tile import TileTuner

    space, configs = _kernel()
    ranker = load_tile_ranker("gbdt-ens")
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        tuner = TileTuner(ranker, tile_harness(cache), top_k=2, prefilter=1.0)
        first = tuner.rank(space, configs)
        kept = tmp_path / "m.code_features.sqlite"
        assert kept.is_file() and tuner._feature_store().misses == len(configs)
        again = TileTuner(ranker, tile_harness(cache), top_k=2, prefilter=1.0)
        assert np.array_equal(again.rank(space, configs), first) and again._feature_store().hits == len(configs)
    assert np.array_equal(first, ranker.rank(space, configs))  # the same scores as without a store
