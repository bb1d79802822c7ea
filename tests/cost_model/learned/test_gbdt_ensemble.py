"""The XGBoost ensemble tile ranker (`autotune --ranker gbdt-ens`): on real TVM schedule spaces with
a synthetic cost whose optimum is known it finds that optimum in the tuner's top-k; its file
round-trips with fine-tuning; bad files are refused with the file named."""

from __future__ import annotations

import base64
import json
import zlib

import numpy as np
import pytest

pytest.importorskip("xgboost")
pytest.importorskip("tvm")

from cost_model.learned import gbdt_ensemble  # noqa: E402
from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor  # noqa: E402
from cost_model.learned.predictor import DEFAULT_TILE_RANKER, load_tile_ranker, tile_ranker_for  # noqa: E402
from cost_model.learned.tpugraphs import DatasetError, KernelRecord  # noqa: E402
from cost_model.measure.tile.collect import kernel_configs  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec, build_kernel  # noqa: E402
from cost_model.measure.tile.space import TileConfig, TileSpace  # noqa: E402
from passes.autotune.search import tune_candidates  # noqa: E402

from test_gbdt_predictor import TRAIN_SHAPES, _record, _seconds  # noqa: E402  (same folder, rootdir-relative import mode)

MEMBERS = (("rank", 0, 50), ("relative", 0, None), ("rank", 1000, None))


@pytest.fixture(scope="module")
def records() -> list[KernelRecord]:
    return [_record(KernelSpec("matmul", dims), 100, seed) for seed, dims in enumerate(TRAIN_SHAPES)]


def _saved(records: list[KernelRecord], folder, prefix: str = "k"):  # type: ignore[no-untyped-def]
    """`records` written to `folder` as a tile dataset (one `.npz` a kernel, named `prefix` + index); the folder."""
    from cost_model.learned.tpugraphs import save_npz

    for i, record in enumerate(records):
        save_npz(record, folder / f"{prefix}{i}.npz")
    return folder


@pytest.fixture(scope="module")
def ranker(records: list[KernelRecord]) -> GbdtEnsembleTilePredictor:
    return GbdtEnsembleTilePredictor.train(records, members=MEMBERS, seed=0, rounds=120, depth=6)


def test_the_tuner_with_the_ensemble_finds_the_known_best(ranker: GbdtEnsembleTilePredictor) -> None:
    assert [m.gbdt.objective for m in ranker.members] == ["rank", "relative", "rank"]
    space = TileSpace(build_kernel(KernelSpec("matmul", (64, 64, 64))))  # a shape it never trained on
    candidates = kernel_configs(space, 123, 200)
    truth = {c.text(): _seconds(space, c) for c in candidates}
    outcome = tune_candidates(candidates, rank=lambda cs: ranker.rank(space, cs), measure=lambda cs: [truth[c.text()] for c in cs], top_k=5)
    assert outcome.best_seconds == pytest.approx(min(truth.values()), rel=1e-12)


def test_the_ensemble_is_the_weighted_sum_of_z_scored_members(records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor) -> None:
    r = records[2]
    scores = [m.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for m in ranker.members]
    expected = sum((s - s.mean()) / s.std() for s in scores)
    np.testing.assert_allclose(ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat), expected, rtol=1e-9)


def test_save_load_round_trip_and_finetune(tmp_path, records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    path = ranker.save(tmp_path / "ens.json", extra={"note": "test"})
    loaded = load_tile_ranker("gbdt-ens", path)
    assert isinstance(loaded, GbdtEnsembleTilePredictor)
    assert loaded.extra["note"] == "test" and loaded.extra["train"]["members"] == [list(m) for m in MEMBERS]
    r = records[1]
    before = loaded.rank_rows(r.node_feat, r.node_opcode, r.config_feat)
    np.testing.assert_array_equal(before, ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat))
    space = TileSpace(build_kernel(KernelSpec("matmul", TRAIN_SHAPES[1])))
    configs = [TileConfig.from_text(t) for t in r.config_text[:8]]
    rounds = [m.gbdt.num_rounds() for m in loaded.members]
    loaded.finetune(space, configs, r.config_runtime[:8], steps=5)
    assert [m.gbdt.num_rounds() for m in loaded.members] == [n + 5 for n in rounds]
    after = loaded.rank_rows(r.node_feat, r.node_opcode, r.config_feat)
    assert not np.array_equal(before, after)
    again = GbdtEnsembleTilePredictor.load(loaded.save(tmp_path / "tuned.json"))
    np.testing.assert_array_equal(again.rank_rows(r.node_feat, r.node_opcode, r.config_feat), after)
    assert again.extra["finetune_rounds"] == 5


