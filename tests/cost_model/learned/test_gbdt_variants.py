"""The ninth session's XGBoost tile rankers learn a known within-kernel order: one model per
kernel kind (with a fallback for an unseen kind), and the pairwise-difference model."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.learned.metrics import kendall_tau
from cost_model.learned.tpugraphs import KernelRecord

pytest.importorskip("xgboost")


def _records(kinds: tuple[str, ...] = ("matmul", "conv"), per_kind: int = 3, configs: int = 16) -> list[KernelRecord]:
    """Runtime = the kernel's scale x exp(config . w_kind): the order within a kernel depends on the
    kind (opposite signs of the first knob), the scale on the kernel."""
    rng = np.random.default_rng(0)
    weights = {"matmul": np.array([1.0, 0.5, 0.0]), "conv": np.array([-1.0, 0.0, 0.5])}
    out = []
    for kind in kinds:
        for k in range(per_kind):
            feat = rng.uniform(0, 2, (configs, 3)).astype(np.float32)
            runtime = np.exp(-8 + k + feat @ weights[kind])
            node_feat = np.full((2, 4), float(k), dtype=np.float32)
            out.append(KernelRecord(node_feat, np.array([0, 1 if kind == "matmul" else 2]), np.array([[1, 0]]), runtime, np.full(configs, runtime.min()),
                                    config_feat=feat, meta={"kind": kind, "program": f"{kind}{k}"}))
    return out


def test_per_kind_model_orders_each_kind_and_falls_back() -> None:
    from cost_model.learned.gbdt_variants import PerKindGbdt

    records = _records()
    model = PerKindGbdt(depth=3, rounds=60).fit(records)
    assert set(model.models) == {"matmul", "conv"}
    for record in records:
        assert kendall_tau(model.predict(record), record.config_runtime) > 0.8
    unseen = _records(kinds=("matmul",), per_kind=1)[0]
    unseen.meta["kind"] = "depthwise"  # no model of its own: the all-kinds model answers
    np.testing.assert_allclose(model.predict(unseen), model.fallback.predict(unseen))


def test_pairwise_model_learns_log_ratios() -> None:
    from cost_model.learned.gbdt_variants import PairwiseGbdt

    records = _records()
    model = PairwiseGbdt(partners=8, depth=4, rounds=150).fit(records)
    for record in records:
        score = model.predict(record)
        assert score.shape == (record.num_configs,)
        assert kendall_tau(score, record.config_runtime) > 0.8
        # scores estimate log runtime over the kernel's mean: differences near the true log ratios
        truth = np.log(record.config_runtime)
        assert np.corrcoef(score, truth - truth.mean())[0, 1] > 0.9
    with pytest.raises(ValueError):
        PairwiseGbdt(partners=0)
