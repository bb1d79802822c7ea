"""The TpuGraphs .npz schema: round trip, both forms, real-file layout, and bad files."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.learned.tpugraphs import DatasetError, KernelRecord, load_dir, load_npz, save_npz


def _tile_record(configs: int = 5) -> KernelRecord:
    rng = np.random.default_rng(0)
    runtime = rng.uniform(1e-4, 1e-3, configs)
    return KernelRecord(
        node_feat=rng.standard_normal((3, 7)).astype(np.float32), node_opcode=np.array([0, 0, 9]), edge_index=np.array([[2, 0], [2, 1]]),
        config_runtime=runtime, config_runtime_normalizers=np.full(configs, runtime.min()),
        config_feat=rng.standard_normal((configs, 4)).astype(np.float32), config_text=[f"cfg{i}" for i in range(configs)],
        meta={"kernel": "k", "program": "resnet-50"},
    )


def test_tile_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    record = _tile_record()
    loaded = load_npz(save_npz(record, tmp_path / "a.npz"))
    for name in ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime", "config_runtime_normalizers"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(record, name))
    assert loaded.config_text == record.config_text and loaded.meta == record.meta
    assert loaded.program == "resnet-50" and not loaded.layout_form


def test_layout_form_and_a_file_without_our_extras(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # What a real TpuGraphs layout file holds: no meta, no config_text; program from the file name.
    rng = np.random.default_rng(1)
    path = tmp_path / "bert_like:x.npz"
    np.savez(path, node_feat=rng.standard_normal((4, 140)).astype(np.float32), node_opcode=np.arange(4), edge_index=np.array([[1, 0], [2, 1], [3, 2]]),
             node_config_ids=np.array([1, 3]), node_config_feat=rng.standard_normal((6, 2, 18)).astype(np.float32),
             config_runtime=rng.uniform(1, 2, 6))
    record = load_npz(path)
    assert record.layout_form and record.num_configs == 6 and record.program == "bert_like"
    np.testing.assert_array_equal(record.config_runtime_normalizers, np.ones(6))
    assert len(load_dir(tmp_path)) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.pop("config_runtime"), "missing array 'config_runtime'"),
        (lambda a: a.update(edge_index=np.array([[0, 5]])), "edge_index"),
        (lambda a: a.update(config_feat=np.zeros((2, 4), np.float32)), "config_feat has 2 rows"),
        (lambda a: a.pop("config_feat"), "neither config_feat"),
        (lambda a: a.update(node_conv_time=np.zeros(2)), r"node_conv_time \(2,\) must be \(3,\)"),
        (lambda a: a.update(node_conv_time=np.array([0.0, -1e-4, np.nan])), "seconds >= 0"),
        (lambda a: a.update(node_conv_time=np.array([0.0, np.inf, 0.0])), "seconds >= 0"),
    ],
)
def test_bad_files_name_the_file_and_field(tmp_path, change, message) -> None:  # type: ignore[no-untyped-def]
    record = _tile_record()
    arrays = {"node_feat": record.node_feat, "node_opcode": record.node_opcode, "edge_index": record.edge_index,
              "config_runtime": record.config_runtime, "config_feat": record.config_feat}
    change(arrays)
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(DatasetError, match=message) as info:
        load_npz(path)
    assert "bad.npz" in str(info.value)


def test_unreadable_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="not a readable .npz file: not a zip archive") as info:
        load_npz(path)
    assert "pickle" not in str(info.value)  # numpy's fallback names pickling, which the user never asked for


def test_node_conv_time_round_trip_and_files_without_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Twelfth session: the optional per-node seconds of each conv alone survive a round trip
    (NaN, a conv not timed, included); a file without the array loads with None."""
    record = _tile_record()
    record.node_conv_time = np.array([1.5e-4, 0.0, np.nan])
    loaded = load_npz(save_npz(record, tmp_path / "a.npz"))
    np.testing.assert_array_equal(loaded.node_conv_time, record.node_conv_time)
    assert loaded.node_conv_time.dtype == np.float64
    record.node_conv_time = None
    old = load_npz(save_npz(record, tmp_path / "b.npz"))
    assert old.node_conv_time is None and old.node_conv_feat is None
    with np.load(tmp_path / "b.npz") as data:
        assert "node_conv_time" not in data.files