def test_uncompressed_members_of_older_files_still_load(tmp_path, records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(ranker.save(tmp_path / "new.json").read_text(encoding="utf-8"))
    for entry in doc["members"]:  # the format written before the nineteenth session
        entry["ubj"] = base64.b64encode(zlib.decompress(base64.b64decode(entry.pop("ubj_zlib")))).decode()
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    rows = records[0]
    np.testing.assert_array_equal(GbdtEnsembleTilePredictor.load(old).rank_rows(rows.node_feat, rows.node_opcode, rows.config_feat),
                                  ranker.rank_rows(rows.node_feat, rows.node_opcode, rows.config_feat))


def test_bad_files_are_refused(tmp_path, monkeypatch, ranker: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff not json")
    with pytest.raises(DatasetError, match="garbage.json"):
        GbdtEnsembleTilePredictor.load(garbage)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something/1"}), encoding="utf-8")
    with pytest.raises(DatasetError, match="other.json.*not a compiler-opt GBDT ensemble"):
        GbdtEnsembleTilePredictor.load(other)
    doc = json.loads(ranker.save(tmp_path / "ok.json").read_text(encoding="utf-8"))
    packed = doc["members"][1]["ubj_zlib"]
    broken = tmp_path / "broken.json"
    for bad, message in ((base64.b64encode(zlib.compress(b"not a model")).decode(), "member 1"),
                         ("bm90IGEgbW9kZWw=", "member 1.*Error -3"),  # base64 of "not a model", not zlib
                         (base64.b64encode(base64.b64decode(packed)[:-100]).decode(), "member 1.*truncated")):
        doc["members"][1]["ubj_zlib"] = bad
        broken.write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(DatasetError, match=f"broken.json.*{message}"):
            GbdtEnsembleTilePredictor.load(broken)
    doc["members"][1]["ubj_zlib"] = packed
    broken.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(gbdt_ensemble, "MAX_MEMBER_BYTES", 1000)  # a member that would inflate past the cap is refused, not inflated
    with pytest.raises(DatasetError, match="broken.json.*member 0.*inflates past"):
        GbdtEnsembleTilePredictor.load(broken)
    with pytest.raises(DatasetError, match="missing.json"):
        load_tile_ranker("gbdt-ens", tmp_path / "missing.json")
    with pytest.raises(ValueError, match="weights"):
        GbdtEnsembleTilePredictor(ranker.members, [1.0])


def test_costmodel_train_gbdt_ens_writes_a_loadable_ranker(tmp_path, records: list[KernelRecord]) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import MEMBERS as SHIPPED_MEMBERS
    from compiler_opt.cli.main import main

    data = _saved(records, tmp_path / "data")
    out = tmp_path / "ens.json"
    assert main(["costmodel", "train", str(data), "-o", str(out), "--model", "gbdt-ens", "--split", "program", "--test-fraction", "0.3"]) == 0
    loaded = load_tile_ranker("gbdt-ens", out)
    report = loaded.extra
    assert report["train_config"]["model"] == "gbdt-ens" and report["train_kernels"] + report["test_kernels"] == len(records)
    assert [[m.gbdt.objective, m.gbdt.seed, m.gbdt.rank_pairs] for m in loaded.members] == [[o, s, p] for o, s, p in SHIPPED_MEMBERS]
    assert 0.0 <= report["metrics"]["test"]["top5"] < 0.5 and report["metrics"]["train"]["kendall"] > 0.5


def test_costmodel_train_split_all_fits_every_kernel(tmp_path, records: list[KernelRecord], capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    data = _saved(records, tmp_path / "data")
    out = tmp_path / "all.json"
    assert main(["costmodel", "train", str(data), "-o", str(out), "--model", "gbdt-ens", "--split", "all"]) == 0
    report = load_tile_ranker("gbdt-ens", out).extra
    assert report["train_kernels"] == len(records) and report["test_kernels"] == 0 and report["metrics"]["test"] == {}
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "gnn.pt"), "--model", "gnn", "--split", "all"]) == 2
    assert "--split all applies to the tile rankers" in capsys.readouterr().err and not (tmp_path / "gnn.pt").exists()


