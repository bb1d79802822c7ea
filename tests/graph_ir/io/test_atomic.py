"""`atomic_path`: the rename-into-place write keeps file modes as a plain write would."""

from __future__ import annotations

import os
import stat

import pytest

from graph_ir.io.atomic import atomic_path


def _mode(path) -> int:  # type: ignore[no-untyped-def]
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "model.json") as tmp:
            tmp.write_text("{}")
        assert _mode(tmp_path / "model.json") == 0o644
    finally:
        os.umask(old)


def test_a_rewritten_file_keeps_its_mode_and_a_failed_write_leaves_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "model.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and _mode(target) == 0o640
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert target.read_text() == "new" and _mode(target) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]  # no temporary left behind


def test_an_unwritable_folder_names_the_target_not_the_temporary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from graph_ir.io.atomic import staging_dir

    (tmp_path / "afile").write_text("not a folder")
    target = tmp_path / "afile" / "model.onnx"
    with pytest.raises(OSError) as caught, atomic_path(target):
        pass
    assert caught.value.filename == str(target) and "cannot write here" in str(caught.value)
    with pytest.raises(OSError) as caught, staging_dir(target):
        pass
    assert caught.value.filename == str(target) and ".partial" not in str(caught.value)
