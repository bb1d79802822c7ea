"""`scatter_max` equals `np.maximum.at` under both engines, and refuses what could corrupt memory."""

import numpy as np
import pytest

from cost_model.simulator import scatter
from graph_ir._jit import NO_JIT_ENV


@pytest.fixture(params=["python", "default"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if request.param == "python":
        monkeypatch.setenv(NO_JIT_ENV, "1")
    else:
        monkeypatch.delenv(NO_JIT_ENV, raising=False)
    yield scatter.select_scatter(refresh=True)[0]
    monkeypatch.undo()
    scatter.select_scatter(refresh=True)


@pytest.mark.parametrize("seed", range(4))
def test_scatter_max_equals_numpy(engine: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    target = rng.normal(size=50)
    target[rng.random(50) < 0.2] = -np.inf
    index = rng.integers(0, 50, size=400)
    values = rng.normal(size=400).astype(np.float32 if seed % 2 else np.float64)
    values[::37] = np.nan
    want = target.copy()
    with np.errstate(invalid="ignore"):  # numpy warns on NaN
        np.maximum.at(want, index, values)
        scatter.scatter_max(target, index, values)
    np.testing.assert_array_equal(target, want)  # NaN where numpy puts NaN


def test_scatter_max_refuses_bad_input(engine: str) -> None:
    target = np.zeros(4)
    with pytest.raises(IndexError, match=r"out of \[0, 4\)"):
        scatter.scatter_max(target, np.array([0, 4]), np.array([1.0, 2.0]))
    with pytest.raises(IndexError):
        scatter.scatter_max(target, np.array([-1]), np.array([1.0]))
    with pytest.raises(ValueError, match="one value per index"):
        scatter.scatter_max(target, np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match="float64 target"):
        scatter.scatter_max(np.zeros(4, dtype=np.int64), np.array([0]), np.array([1.0]))
    assert target.tolist() == [0.0] * 4
    scatter.scatter_max(target, np.zeros(0, dtype=np.int64), np.zeros(0))  # nothing to do