def test_costmodel_train_gbdt_members_and_depth(tmp_path, records: list[KernelRecord], capsys) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import parse_members
    from compiler_opt.cli.main import main

    from cost_model.learned.gbdt_ensemble import member_weights

    assert parse_members("rank") == (("rank", 0, 50),)
    assert parse_members("rank, relative,rank") == (("rank", 0, 50), ("relative", 0, None), ("rank", 1, 50))
    assert parse_members("rank,ndcg:0.5") == (("rank", 0, 50), ("ndcg", 0, 50)) and member_weights("rank,ndcg:0.5") == (1.0, 0.5)
    data = _saved(records, tmp_path / "data")
    out = tmp_path / "ens.json"
    common = ["costmodel", "train", str(data), "-o", str(out), "--model", "gbdt-ens", "--split", "random", "--test-fraction", "0.25"]
    assert main([*common, "--gbdt-members", "rank,rank", "--gbdt-depth", "4"]) == 0
    loaded = load_tile_ranker("gbdt-ens", out)
    assert [[m.gbdt.objective, m.gbdt.seed, m.gbdt.rank_pairs, m.gbdt.depth] for m in loaded.members] == [["rank", 0, 50, 4], ["rank", 1, 50, 4]]
    assert loaded.extra["train_config"]["members"] == [["rank", 0, 50], ["rank", 1, 50]] and loaded.extra["train_config"]["depth"] == 4
    capsys.readouterr()
    for bad, message in ((["--gbdt-members", "rank,lambdamart"], "unknown member 'lambdamart'"), (["--gbdt-members", ","], "no members given"),
                         (["--gbdt-members", "rank,ndcg:x"], "weight 'x' is not a number"), (["--gbdt-members", "rank:0"], "a positive number"),
                         (["--gbdt-depth", "0"], "a tree depth from 1 to 16, got 0")):
        out.unlink(missing_ok=True)
        assert main([*common, *bad]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    assert main(["costmodel", "train", str(data), "-o", str(out), "--model", "gnn", "--gbdt-depth", "8"]) == 2
    assert "--gbdt-depth only apply to --model gbdt-ens" in capsys.readouterr().err
    single = tmp_path / "single.ubj"  # the plain gbdt model takes a depth too
    assert main(["costmodel", "train", str(data), "-o", str(single), "--model", "gbdt", "--gbdt-depth", "3"]) == 0
    assert load_tile_ranker("gbdt", single).gbdt.depth == 3 and load_tile_ranker("gbdt", single).extra["train_config"]["depth"] == 3
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "bad.ubj"), "--model", "gbdt", "--gbdt-depth", "17"]) == 2
    assert "a tree depth from 1 to 16, got 17" in capsys.readouterr().err and not (tmp_path / "bad.ubj").exists()


