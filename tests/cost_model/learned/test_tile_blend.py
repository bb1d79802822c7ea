"""Several gbdt-ens files as one ranker (fifty-fifth session): scores equal to the weighted z-scored sum of the files'
members, members stored as checked references to their files, clear errors for files that cannot be blended."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("xgboost")
pytest.importorskip("tvm")

from cost_model.learned.baselines import flat_rows  # noqa: E402
from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor  # noqa: E402
from cost_model.learned.tile_blend import blend, blend_files, parse_file_weight  # noqa: E402
from cost_model.learned.tile_rankers import zscore  # noqa: E402
from cost_model.learned.tpugraphs import DatasetError, KernelRecord  # noqa: E402

from test_gbdt_starts import TWO, records  # noqa: E402,F401  (same folder: its module-scoped kernels fixture and members)


@pytest.fixture(scope="module")
def files(tmp_path_factory, records: list[KernelRecord]):  # type: ignore[no-untyped-def]
    """Two rankers fitted on different kernels, saved in one folder: a one-member file and a warm two-member file on
    top of it (as the package's `znver5` file sits on the default's trees)."""
    folder = tmp_path_factory.mktemp("package")
    one = GbdtEnsembleTilePredictor.train(records[:4], members=(("rank", 0, 50),), rounds=30, depth=4)
    one.save(folder / "one.json")
    two = GbdtEnsembleTilePredictor.train(records[3:], members=TWO, rounds=20, depth=4, weights=(1.0, 0.5),
                                          init=GbdtEnsembleTilePredictor.load(folder / "one.json"))
    two.save(folder / "two.json", link_starts=True)
    return folder


def test_a_blend_scores_as_the_weighted_sum_of_its_files_members(records: list[KernelRecord], files) -> None:  # type: ignore[no-untyped-def]
    one, two = GbdtEnsembleTilePredictor.load(files / "one.json"), GbdtEnsembleTilePredictor.load(files / "two.json")
    blended = blend([("one.json", one, 2.0), ("two.json", two, 1.0)])
    assert blended.weights == [2.0, 1.0, 0.5]
    for r in records:
        x = flat_rows(r.node_feat, r.node_opcode, r.config_feat)
        rows = [m.gbdt.predict_rows(x) for m in one.members + two.members]
        expected = 2.0 * zscore(rows[0]) + 1.0 * zscore(rows[1]) + 0.5 * zscore(rows[2])
        np.testing.assert_allclose(blended.predict(r), expected, rtol=1e-6, atol=1e-6)
    # a blend ranks differently from either file (else the test above could not tell members apart)
    assert any(not np.array_equal(np.argsort(blended.predict(r)), np.argsort(one.predict(r))) for r in records)


def test_a_linked_blend_stores_no_trees_and_loads_to_the_same_scores(tmp_path, records: list[KernelRecord], files) -> None:  # type: ignore[no-untyped-def]
    blended = blend_files([(files / "one.json", 1.0), (files / "two.json", 1.0)])
    out = blended.save(files / "blend.json", link_members=True)
    doc = json.loads(out.read_text())
    assert [m["file"] for m in doc["members"]] == ["one.json", "two.json", "two.json"] and [m["member"] for m in doc["members"]] == [0, 0, 1]
    assert all("ubj_zlib" not in m for m in doc["members"]) and out.stat().st_size < 20_000
    assert [p["file"] for p in doc["extra"]["blend"]] == ["one.json", "two.json"]
    loaded = GbdtEnsembleTilePredictor.load(out)
    for r in records:
        np.testing.assert_allclose(loaded.predict(r), blended.predict(r), rtol=0, atol=1e-6)
    # saved without references (or moved away from its files after a copy), every tree travels
    copied = loaded.save(tmp_path / "copied.json")
    assert all("ubj_zlib" in m for m in json.loads(copied.read_text())["members"])
    np.testing.assert_allclose(GbdtEnsembleTilePredictor.load(copied).predict(records[0]), blended.predict(records[0]), rtol=0, atol=1e-6)
    # a referenced file that changed is refused, naming the member and the file
    moved = tmp_path / "moved"
    shutil.copytree(files, moved)
    GbdtEnsembleTilePredictor.train(records[:2], members=(("rank", 0, 50),), rounds=5, depth=2).save(moved / "one.json")
    with pytest.raises(DatasetError, match=r"member 0 .*one\.json.*changed"):
        GbdtEnsembleTilePredictor.load(moved / "blend.json")
    shutil.rmtree(moved)
    shutil.copytree(files, moved)
    (moved / "two.json").unlink()
    with pytest.raises(DatasetError, match=r"two\.json, which is neither beside this file nor shipped"):
        GbdtEnsembleTilePredictor.load(moved / "blend.json")


def test_files_that_cannot_be_blended_are_named(tmp_path, records: list[KernelRecord], files) -> None:  # type: ignore[no-untyped-def]
    one = GbdtEnsembleTilePredictor.load(files / "one.json")
    with pytest.raises(ValueError, match="at least two files"):
        blend([("one.json", one, 1.0)])
    with pytest.raises(ValueError, match="one.json: a file's weight must be a positive number"):
        blend([("one.json", one, 0.0), ("one.json", one, 1.0)])
    coded = GbdtEnsembleTilePredictor(one.members, extra={"code_features": True, "code_feature_set": "s18"})
    with pytest.raises(DatasetError, match=r"coded\.json.*code feature set 's18', one\.json None"):
        blend([("one.json", one, 1.0), ("coded.json", coded, 1.0)])
    kinds = GbdtEnsembleTilePredictor(one.members, kind_weights={"matmul": [1.0]})
    with pytest.raises(DatasetError, match=r"kinds\.json.*per-kind member weights"):
        blend([("one.json", one, 1.0), ("kinds.json", kinds, 1.0)])


def test_costmodel_blend_writes_a_small_file_and_names_bad_input(tmp_path, files, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    out = files / "cli_blend.json"
    assert main(["costmodel", "blend", str(files / "one.json"), f"{files / 'two.json'}:0.5", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "3 members" in said and "two.json x0.5" in said
    doc = json.loads(out.read_text())
    assert doc["weights"] == [1.0, 0.5, 0.25] and all("file" in m for m in doc["members"])
    assert main(["costmodel", "blend", str(files / "one.json"), str(files / "two.json"), "-o", str(tmp_path / "copy.json"), "--copy"]) == 0
    assert all("ubj_zlib" in m for m in json.loads((tmp_path / "copy.json").read_text())["members"])
    capsys.readouterr()
    assert main(["costmodel", "blend", str(files / "one.json"), str(tmp_path / "absent.json"), "-o", str(tmp_path / "x.json")]) == 1
    assert "absent.json" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    assert main(["costmodel", "blend", str(files / "one.json"), str(files / "two.json"), "-o", str(tmp_path / "no" / "x.json")]) == 2


def test_parse_file_weight() -> None:
    assert parse_file_weight("a.json") == ("a.json", 1.0)
    assert parse_file_weight("a.json:0.5") == ("a.json", 0.5)
    assert parse_file_weight("c:/models/a.json") == ("c:/models/a.json", 1.0)  # a colon that is part of the name
