"""The top re-ranker (`tile_cascade`): its scores reorder only the first stage's top; on a problem where
the first stage ignores a feature that decides the top, it learns it; the ensemble file keeps it."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("xgboost")

from cost_model.learned.tile_cascade import CascadeRanker, TopReranker, cross_fitted_scores, reranked_scores, top_rows  # noqa: E402
from cost_model.learned.tile_rankers import zscore  # noqa: E402


def test_reranked_scores_reorder_only_the_top() -> None:
    first = np.array([0.5, 0.1, 0.9, 0.3, 0.2])
    picked = np.array([1, 4, 3])  # the first stage's top 3, best first
    out = reranked_scores(first, picked, np.array([3.0, 1.0, 2.0]))  # the second stage prefers 4, then 3, then 1
    assert np.argsort(out).tolist() == [4, 3, 1, 0, 2]
    assert out[[1, 4, 3]].max() < out[[0, 2]].min()


def test_top_rows_columns() -> None:
    rng = np.random.default_rng(0)
    rows, first = rng.normal(size=(20, 3)), rng.normal(size=20)
    picked, chosen = top_rows(rows, first, 5)
    assert picked.tolist() == np.argsort(first)[:5].tolist() and chosen.shape == (5, 2 + 3 + 3)
    np.testing.assert_allclose(chosen[:, 0], zscore(first)[picked], rtol=1e-6)
    assert chosen[:, 1].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(chosen[:, 2:5], rows[picked], rtol=1e-6)
    np.testing.assert_allclose(chosen[:, 5:].mean(axis=0), 0.0, atol=1e-6)
    picked, chosen = top_rows(rows[:3], first[:3], 5)  # fewer candidates than the top
    assert len(picked) == 3 and chosen.shape[0] == 3


def _kernels(count: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Runtime = exp(x0 + 0.5 x1); a first stage that reads x0 alone gets the top wrong."""
    rng = np.random.default_rng(seed)
    rows = [rng.normal(size=(50, 4)) for _ in range(count)]
    runtimes = [np.exp(x[:, 0] + 0.5 * x[:, 1]) for x in rows]
    return rows, [x[:, 0].copy() for x in rows], runtimes


def _top1(scores: np.ndarray, runtime: np.ndarray) -> float:
    return float(runtime[np.argmin(scores)] / runtime.min() - 1.0)


def test_the_reranker_learns_what_the_first_stage_misses() -> None:
    rows, first, runtimes = _kernels(120, 0)
    reranker = TopReranker(top=10, rounds=150, depth=4).fit(rows, first, runtimes)
    rows, first, runtimes = _kernels(60, 1)
    before = np.mean([_top1(s, t) for s, t in zip(first, runtimes)])
    after = np.mean([_top1(reranker.order(x, s), t) for x, s, t in zip(rows, first, runtimes)])
    assert after < 0.5 * before, (before, after)
    for x, s in zip(rows, first):  # outside the top the first stage's order is kept
        out = reranker.order(x, s)
        rest = np.argsort(s)[10:]
        assert np.argsort(out)[10:].tolist() == rest.tolist()


def test_cross_fitted_scores_never_score_a_kernel_with_a_model_that_saw_it() -> None:
    seen: list[set[int]] = []

    class Memo:
        def fit(self, train: list[int]) -> "Memo":
            self.train = set(train)
            seen.append(self.train)
            return self

        def predict(self, record: int) -> np.ndarray:
            assert record not in self.train
            return np.array([float(record)])

    scores = cross_fitted_scores(list(range(10)), lambda train: Memo().fit(train), folds=3, seed=0)
    assert [s.tolist() for s in scores] == [[float(i)] for i in range(10)] and len(seen) == 3
    assert all(len(train) in (6, 7) for train in seen)
    with pytest.raises(ValueError, match="at least 2 folds"):
        cross_fitted_scores(list(range(10)), lambda train: Memo().fit(train), folds=1)