def test_costmodel_evaluate_scores_tile_rankers(tmp_path, records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor, capsys) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_predictor import GbdtTilePredictor
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from compiler_opt.cli.main import main

    data = _saved(records, tmp_path / "data")
    single = GbdtTilePredictor.train(records, rounds=30)
    for model, path in ((ranker, tmp_path / "ens.json"), (single, tmp_path / "rank.ubj")):
        model.save(path)
        capsys.readouterr()
        assert main(["costmodel", "evaluate", str(path), str(data), "--split", "all"]) == 0
        report = json.loads(capsys.readouterr().out)
        want = mean_metrics(kernel_metrics(model.rank_rows(r.node_feat, r.node_opcode, r.config_feat), r.config_runtime) for r in records)
        assert report["model_kind"] == ("gbdt-ens" if path.suffix == ".json" else "gbdt")
        assert report["metrics"] == pytest.approx({k: v for k, v in want.items() if k != "mape"})
    # this ranker reads no code features: a cache given anyway is refused, not ignored
    assert main(["costmodel", "evaluate", str(tmp_path / "ens.json"), str(data), "--code-features", str(tmp_path)]) == 2
    assert "reads no compiled-code features" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something/1"}), encoding="utf-8")
    assert main(["costmodel", "evaluate", str(other), str(data)]) == 2
    assert "other.json: a .json model must be an additive fusion model" in capsys.readouterr().err


def test_costmodel_train_extra_data_joins_the_training_side_only(tmp_path, records: list[KernelRecord]) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    data, more = _saved(records[:4], tmp_path / "data"), _saved(records[4:], tmp_path / "more", "m")
    plain, added = tmp_path / "plain.json", tmp_path / "added.json"
    common = ["--model", "gbdt-ens", "--split", "random", "--test-fraction", "0.25"]
    assert main(["costmodel", "train", str(data), "-o", str(plain), *common]) == 0
    assert main(["costmodel", "train", str(data), "-o", str(added), *common, "--extra-data", str(more)]) == 0
    without, with_more = load_tile_ranker("gbdt-ens", plain).extra, load_tile_ranker("gbdt-ens", added).extra
    assert with_more["extra_kernels"] == len(records) - 4 and with_more["extra_data"] == ["more"]
    assert with_more["train_kernels"] == without["train_kernels"] + len(records) - 4
    assert with_more["test_kernels"] == without["test_kernels"]  # the same test kernels: extra ones never test
    # with code features every extra folder needs its cache
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "x.json"), *common, "--code-features", str(tmp_path / "c"),
                 "--extra-data", str(more)]) == 2


@pytest.mark.parametrize("model, suffix", [("gbdt", ".ubj"), ("gnn", ".pt")])
def test_costmodel_train_extra_data_for_the_code_blind_models(tmp_path, records: list[KernelRecord], model: str, suffix: str) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    data, more = _saved(records[:4], tmp_path / "data"), _saved(records[4:], tmp_path / "more", "m")
    common = ["--model", model, "--split", "random", "--test-fraction", "0.25"] + (["--epochs", "2", "--hidden", "8", "--layers", "1", "--mse-weight", "0.5"]
                                                                                  if model == "gnn" else [])
    plain, added = tmp_path / f"plain{suffix}", tmp_path / f"added{suffix}"
    assert main(["costmodel", "train", str(data), "-o", str(plain), *common]) == 0
    assert main(["costmodel", "train", str(data), "-o", str(added), *common, "--extra-data", str(more)]) == 0
    without, with_more = load_tile_ranker(model, plain).extra, load_tile_ranker(model, added).extra
    assert with_more["extra_kernels"] == len(records) - 4 and with_more["extra_data"] == ["more"]
    assert with_more["train_kernels"] == without["train_kernels"] + len(records) - 4
    assert with_more["test_kernels"] == without["test_kernels"]
    if model == "gnn":
        assert with_more["train_config"]["mse_weight"] == 0.5 and "best_seconds_error" in with_more["metrics"]["test"]


