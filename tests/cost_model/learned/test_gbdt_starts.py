"""A warm start's trees kept apart from the trees fitted on top of them (forty-second session): scores equal to one
booster of all the trees, a start stored once however many members continue it, or as a checked reference to the
file it came from; files fitted before (each member a copy of the start) converted without a score changing."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("xgboost")
pytest.importorskip("tvm")

from cost_model.learned.baselines import GbdtBaseline, concat_boosters, flat_features  # noqa: E402
from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor, link_start  # noqa: E402
from cost_model.learned.tpugraphs import DatasetError, KernelRecord  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec  # noqa: E402

from test_gbdt_predictor import TRAIN_SHAPES, _record  # noqa: E402  (same folder, rootdir-relative import mode)

TWO = (("rank", 0, 50), ("ndcg", 0, 50))


@pytest.fixture(scope="module")
def records() -> list[KernelRecord]:
    return [_record(KernelSpec("matmul", dims), 60, seed) for seed, dims in enumerate(TRAIN_SHAPES)]


@pytest.fixture(scope="module")
def start(records: list[KernelRecord]) -> GbdtEnsembleTilePredictor:
    return GbdtEnsembleTilePredictor.train(records[:4], members=(("rank", 0, 50),), rounds=40, depth=4)


def _scores(ranker: GbdtEnsembleTilePredictor, records: list[KernelRecord]) -> np.ndarray:
    return np.concatenate([ranker.predict(r) for r in records])


def _flattened(ranker: GbdtEnsembleTilePredictor) -> GbdtEnsembleTilePredictor:
    """`ranker` as files before the forty-second session held it: each member one booster of every tree."""
    for member in ranker.members:
        member.gbdt.booster, member.gbdt.start = member.gbdt.flat_booster(), None
    return ranker


def test_a_layered_model_scores_as_one_booster_of_all_its_trees(records: list[KernelRecord]) -> None:
    import xgboost as xgb

    first = GbdtBaseline(objective="rank", rounds=30, depth=4).fit(records[:4])
    second = GbdtBaseline(objective="ndcg", rank_pairs=50, rounds=20, depth=4).fit(records[4:], init=first)
    third = GbdtBaseline(objective="rank", rounds=10, depth=4).fit(records[:3], init=second)  # a start that has its own start
    assert third.start is second and second.start is first and third.num_rounds() == 60
    assert [b.num_boosted_rounds() for b in third.boosters()] == [30, 20, 10]
    flat = third.flat_booster()
    assert flat.num_boosted_rounds() == 60
    for r in records:
        x = third._pad(flat_features(r))
        np.testing.assert_allclose(third.margin(x), flat.predict(xgb.DMatrix(x), output_margin=True), rtol=0, atol=1e-5)
    joined = concat_boosters(first.booster, second.booster)
    x = first._pad(flat_features(records[0]))
    np.testing.assert_allclose(second.margin(x), joined.predict(xgb.DMatrix(x), output_margin=True), rtol=0, atol=1e-5)


def test_an_update_grows_only_the_new_trees(records: list[KernelRecord], start: GbdtEnsembleTilePredictor) -> None:
    model = GbdtBaseline(objective="rank", rank_pairs=50, rounds=20, depth=4).fit(records[4:], init=start.members[0].gbdt)
    base = model.start
    x = base._pad(flat_features(records[5]))
    before_start, before = base.margin(x), model.predict(records[5])
    model.origin = ("somewhere.json", 0, "0" * 64)
    model.update(flat_features(records[5]), records[5].config_runtime, 5)
    assert model.num_rounds() == 65 and model.booster.num_boosted_rounds() == 25
    np.testing.assert_array_equal(base.margin(x), before_start)  # the start is not touched
    assert not np.allclose(model.predict(records[5]), before) and model.origin is None  # and the model is no longer the stored one


def test_members_that_continue_one_start_store_it_once(tmp_path, records: list[KernelRecord], start: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    ranker = GbdtEnsembleTilePredictor.train(records[4:], members=TWO, rounds=20, depth=4, init=start, weights=(1.0, 0.5))
    assert ranker.members[0].gbdt.start is ranker.members[1].gbdt.start is start.members[0].gbdt
    once = ranker.save(tmp_path / "once.json")
    doc = json.loads(once.read_text())
    assert len(doc["starts"]) == 1 and [m["start"] for m in doc["members"]] == [0, 0]
    loaded = GbdtEnsembleTilePredictor.load(once)
    assert loaded.members[0].gbdt.start is loaded.members[1].gbdt.start
    np.testing.assert_array_equal(_scores(loaded, records), _scores(ranker, records))
    copies = _flattened(GbdtEnsembleTilePredictor.load(once)).save(tmp_path / "copies.json")  # the form before
    np.testing.assert_allclose(_scores(GbdtEnsembleTilePredictor.load(copies), records), _scores(ranker, records), rtol=0, atol=1e-5)
    assert once.stat().st_size < 0.8 * copies.stat().st_size


def test_a_linked_start_is_read_from_its_file_and_checked(tmp_path, records: list[KernelRecord], start: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "models"
    folder.mkdir()
    start_file = start.save(folder / "start.json")
    loaded_start = GbdtEnsembleTilePredictor.load(start_file)
    ranker = GbdtEnsembleTilePredictor.train(records[4:], members=TWO, rounds=20, depth=4, init=loaded_start)
    linked = ranker.save(folder / "linked.json", link_starts=True)
    copied = ranker.save(folder / "copied.json")
    doc = json.loads(linked.read_text())
    assert doc["starts"] == [{"file": "start.json", "member": 0, "sha256": doc["starts"][0]["sha256"]}]
    assert linked.stat().st_size < 0.7 * copied.stat().st_size
    expected = _scores(ranker, records)
    np.testing.assert_array_equal(_scores(GbdtEnsembleTilePredictor.load(linked), records), expected)
    # both files moved together: still found (the name is relative)
    moved = tmp_path / "elsewhere"
    shutil.copytree(folder, moved)
    np.testing.assert_array_equal(_scores(GbdtEnsembleTilePredictor.load(moved / "linked.json"), records), expected)
    # the start missing, or changed since: refused, naming both files
    (moved / "start.json").unlink()
    with pytest.raises(DatasetError, match=r"linked.json.*start.json.*neither beside"):
        GbdtEnsembleTilePredictor.load(moved / "linked.json")
    GbdtEnsembleTilePredictor.train(records[:3], members=(("rank", 0, 50),), rounds=40, depth=4, seed=5).save(folder / "start.json")
    with pytest.raises(DatasetError, match=r"start.json has changed"):
        GbdtEnsembleTilePredictor.load(linked)
    # files that refer to each other are refused, not followed forever
    a, b = json.loads(copied.read_text()), None
    a["starts"] = [{"file": "b.json", "member": 0, "sha256": "0" * 64}]
    b = dict(a, starts=[{"file": "a.json", "member": 0, "sha256": "0" * 64}])
    (folder / "a.json").write_text(json.dumps(a))
    (folder / "b.json").write_text(json.dumps(b))
    with pytest.raises(DatasetError, match=r"a.json: warm start 0 .*a cycle of warm starts"):
        GbdtEnsembleTilePredictor.load(folder / "a.json")
    # a reference is a relative name of a readable ranker file; `starts` a list of objects
    (folder / "junk.txt").write_text("not json")
    for starts, message in ((5, "'starts' must be a list"), ([3], "'starts' must be a list"),
                            ([dict(a["starts"][0], file="/etc/hostname")], "must be a file name relative to this file"),
                            ([dict(a["starts"][0], file="junk.txt")], r"its trees are in junk.txt, which is not readable: .*junk.txt: cannot read"),
                            ([dict(a["starts"][0], member="0")], "'member' must be an integer"),
                            ([{"file": "b.json", "member": 0}], "missing field 'sha256'")):
        (folder / "c.json").write_text(json.dumps(dict(a, starts=starts)))
        with pytest.raises(DatasetError, match=message):
            GbdtEnsembleTilePredictor.load(folder / "c.json")
    bad = dict(a, starts=[], members=[dict(a["members"][0], start=3)])
    (folder / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(DatasetError, match=r"member 0 .*start 3 is not one of the 0"):
        GbdtEnsembleTilePredictor.load(folder / "bad.json")


def test_link_start_converts_a_file_of_copies_without_changing_a_score(tmp_path, records: list[KernelRecord],
                                                                        start: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    start_file = start.save(tmp_path / "start.json")
    ranker = GbdtEnsembleTilePredictor.train(records[4:], members=TWO, rounds=20, depth=4, init=GbdtEnsembleTilePredictor.load(start_file))
    old = _flattened(ranker).save(tmp_path / "old.json")
    expected = _scores(GbdtEnsembleTilePredictor.load(old), records)
    assert main(["costmodel", "link-start", str(old), "--start", str(start_file), "-o", str(tmp_path / "new.json")]) == 0
    new = GbdtEnsembleTilePredictor.load(tmp_path / "new.json")
    np.testing.assert_array_equal(_scores(new, records), expected)
    assert [m.gbdt.num_rounds() for m in new.members] == [60, 60] and (tmp_path / "new.json").stat().st_size < 0.7 * old.stat().st_size
    # not fitted on top of that start: refused, the file left as it is
    other = GbdtEnsembleTilePredictor.train(records[:3], members=(("rank", 0, 50),), rounds=40, depth=4, seed=9).save(tmp_path / "other.json")
    before = old.read_bytes()
    assert main(["costmodel", "link-start", str(old), "--start", str(other)]) == 1
    assert old.read_bytes() == before
    with pytest.raises(ValueError, match="member 0's first 40 trees are not the start's"):
        link_start(GbdtEnsembleTilePredictor.load(old), GbdtEnsembleTilePredictor.load(other))
    with pytest.raises(ValueError, match="already stored on top of a warm start"):
        link_start(new, GbdtEnsembleTilePredictor.load(start_file))


def test_costmodel_train_link_warm_start(tmp_path, records: list[KernelRecord], capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main
    from cost_model.learned.tpugraphs import save_npz

    data = tmp_path / "data"
    data.mkdir()
    for i, record in enumerate(records):
        save_npz(record, data / f"k{i}.npz")
    common = ["--model", "gbdt-ens", "--split", "all", "--gbdt-depth", "4"]
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "start.json"), *common, "--gbdt-members", "rank"]) == 0
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "warm.json"), *common, "--warm-from", str(tmp_path / "start.json"),
                 "--link-warm-start"]) == 0
    doc = json.loads((tmp_path / "warm.json").read_text())
    assert [s["file"] for s in doc["starts"]] == ["start.json"] and [m["start"] for m in doc["members"]] == [0, 0]
    capsys.readouterr()
    assert main(["costmodel", "train", str(data), "-o", str(tmp_path / "x.json"), *common, "--link-warm-start"]) == 2
    assert "give --warm-from" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_the_shipped_host_ranker_reads_its_start_from_the_shipped_files() -> None:
    """The package stores each warm start once, by reference to the shipped file it came from."""
    from cost_model.learned.gbdt_ensemble import PACKAGED_GBDT_ENSEMBLE

    for path in sorted(PACKAGED_GBDT_ENSEMBLE.parent.glob("tile_gbdt_ens*.json")):
        doc = json.loads(path.read_text())
        for entry in doc.get("starts", []):
            assert "file" in entry and (path.parent / entry["file"]).is_file(), path.name
        ranker = GbdtEnsembleTilePredictor.load(path)
        for member in ranker.members:  # a member stored on a start scores with more rounds than it holds itself
            assert (member.gbdt.start is not None) == bool(doc.get("starts")), path.name
            assert member.gbdt.start is None or member.gbdt.num_rounds() > member.gbdt.booster.num_boosted_rounds(), path.name


def test_a_fine_tuned_linked_ranker_saves_whole(tmp_path, records: list[KernelRecord], start: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    """What `autotune --finetune --save-model` writes from a linked file: every tree in it (no reference), so it loads
    anywhere, and the start it came from is untouched."""
    folder = tmp_path / "package"
    folder.mkdir()
    start.save(folder / "start.json")
    GbdtEnsembleTilePredictor.train(records[4:], members=TWO, rounds=20, depth=4,
                                    init=GbdtEnsembleTilePredictor.load(folder / "start.json")).save(folder / "linked.json", link_starts=True)
    ranker = GbdtEnsembleTilePredictor.load(folder / "linked.json")
    r = records[6]
    for member in ranker.members:
        member.gbdt.update(flat_features(r), r.config_runtime, 3)
    saved = ranker.save(tmp_path / "tuned.json")
    doc = json.loads(saved.read_text())
    assert all("file" not in entry for entry in doc["starts"]) and len(doc["starts"]) == 1
    shutil.rmtree(folder)
    again = GbdtEnsembleTilePredictor.load(saved)
    np.testing.assert_array_equal(_scores(again, records), _scores(ranker, records))
    assert [m.gbdt.num_rounds() for m in again.members] == [63, 63]


def test_a_file_written_over_its_own_start_keeps_the_trees(tmp_path, records: list[KernelRecord], start: GbdtEnsembleTilePredictor) -> None:  # type: ignore[no-untyped-def]
    """`costmodel train --warm-from x.json -o x.json --link-warm-start`: a reference to the file being replaced would
    point at trees that are gone, so the start is stored whole."""
    path = start.save(tmp_path / "x.json")
    ranker = GbdtEnsembleTilePredictor.train(records[4:], members=TWO, rounds=20, depth=4, init=GbdtEnsembleTilePredictor.load(path))
    expected = _scores(ranker, records)
    ranker.save(path, link_starts=True)
    doc = json.loads(path.read_text())
    assert len(doc["starts"]) == 1 and "file" not in doc["starts"][0]
    np.testing.assert_array_equal(_scores(GbdtEnsembleTilePredictor.load(path), records), expected)


def test_a_fit_on_a_layered_start_grows_the_trees_a_fit_on_one_booster_grows(records: list[KernelRecord]) -> None:
    """Why the shipped commands still write the trees they wrote: boosting on top of a start kept apart gives exactly what
    boosting on one booster of the same trees (the form before the forty-second session) gives."""
    first = GbdtBaseline(objective="rank", rounds=30, depth=4).fit(records[:4])
    layered = GbdtBaseline(objective="rank", rounds=20, depth=4).fit(records[4:], init=first)
    flat = GbdtBaseline(objective="rank", rounds=20, depth=4)
    flat.booster, flat.width = layered.flat_booster(), layered.width
    on_layered = GbdtBaseline(objective="ndcg", rank_pairs=50, rounds=15, depth=4).fit(records[:3], init=layered)
    on_flat = GbdtBaseline(objective="ndcg", rank_pairs=50, rounds=15, depth=4).fit(records[:3], init=flat)
    for r in records:
        np.testing.assert_array_equal(on_layered.predict(r), on_flat.predict(r))
