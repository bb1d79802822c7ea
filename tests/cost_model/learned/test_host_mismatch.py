"""A tile ranker names the CPUs its training kernels were measured on, and autotune warns on another one."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from cost_model.learned.tpugraphs import KernelRecord

pytest.importorskip("tvm")


def _record(machine: dict) -> KernelRecord:
    rt = np.array([1.0, 2.0])
    return KernelRecord(np.zeros((1, 2), np.float32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64), rt, np.full_like(rt, 1.0),
                        config_feat=np.zeros((2, 3), np.float32), config_text=["a", "b"], meta={"machine": machine})


def test_training_hosts_read_the_machine_records() -> None:
    from cost_model.learned.gbdt_predictor import training_hosts

    records = [_record({"target": "llvm -mcpu=znver4"}), _record({"target": "llvm -mcpu=znver4", "timing_protocol": "long"}), _record({})]
    assert training_hosts(records) == {"hosts": ["llvm -mcpu=znver4"], "timing_protocols": ["long", "short"], "element_types": ["float32"]}
    records[0].meta["dtype"] = "float16"  # a typed dataset's kernels name their type; float32 ones name none
    assert training_hosts(records)["element_types"] == ["float16", "float32"]


def test_autotune_warns_when_the_ranker_was_fitted_on_another_host(caplog) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.predictor import host_mismatch, load_tile_ranker
    from cost_model.measure.tile.runner import host_target_text
    from passes.autotune.tile import TileTuner

    class Ranker:
        extra = {"hosts": ["llvm -mcpu=some-other-cpu"]}

    note = host_mismatch(Ranker())
    assert note is not None and "some-other-cpu" in note and host_target_text() in note
    with caplog.at_level(logging.WARNING, logger="passes.autotune.tile"):
        TileTuner(Ranker(), harness=None)  # type: ignore[arg-type]
    assert "some-other-cpu" in caplog.text
    Ranker.extra = {"hosts": [host_target_text()]}
    assert host_mismatch(Ranker()) is None
    assert host_mismatch(object()) is None  # a ranker that names no host: nothing to say
    # the shipped ranker names where its training kernels were measured: this host's own where one ships
    from cost_model.learned.gbdt_ensemble import packaged_host_ensemble
    from tvm.target import codegen

    own = packaged_host_ensemble(codegen.llvm_get_system_cpu()).is_file()
    assert load_tile_ranker("gbdt-ens").extra["hosts"] == [host_target_text() if own else "llvm -mcpu=znver4"]


def test_the_package_ships_a_ranker_per_host_and_falls_back_to_the_default() -> None:
    from cost_model.learned.gbdt_ensemble import PACKAGED_GBDT_ENSEMBLE, GbdtEnsembleTilePredictor, packaged_host_ensemble, packaged_type_ensemble

    files = sorted(PACKAGED_GBDT_ENSEMBLE.parent.glob("tile_gbdt_ens.*.json"))
    host_files = [p for p in files if p.name.count(".") == 2]  # tile_gbdt_ens.<cpu>.json; <cpu>.<dtype>.json are per element type
    assert host_files, "a host ranker ships since the twenty-fourth session"
    for path in set(files) - set(host_files):  # a ranker fitted on one element type's kernels of one CPU
        _, cpu, dtype, _ = path.name.split(".")
        assert packaged_type_ensemble(cpu, dtype) == path
        assert GbdtEnsembleTilePredictor.packaged_for_type(dtype, cpu).extra["hosts"] == [f"llvm -mcpu={cpu}"]
    assert GbdtEnsembleTilePredictor.packaged_for_type("float16", "no-such-cpu") is None  # the tuner then ranks the float32 twin
    for path in host_files:
        cpu = path.name.split(".")[1]
        assert packaged_host_ensemble(cpu) == path
        ranker = GbdtEnsembleTilePredictor.packaged(cpu)
        assert ranker.extra["hosts"] == [f"llvm -mcpu={cpu}"]  # fitted on that CPU's kernels alone
    default = GbdtEnsembleTilePredictor.packaged("no-such-cpu")  # no file for it: the default, which names its own host
    assert default.extra["hosts"] == ["llvm -mcpu=znver4"]


def test_no_shipped_tile_ranker_splits_on_the_element_type_columns_unless_fitted_on_typed_features() -> None:
    """Datasets before the thirty-second session recorded every stage as float32, so a ranker fitted
    on them must not read the type columns that typed kernels now fill: its order of a typed kernel
    would then depend on which way the features were written. A file that records its training
    kernels' `element_types` (written since the fortieth session, when every dataset's features are
    typed) was fitted on the features the tuner writes, and may read them; a per-type file's kernels
    are all of its type."""
    from cost_model.learned.features import DTYPE_COLUMNS, NODE_FEATURES
    from cost_model.learned.gbdt_ensemble import PACKAGED_GBDT_ENSEMBLE, GbdtEnsembleTilePredictor

    # flat rows start with the mean, the max and the output node's features (`baselines.flat_rows`)
    type_columns = {f"f{block * NODE_FEATURES + c}" for block in range(3) for c in range(DTYPE_COLUMNS.start, DTYPE_COLUMNS.stop)}
    files = sorted(PACKAGED_GBDT_ENSEMBLE.parent.glob("tile_gbdt_ens*.json"))
    assert files
    for path in files:
        ranker = GbdtEnsembleTilePredictor.load(path)
        typed = ranker.extra.get("element_types")
        if path.name.count(".") == 3:  # tile_gbdt_ens.<cpu>.<dtype>.json
            assert typed in (None, [path.name.split(".")[2]]), path.name
        for member in ranker.members:
            used = set().union(*(booster.get_score(importance_type="weight") for booster in member.gbdt.boosters()))
            assert used and (typed is not None or not used & type_columns), path.name