def test_costmodel_train_refuses_gbdt_ens_options_for_other_models(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    # another model would ignore them silently and train on less than the user asked for
    from compiler_opt.cli.main import main

    for model in ("gbdt", "gnn", "additive"):
        out = tmp_path / f"{model}.out"
        assert main(["costmodel", "train", str(tmp_path), "-o", str(out), "--model", model, "--extra-code-features", str(tmp_path)]) == 2
        assert f"--extra-code-features only apply to --model gbdt-ens (got --model {model})" in capsys.readouterr().err
        assert not out.exists()
    out = tmp_path / "additive.json"  # extra tile kernels mean nothing to the fusion model
    assert main(["costmodel", "train", str(tmp_path), "-o", str(out), "--model", "additive", "--extra-data", str(tmp_path)]) == 2
    assert "--extra-data only applies to the tile models" in capsys.readouterr().err
    assert not out.exists()
    for model in ("gbdt", "gbdt-ens", "additive"):  # only GraphSAGE has an MSE term to weigh
        assert main(["costmodel", "train", str(tmp_path), "-o", str(tmp_path / "m.out"), "--model", model, "--mse-weight", "1"]) == 2
        assert f"--mse-weight only applies to --model gnn (got --model {model})" in capsys.readouterr().err
    assert main(["costmodel", "train", str(tmp_path), "-o", str(tmp_path / "g.ubj"), "--model", "gbdt", "--code-features", "c",
                 "--code-feature-set", "nest"]) == 2
    assert "--code-features, --code-feature-set only apply" in capsys.readouterr().err


def test_rank_pairs_option_and_files_without_it() -> None:
    from cost_model.learned.baselines import GbdtBaseline
    from cost_model.learned.gbdt_predictor import GbdtTilePredictor

    assert GbdtBaseline(objective="rank", rank_pairs=50).params()["lambdarank_num_pair_per_sample"] == 50
    assert "lambdarank_num_pair_per_sample" not in GbdtBaseline(objective="rank").params()  # XGBoost's default (top 32)
    with pytest.raises(ValueError, match="rank_pairs"):
        GbdtBaseline(objective="relative", rank_pairs=50)
    shipped = GbdtTilePredictor.packaged()  # trained without rank_pairs (XGBoost's default pairs): loads with the default
    assert shipped.gbdt.rank_pairs is None and shipped.gbdt.objective == "rank"


def test_the_default_tile_ranker_and_the_one_a_file_names() -> None:
    assert DEFAULT_TILE_RANKER == "gbdt-ens" and tile_ranker_for() == "gbdt-ens"
    assert [tile_ranker_for(p) for p in ("m.pt", "m.UBJ", "dir/m.json")] == ["gnn", "gbdt", "gbdt-ens"]
    assert tile_ranker_for("m.pt", "gbdt") == "gbdt"  # a named ranker wins over the suffix
    with pytest.raises(ValueError, match="suffix"):
        tile_ranker_for("model.bin")
    assert isinstance(load_tile_ranker(tile_ranker_for()), GbdtEnsembleTilePredictor)  # the packaged default loads


def test_costmodel_train_warm_from_continues_a_ranker(tmp_path, records: list[KernelRecord], capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    data = _saved(records, tmp_path / "data")
    start, warm = tmp_path / "start.json", tmp_path / "warm.json"
    common = ["--model", "gbdt-ens", "--split", "all", "--gbdt-depth", "4"]
    assert main(["costmodel", "train", str(data), "-o", str(start), *common]) == 0
    assert main(["costmodel", "train", str(data), "-o", str(warm), *common, "--warm-from", str(start)]) == 0
    first, second = load_tile_ranker("gbdt-ens", start), load_tile_ranker("gbdt-ens", warm)
    rounds = first.members[0].gbdt.num_rounds()
    assert second.members[0].gbdt.num_rounds() == 2 * rounds  # the start's trees + as many new ones
    assert second.members[0].gbdt.booster.num_boosted_rounds() == rounds  # the file stores the new ones beside a copy of the start's
    assert second.extra["train_config"]["warm_from"]["file"] == "start.json"
    capsys.readouterr()
    # a start of other members or other columns is refused before anything is written
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "x.json"), *common, "--gbdt-members", "rank,relative", "--warm-from", str(start)]) != 0
    assert not (tmp_path / "x.json").exists()
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "y.ubj"), "--model", "gbdt", "--warm-from", str(start)]) == 2
    assert "--warm-from" in capsys.readouterr().err and not (tmp_path / "y.ubj").exists()


