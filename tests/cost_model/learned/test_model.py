"""The GraphSAGE cost model learns: it overfits a tiny dataset with a known ranking, for every
loss and pooling, and checkpoints round-trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cost_model.learned.data import split_records
from cost_model.learned.tpugraphs import KernelRecord
from cost_model.learned.train import TrainConfig, evaluate_model, feature_scale, fit, load_model, predict, save_model
from cost_model.learned.data import to_tensors


def _synthetic(kernels: int = 4, configs: int = 12, layout: bool = False) -> list[KernelRecord]:
    # runtime depends on the config through a kernel-specific weight vector: learnable, not trivial.
    rng = np.random.default_rng(0)
    records = []
    for k in range(kernels):
        feat = rng.standard_normal((configs, 3)).astype(np.float32)
        weights = np.array([1.0, -0.5, 0.3]) * (1 + k % 2)
        runtime = np.exp(-7 + feat @ weights + 0.2 * k)
        node_feat = rng.standard_normal((3, 5)).astype(np.float32)
        node_feat[:, 0] = k
        common = dict(node_feat=node_feat, node_opcode=np.array([0, 1, 2 + k % 2]), edge_index=np.array([[1, 0], [2, 1]]),
                      config_runtime=runtime, config_runtime_normalizers=np.full(configs, runtime.min()), meta={"program": f"p{k % 2}"})
        if layout:
            records.append(KernelRecord(**common, node_config_ids=np.array([1, 2]), node_config_feat=np.repeat(feat[:, None, :], 2, axis=1)))
        else:
            records.append(KernelRecord(**common, config_feat=feat))
    return records


@pytest.mark.parametrize(
    ("loss", "pooling", "layout"),
    [
        ("listmle", "mean+max", False),
        pytest.param("mse", "mean+max", False, marks=pytest.mark.slow),
        pytest.param("hinge", "attention", False, marks=pytest.mark.slow),
        pytest.param("logistic", "max", True, marks=pytest.mark.slow),
    ],
)
def test_overfits_a_tiny_dataset(loss: str, pooling: str, layout: bool) -> None:
    records = _synthetic(layout=layout)
    model = fit(records, TrainConfig(loss=loss, pooling=pooling, epochs=150 if loss == "mse" else 80, hidden=32, layers=2, lr=5e-3, kernels_per_step=4, configs_per_step=12, mse_weight=0.0))
    metrics = evaluate_model(model, records)
    assert metrics["kendall"] > 0.85, metrics
    assert metrics["top1"] < 0.05, metrics
    if loss == "mse":
        assert metrics["mape"] < 0.2, metrics


def test_checkpoint_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    records = _synthetic(kernels=2)
    model = fit(records, TrainConfig(epochs=2, hidden=16, layers=1))
    path = save_model(model, tmp_path / "m.pt", extra={"note": "x"})
    loaded, extra = load_model(path)
    assert extra == {"note": "x"}
    d = to_tensors(records[0])
    np.testing.assert_allclose(predict(loaded, d), predict(model, d))
    bad = tmp_path / "bad.pt"
    torch.save({"format": "other"}, bad)
    from cost_model.learned.tpugraphs import DatasetError

    with pytest.raises(DatasetError, match="format"):
        load_model(bad)
    text = tmp_path / "text.pt"  # a text file: torch's UnpicklingError becomes a short, named error
    text.write_text("garbage\n")
    with pytest.raises(DatasetError, match="not a torch file of tensors") as caught:
        load_model(text)
    assert "weights_only=False" not in str(caught.value) and "text.pt" in str(caught.value)
    alien = tmp_path / "alien.pt"  # the right format field, a network this code does not have
    torch.save({"format": "compiler-opt-costmodel/1", "config": {"bogus": 1}, "state_dict": {}}, alien)
    with pytest.raises(DatasetError, match="does not match the cost model network"):
        load_model(alien)


def test_splits() -> None:
    records = _synthetic(kernels=6)
    train, test = split_records(records, "random", test_fraction=0.34, seed=0)
    assert len(test) == 2 and sorted(train + test) == list(range(6))
    train, test = split_records(records, "program", test_fraction=0.3, seed=0)
    programs = {records[i].program for i in test}
    assert programs and not programs & {records[i].program for i in train}


def test_a_feature_constant_in_training_is_scaled_by_one() -> None:
    # Fifteenth session: a machine constant (lanes, cache sizes) stored with std 1e-3 made another
    # machine's value thousands of standard deviations out; constant columns now get scale 1.
    rows = torch.tensor([[1.0, 8.0, 5.0], [3.0, 8.0, 5.0001], [5.0, 8.0, 5.0]])
    scale = feature_scale(rows)
    assert scale[0] == pytest.approx(2.0)
    assert scale[1] == 1.0  # constant
    assert scale[2] == pytest.approx(1e-3)  # nearly constant: the floor, as before
    assert torch.equal(feature_scale(rows[:1]), torch.ones(3))

    records = _synthetic(kernels=2)
    for r in records:  # a machine constant appended to every configuration
        r.config_feat = np.concatenate([r.config_feat, np.full((r.config_feat.shape[0], 1), 8.0, dtype=np.float32)], axis=1)
    model = fit(records, TrainConfig(epochs=2, hidden=16, layers=1))
    assert float(model.config_std[-1]) == 1.0 and float(model.config_mean[-1]) == 8.0
    d = to_tensors(records[0])
    other_machine = to_tensors(records[0])
    other_machine.config_feat[:, -1] = 16.0
    z = (other_machine.config_feat[:, -1] - model.config_mean[-1]) / model.config_std[-1]
    assert float(z.abs().max()) == 8.0  # not 8000
    assert np.isfinite(predict(model, other_machine)).all() and predict(model, d).shape == (12,)
