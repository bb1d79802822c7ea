"""Atomic file writes: write beside the target, then rename, so a crash never leaves half a file.

`atomic_path` covers one file; `staging_dir` + `move_staged` cover an export that writes side
files too (ONNX external data): everything is written into a fresh folder beside the target, the
side files are moved out first and the model file last.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "move_staged", "staging_dir"]


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto `target`.

    On any exception the temporary file is removed and the target is left untouched.
    """
    target = Path(target)
    with _naming_target(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _file_mode(target))  # mkstemp makes it 0600; the user's file should not change mode by being rewritten
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def _naming_target(target: Path) -> Iterator[None]:
    """An OSError while making the temporary file names the user's target, not the temporary name."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write here: {exc.strerror}", str(target)) from exc


def _file_mode(target: Path) -> int:
    """The mode `target` has now, or what a plain `open(target, "w")` would give it (0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # the only portable way to read it: set and restore at once
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def staging_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh folder beside `target` (same filesystem, so renames out of it are atomic),
    removed afterwards with whatever is left in it."""
    target = Path(target)
    with _naming_target(target):
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def move_staged(staging: Path, staged: Path, target: str | os.PathLike[str]) -> None:
    """Move the side files under `staging` beside `target` (same relative paths), then `staged`
    onto `target`: a reader never sees the model before the data it points to."""
    target = Path(target)
    side_files = sorted(p for p in staging.rglob("*") if p.is_file() and p != staged)
    for side in side_files:
        destination = target.parent / side.relative_to(staging)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(side, destination)
    os.replace(staged, target)