def test_costmodel_train_rank_and_ndcg_members_from_a_one_member_start(tmp_path, records: list[KernelRecord]) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    data = _saved(records, tmp_path / "data")
    start, both = tmp_path / "start.json", tmp_path / "both.json"
    common = ["--model", "gbdt-ens", "--split", "all", "--gbdt-depth", "4"]
    assert main(["costmodel", "train", str(data), "-o", str(start), *common, "--gbdt-members", "rank"]) == 0  # one member
    assert main(["costmodel", "train", str(data), "-o", str(both), *common, "--gbdt-members", "rank,ndcg:0.5", "--warm-from", str(start)]) == 0
    first, ranker = load_tile_ranker("gbdt-ens", start), load_tile_ranker("gbdt-ens", both)
    assert [m.gbdt.objective for m in ranker.members] == ["rank", "ndcg"] and ranker.weights == [1.0, 0.5]
    rounds = first.members[0].gbdt.num_rounds()
    assert [m.gbdt.num_rounds() for m in ranker.members] == [2 * rounds, 2 * rounds]  # each continues the start's trees
    assert ranker.members[0].gbdt.start is ranker.members[1].gbdt.start  # one start, stored once
    assert ranker.extra["train_config"]["weights"] == [1.0, 0.5]
    r = records[1]
    scores = [m.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for m in ranker.members]
    expected = sum(w * (s - s.mean()) / s.std() for w, s in zip((1.0, 0.5), scores))
    np.testing.assert_allclose(ranker.rank_rows(r.node_feat, r.node_opcode, r.config_feat), expected, rtol=1e-9)


def test_kind_weights_rank_a_kind_by_its_own_member_weights(tmp_path, records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    r = records[3]
    scores = [m.rank_rows(r.node_feat, r.node_opcode, r.config_feat) for m in ranker.members]
    z = [(s - s.mean()) / s.std() for s in scores]
    by_kind = GbdtEnsembleTilePredictor(ranker.members, ranker.weights, ranker.extra, kind_weights={"matmul": (1.0, 0.0, 2.0)})
    np.testing.assert_allclose(by_kind.rank_rows(r.node_feat, r.node_opcode, r.config_feat, kind="matmul"), z[0] + 2 * z[2], rtol=1e-9)
    np.testing.assert_allclose(by_kind.predict(r), z[0] + 2 * z[2], rtol=1e-9)  # a record's kind comes from its meta
    for kind in (None, "reduce"):  # no kind, or one without its own weights: the ensemble's weights
        np.testing.assert_allclose(by_kind.rank_rows(r.node_feat, r.node_opcode, r.config_feat, kind=kind), sum(z), rtol=1e-9)
    space = TileSpace(build_kernel(KernelSpec("matmul", (64, 64, 64))))
    configs = kernel_configs(space, 5, 20)
    np.testing.assert_allclose(by_kind.rank(space, configs),
                               GbdtEnsembleTilePredictor(ranker.members, [1.0, 0.0, 2.0], ranker.extra).rank(space, configs), rtol=1e-9)
    loaded = GbdtEnsembleTilePredictor.load(by_kind.save(tmp_path / "kinds.json"))
    assert loaded.kind_weights == {"matmul": [1.0, 0.0, 2.0]}
    assert "kind_weights" not in json.loads(ranker.save(tmp_path / "plain.json").read_text())  # files without them are as before
    for bad, message in (({"convolution": (1, 1, 1)}, "unknown kernel kind 'convolution'"), ({"matmul": (1, 1)}, "2 weights for 3 members"),
                         ({"matmul": (0, 0, 0)}, "not all 0"), ({"matmul": (1, -1, 0)}, ">= 0")):
        with pytest.raises(ValueError, match=message):
            GbdtEnsembleTilePredictor(ranker.members, kind_weights=bad)
    doc = json.loads((tmp_path / "kinds.json").read_text())
    doc["kind_weights"] = {"matmul": [1.0, "x", 0.0]}
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(DatasetError, match="bad member weights") as caught:
        GbdtEnsembleTilePredictor.load(tmp_path / "bad.json")
    assert "bad.json" in str(caught.value)


def test_costmodel_train_gbdt_kind_weights(tmp_path, records: list[KernelRecord], capsys) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.gbdt_ensemble import parse_kind_weights
    from compiler_opt.cli.main import main

    assert parse_kind_weights("conv2d_nchw=1,0; conv2d_nhwc=1,0.5") == {"conv2d_nchw": (1.0, 0.0), "conv2d_nhwc": (1.0, 0.5)}
    assert parse_kind_weights("") == {}
    data = _saved(records, tmp_path / "data")
    out = tmp_path / "ens.json"
    common = ["costmodel", "train", str(data), "-o", str(out), "--model", "gbdt-ens", "--split", "all", "--gbdt-depth", "3"]
    assert main([*common, "--gbdt-members", "rank,ndcg:0.5", "--gbdt-kind-weights", "matmul=1,0"]) == 0
    loaded = load_tile_ranker("gbdt-ens", out)
    assert loaded.kind_weights == {"matmul": [1.0, 0.0]} and loaded.extra["train_config"]["kind_weights"] == {"matmul": [1.0, 0.0]}
    capsys.readouterr()
    for bad, message in (("matmul=1", "1 weights for 2 members"), ("matmul", "expected KIND=W1,W2"), ("conv=1,0", "unknown kernel kind 'conv'"),
                         ("matmul=1,x", "are not numbers")):
        out.unlink(missing_ok=True)
        assert main([*common, "--gbdt-members", "rank,ndcg", "--gbdt-kind-weights", bad]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "g.ubj"), "--model", "gbdt", "--gbdt-kind-weights", "matmul=1"]) == 2
    assert "--gbdt-kind-weights" in capsys.readouterr().err


