"""The fourteenth session's tile rankers learn a known within-kernel order and rank kernels they
never saw; a ranker whose scores do not follow that order fails the same check."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.learned.metrics import kendall_tau, top_k_slowdown
from cost_model.learned.tpugraphs import KernelRecord

pytest.importorskip("xgboost")

WEIGHTS = np.array([1.0, -0.6, 0.3, 0.0])


def _kernel(rng: np.random.Generator, k: int, configs: int = 24, catastrophe: bool = True) -> KernelRecord:
    """Runtime = the kernel's scale x exp(config . WEIGHTS), x 4 where knob 3 > 1.6 (a catastrophe
    the linear part does not show): the order within a kernel is known, the scale varies."""
    feat = rng.uniform(0, 2, (configs, 4)).astype(np.float32)
    runtime = np.exp(-9 + 0.5 * k + feat @ WEIGHTS) * np.where(catastrophe & (feat[:, 3] > 1.6), 4.0, 1.0)
    node_feat = np.full((2, 4), float(k), dtype=np.float32)
    return KernelRecord(node_feat, np.array([0, 1]), np.array([[1, 0]]), runtime, np.full(configs, runtime.min()),
                        config_feat=feat, meta={"kind": "matmul", "program": f"p{k}"})


def _split(seed: int = 0) -> tuple[list[KernelRecord], list[KernelRecord]]:
    rng = np.random.default_rng(seed)
    return [_kernel(rng, k) for k in range(8)], [_kernel(rng, k + 0.5) for k in range(3)]  # test kernels: other scales, other configs


def _assert_ranks(model, records: list[KernelRecord], min_tau: float = 0.6) -> None:
    for record in records:
        score = model.predict(record)
        assert score.shape == (record.num_configs,)
        assert kendall_tau(score, record.config_runtime) > min_tau, "the ranker does not follow the known order"
        assert top_k_slowdown(score, record.config_runtime, 5) < 0.25, "the ranker's top 5 misses the fast configurations"


@pytest.mark.parametrize("name", ["ndcg", "map", "reject", "rank+relative", "rank+relative+ndcg", "rank-all+relative", "rank-bag3"])
def test_named_rankers_rank_unseen_kernels(name: str) -> None:
    from cost_model.learned.tile_rankers import make_tile_ranker

    train, test = _split()
    model = make_tile_ranker(name, seed=0)
    for member in getattr(model, "members", [model]):  # small trees: the synthetic task needs few
        member.depth, member.rounds = 3, 150
    # MAP's binary relevance (within 10% of the best) says nothing about the order below the top
    _assert_ranks(model.fit(train), test, min_tau=0.2 if name == "map" else 0.6)


def test_the_check_fails_a_ranker_that_cannot_rank() -> None:
    from cost_model.learned.tile_rankers import GradedRankGbdt

    train, test = _split()
    rng = np.random.default_rng(1)
    for record in train:  # labels shuffled within each kernel: nothing to learn
        record.config_runtime = rng.permutation(record.config_runtime)
    model = GradedRankGbdt(objective="ndcg", depth=3, rounds=150).fit(train)
    with pytest.raises(AssertionError, match="known order|fast configurations"):
        _assert_ranks(model, test)


def test_catastrophe_classifier_flags_the_slow_region() -> None:
    from cost_model.learned.tile_rankers import CatastropheGbdt

    train, test = _split()
    model = CatastropheGbdt(threshold=1.5, depth=3, rounds=150).fit(train)
    for record in test:
        bad = record.config_runtime >= 1.5 * record.config_runtime.min()
        p = model.predict(record)
        assert ((p >= 0) & (p <= 1)).all()
        auc = (p[bad][:, None] > p[~bad][None, :]).mean()  # P(a catastrophe scores above a good configuration)
        assert auc > 0.8
    with pytest.raises(ValueError):
        CatastropheGbdt(threshold=1.0)


def test_relevance_grades_and_zscore() -> None:
    from cost_model.learned.tile_rankers import ZScoreEnsemble, make_tile_ranker, relevance_grades, zscore

    grades = relevance_grades(np.array([1.0, 2.0, 8.0, 16.0, 1.0]), levels=3, cap=8.0)
    np.testing.assert_array_equal(grades, [3, 2, 0, 0, 3])  # 2x = one third of the way to 8x
    np.testing.assert_allclose(zscore(np.array([1.0, 3.0])), [-1.0, 1.0])
    np.testing.assert_array_equal(zscore(np.full(4, 7.0)), np.zeros(4))
    with pytest.raises(ValueError):
        relevance_grades(np.ones(3), cap=1.0)
    with pytest.raises(ValueError, match="weights"):
        ZScoreEnsemble([object()], [1.0, 2.0])
    with pytest.raises(ValueError, match="unknown tile ranker"):
        make_tile_ranker("lightgbm")
