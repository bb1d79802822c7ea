"""A test run leaves no `.hypothesis/` folder in the checkout (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parent.parent


@given(st.integers())
def _property(x: int) -> None:
    assert x == x


def test_hypothesis_keeps_nothing_in_the_checkout(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # where hypothesis would write by default
    existed = (REPO_ROOT / ".hypothesis").exists()
    _property()
    assert settings().database is None
    assert existed or not (REPO_ROOT / ".hypothesis").exists(), sorted(os.listdir(REPO_ROOT / ".hypothesis"))