def test_shipped_recipe_ranker_fits_the_default_members_and_continues_any_ensemble(records: list[KernelRecord], ranker: GbdtEnsembleTilePredictor) -> None:
    """`make_tile_ranker("shipped-recipe")` is `train`'s default members and weights; its warm fit continues every
    member of a three-member start from that start's member at its place (forty-seventh session)."""
    from cost_model.learned.tile_rankers import make_tile_ranker

    recipe = make_tile_ranker("shipped-recipe", seed=0)
    recipe.rounds, recipe.depth = 40, 4
    with pytest.raises(RuntimeError, match="fit"):
        recipe.predict(records[0])
    cold = recipe.fit(records[:6]).model
    assert [tuple(m) for m in cold.extra["train"]["members"]] == [tuple(m) for m in gbdt_ensemble.MEMBERS]
    assert cold.weights == list(gbdt_ensemble.MEMBER_WEIGHTS)
    np.testing.assert_allclose(recipe.predict(records[7]), cold.predict(records[7]))
    start = GbdtEnsembleTilePredictor.train(records, members=(("rank", 0, 50), ("ndcg", 0, 50)), seed=0, rounds=30, depth=4)
    warm = make_tile_ranker("shipped-recipe", seed=0)
    warm.rounds, warm.depth = 40, 4
    warm.fit(records[:6], init=start)
    assert [m.gbdt.num_rounds() for m in warm.model.members] == [70, 70]
    assert [m.gbdt.start for m in warm.model.members] == [m.gbdt for m in start.members]
    assert not np.allclose(warm.predict(records[7]), cold.predict(records[7]))


def test_shipped_recipe_ranker_reads_a_code_feature_block(records: list[KernelRecord]) -> None:
    """Records whose config features end with a compiled-code block (35 columns of s18) fit when the ranker is told
    the set, and the file it makes says so; untold, the width check refuses them (the bug the first test B run hit)."""
    from dataclasses import replace

    from cost_model.learned.tile_code_features import code_feature_set_width
    from cost_model.learned.tile_rankers import ShippedRecipe

    width = code_feature_set_width("s18")
    rng = np.random.default_rng(0)
    extended = [replace(r, config_feat=np.concatenate([r.config_feat, rng.normal(size=(r.num_configs, width))], axis=1).astype(np.float32)) for r in records[:6]]
    told = ShippedRecipe(rounds=20, depth=3, code_feature_set="s18").fit(extended)
    assert told.model.extra["code_features"] and told.model.extra["code_feature_set"] == "s18"
    assert told.predict(extended[0]).shape == (extended[0].num_configs,)
    with pytest.raises(ValueError, match="config features"):
        ShippedRecipe(rounds=20, depth=3).fit(extended)