pytest.importorskip("tvm")

from cost_model.learned.baselines import GbdtBaseline  # noqa: E402
from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor  # noqa: E402
from cost_model.learned.predictor import load_tile_ranker  # noqa: E402
from cost_model.learned.tile_rankers import make_tile_ranker  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec  # noqa: E402

from test_gbdt_predictor import TRAIN_SHAPES, _record  # noqa: E402  (same folder, rootdir-relative import mode)


@pytest.fixture(scope="module")
def records() -> list:
    return [_record(KernelSpec("matmul", dims), 60, seed) for seed, dims in enumerate(TRAIN_SHAPES)]


def test_cascade_ranker_keeps_the_first_stage_order_below_the_top(records: list) -> None:
    cascade = CascadeRanker(GbdtBaseline(objective="rank", rank_pairs=50, depth=4, rounds=40), top=6, folds=2, rounds=30, depth=3).fit(records[:6])
    assert isinstance(make_tile_ranker("cascade-d10"), CascadeRanker)
    for record in records[6:]:
        first, final = cascade.first.predict(record), cascade.predict(record)
        assert sorted(np.argsort(final)[:6].tolist()) == sorted(np.argsort(first)[:6].tolist())
        assert np.argsort(final)[6:].tolist() == np.argsort(first)[6:].tolist()


def test_the_ensemble_file_keeps_its_reranker(tmp_path, records: list) -> None:  # type: ignore[no-untyped-def]
    def fit(train: list) -> GbdtEnsembleTilePredictor:
        return GbdtEnsembleTilePredictor.train(train, seed=0, rounds=30, depth=4)

    plain = fit(records)
    ranked = plain.with_reranker(records, fit, top=5, folds=2)
    assert ranked.extra["reranker"] == {"top": 5, "folds": 2, "seed": 0, "depth": ranked.reranker.depth, "rounds": ranked.reranker.rounds}
    loaded = load_tile_ranker("gbdt-ens", ranked.save(tmp_path / "ens.json"))
    assert isinstance(loaded, GbdtEnsembleTilePredictor) and loaded.reranker is not None
    for r in records:
        scores = loaded.rank_rows(r.node_feat, r.node_opcode, r.config_feat)
        np.testing.assert_array_equal(scores, ranked.rank_rows(r.node_feat, r.node_opcode, r.config_feat))
        first = plain.rank_rows(r.node_feat, r.node_opcode, r.config_feat)
        assert np.argsort(scores)[5:].tolist() == np.argsort(first)[5:].tolist()
    assert "reranker" not in json.loads(plain.save(tmp_path / "plain.json").read_text())  # files without one are unchanged
    doc = json.loads((tmp_path / "ens.json").read_text())
    doc["reranker"]["ubj_zlib"] = doc["reranker"]["ubj_zlib"][:40]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    from cost_model.learned.tpugraphs import DatasetError

    with pytest.raises(DatasetError, match="re-ranker"):
        GbdtEnsembleTilePredictor.load(tmp_path / "bad.json")


def test_costmodel_train_rerank_top(tmp_path, records: list, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main
    from cost_model.learned.tpugraphs import save_npz

    data = tmp_path / "data"
    for i, record in enumerate(records):
        save_npz(record, data / f"k{i}.npz")
    out = tmp_path / "ens.json"
    assert main(["costmodel", "train", str(data), "-o", str(out), "--model", "gbdt-ens", "--split", "all", "--gbdt-depth", "3", "--rerank-top", "4"]) == 0
    loaded = GbdtEnsembleTilePredictor.load(out)
    assert loaded.reranker is not None and loaded.reranker.top == 4 and loaded.extra["train_config"]["rerank_top"] == 4
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "x.json"), "--model", "gbdt-ens", "--rerank-top", "1"]) == 2
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "x.ubj"), "--model", "gbdt", "--rerank-top", "4"]) == 2
    assert "at least 2" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
