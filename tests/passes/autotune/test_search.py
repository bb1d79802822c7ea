"""The autotuner on a synthetic kernel whose cost is known: it finds the optimum measuring only
the top-k, with far fewer measurements than random search needs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from passes.autotune.search import random_search_measurements, tune_candidates


def _cost(config: tuple[int, int, int]) -> float:
    # A bowl with its minimum at tile (16, 4, 2) in log2 space, plus a ridge the model does not see.
    a, b, c = (np.log2(v) for v in config)
    return 1e-4 * (1 + (a - 4) ** 2 + 0.5 * (b - 2) ** 2 + 0.25 * (c - 1) ** 2 + 0.05 * ((a + b) % 2))


CANDIDATES = list(itertools.product([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 16], [1, 2, 4, 8]))


def test_finds_the_known_best_with_top_k_measurements() -> None:
    rng = np.random.default_rng(0)
    noise = {c: rng.normal(0, 0.02) for c in CANDIDATES}
    measured: list[tuple[int, int, int]] = []

    def rank(cs):  # type: ignore[no-untyped-def]
        return [np.log(_cost(c)) + noise[c] for c in cs]  # a good but imperfect model

    def measure(cs):  # type: ignore[no-untyped-def]
        measured.extend(cs)
        return [_cost(c) for c in cs]

    outcome = tune_candidates(CANDIDATES, rank=rank, measure=measure, top_k=5)
    optimum = min(CANDIDATES, key=_cost)
    assert outcome.best == optimum == (16, 4, 2)
    assert outcome.measurements == len(measured) == 5
    random_needs = random_search_measurements([_cost(c) for c in CANDIDATES], _cost(optimum) * 1.02)
    assert random_needs >= 3 * outcome.measurements  # the goal: a third of random search's measurements


def test_a_bad_model_still_keeps_the_best_it_measured() -> None:
    outcome = tune_candidates(CANDIDATES, rank=lambda cs: [-_cost(c) for c in cs], measure=lambda cs: [_cost(c) for c in cs], top_k=3)
    assert outcome.best_seconds == min(outcome.measured.values())
    assert outcome.best_seconds > min(_cost(c) for c in CANDIDATES)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no candidates"):
        tune_candidates([], rank=lambda cs: [], measure=lambda cs: [], top_k=1)
    with pytest.raises(ValueError, match="scores"):
        tune_candidates([1, 2], rank=lambda cs: [0.0], measure=lambda cs: [1.0], top_k=1)


def test_autotune_tiles_pass_is_registered_and_names_a_bad_model_file(repo_root, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    import graph_ir
    from graph_ir.errors import CompilerOptError
    from passes.autotune import AutotuneTiles
    from passes.infra.registry import get_pass_class

    assert get_pass_class("autotune-tiles") is AutotuneTiles
    graph = graph_ir.load(str(repo_root / "examples" / "small_cnn.onnx"))
    bad = tmp_path / "missing.pt"
    with pytest.raises(CompilerOptError, match="missing.pt"):
        AutotuneTiles(model=str(bad))(graph)
