"""The HTML report renders in a real browser: headless Chromium (Debian's `chromium` package)
takes a screenshot, and the device colours of the placement picture and of the timeline bars
are on it. Slow tier; skipped with a reason where Chromium is absent."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from compiler_opt.report.html import PALETTE

pytestmark = pytest.mark.slow


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")


def _hex(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])


def _pixels_of(image: np.ndarray, colour: str) -> np.ndarray:
    return np.all(np.abs(image[..., :3].astype(int) - _hex(colour)) <= 3, axis=-1)


def test_report_screenshot_shows_the_placement_and_the_timeline(example_model, tmp_path):
    from PIL import Image

    import compiler_opt
    from compiler_opt.report import write_report

    browser = _chromium()
    result = compiler_opt.optimize(str(example_model), target="4xV100", method="round-robin", check=False)
    page = write_report(result, tmp_path)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot}",
         "--window-size=1400,2400", f"file://{page}"],
        check=True, capture_output=True, timeout=120,
    )
    image = np.asarray(Image.open(shot).convert("RGB"))
    devices = list(result.peak_memory_bytes)
    used = sorted({devices.index(n.device) for n in result.graph if n.device in devices})
    assert len(used) >= 2  # round-robin spreads the nodes
    rows_with = {}
    for index in used:
        mask = _pixels_of(image, PALETTE[index % len(PALETTE)])
        assert mask.sum() > 40, f"device {devices[index]}'s colour is missing from the screenshot"
        rows_with[index] = np.flatnonzero(mask.any(axis=1))
    # Each colour shows twice: as graph nodes (upper part) and as timeline bars further down.
    placement_top = min(rows.min() for rows in rows_with.values())
    timeline_bottom = max(rows.max() for rows in rows_with.values())
    assert timeline_bottom - placement_top > 200
