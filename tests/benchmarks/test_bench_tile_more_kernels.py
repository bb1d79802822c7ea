"""`benchmarks/bench_tile_more_kernels.py`: the pair-gap table on predictions whose answers are known by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.benchmark_scripts import benchmark_script


def test_gap_pairs_sum_per_kind_and_print_shares(capsys: pytest.CaptureFixture[str]) -> None:
    with benchmark_script("bench_tile_more_kernels") as bench:
        records = [SimpleNamespace(meta={"kind": "reduce"}, config_runtime=np.array([1.0, 1.005, 1.2, 2.0])),
                   SimpleNamespace(meta={"kind": "reduce"}, config_runtime=np.array([1.0, 2.0])),
                   SimpleNamespace(meta={"kind": "matmul"}, config_runtime=np.array([1.0, 1.02]))]
        predictions = [np.array([0.0, 1.0, 1.0, 0.5]), np.array([1.0, 0.0]), np.array([0.0, 1.0])]
        got = bench.gap_pairs(predictions, records)
        assert got["reduce"] == [[1.0, 0.0, 0.0, 1.5, 1.0], [1, 0, 0, 2, 4]]  # the second kernel's one far pair ordered wrong
        assert got["matmul"] == [[0.0, 1.0, 0.0, 0.0, 0.0], [0, 1, 0, 0, 0]]
        rows = {"A": {"random": [{"gap_pairs": got}, {"gap_pairs": {"matmul": got["matmul"]}}]}}
        bench.print_by_gap(rows, ["random"])
    out = capsys.readouterr().out
    assert "| A | reduce | 1.00 (1) | - | - | 0.75 (2) | 0.25 (4) |" in out
    assert "| A | matmul | - | 1.00 (2) | - | - | - |" in out  # summed over both runs


def test_fewer_configs_keeps_a_seeded_subset_of_every_column() -> None:
    from cost_model.learned.tpugraphs import KernelRecord

    runtime = np.arange(1.0, 11.0)
    record = KernelRecord(np.zeros((1, 2), np.float32), np.zeros(1, np.int64), np.zeros((0, 2), np.int64), runtime, runtime * 2,
                          config_feat=np.arange(10.0)[:, None].repeat(3, 1), config_text=[str(i) for i in range(10)], meta={"kernel": "k"})
    with benchmark_script("bench_tile_more_kernels") as bench:
        fewer = bench.fewer_configs(record, 4, seed=7)
        again = bench.fewer_configs(record, 4, seed=7)
        other = bench.fewer_configs(record, 4, seed=8)
        assert bench.fewer_configs(record, 10, seed=7) is record  # nothing to drop
    kept = [int(t) for t in fewer.config_text]
    assert len(kept) == 4 and kept == sorted(set(kept))
    np.testing.assert_array_equal(fewer.config_runtime, runtime[kept])  # rows stay aligned across the columns
    np.testing.assert_array_equal(fewer.config_runtime_normalizers, runtime[kept] * 2)
    np.testing.assert_array_equal(fewer.config_feat[:, 0], np.array(kept, dtype=float))
    assert again.config_text == fewer.config_text and other.config_text != fewer.config_text
    assert record.num_configs == 10  # the record itself is untouched


def _matmul_folder(folder, programs: int = 3, per_program: int = 2, configs: int = 8) -> None:  # type: ignore[no-untyped-def]
    """Real matmul kernels of `programs` programs, each with `configs` of its schedule space; a made-up runtime that a
    ranker can learn (it grows with the first config feature)."""
    from cost_model.learned.tpugraphs import KernelRecord, save_npz
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.dataset import kernel_graph
    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileSpace

    folder.mkdir()
    for k in range(programs * per_program):
        dims = (32 * (1 + k % 3), 64, 32 * (1 + k % 2))
        space = TileSpace(build_kernel(KernelSpec("matmul", dims)))
        chosen = kernel_configs(space, k, configs)
        feats, opcodes, edges = kernel_graph(space.kernel)
        config_feat = np.stack([space.features(c) for c in chosen])
        runtime = 1e-5 * (1.0 + config_feat[:, 0] - config_feat[:, 0].min()) + 1e-9 * np.arange(len(chosen))
        program = f"p{k // per_program}"
        save_npz(KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()), config_feat=config_feat,
                              config_text=[c.text() for c in chosen], meta={"kind": "matmul", "dims": list(dims), "program": program}),
                 folder / f"{program}:matmul:{k}.npz")


def test_no_extra_folder_fits_the_training_kernels_beside_fixed_and_warm_rows(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from cost_model.learned.gbdt_ensemble import MEMBERS_S19, GbdtEnsembleTilePredictor
    from cost_model.learned.tpugraphs import load_dir

    _matmul_folder(tmp_path / "host")
    _matmul_folder(tmp_path / "other", programs=2)
    # --warm-from takes a one-member file (the bench's rankers are single models)
    fixed = GbdtEnsembleTilePredictor.train(load_dir(tmp_path / "other"), members=MEMBERS_S19, rounds=5).save(tmp_path / "other.json")
    with benchmark_script("bench_tile_more_kernels") as bench:
        assert bench.main([str(tmp_path / "host"), "--ranker", "rank-all-d10", "--seeds", "3", "--splits", "program", "--fixed", str(fixed),
                           "--warm-from", str(fixed), "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert set(rows) == {"training kernels", "training kernels, warm", "fixed other.json"}  # one fitted row: no --extra prefix
    train_kernels = rows["training kernels"]["program"][0]["train_kernels"]
    assert train_kernels == 6 - rows["training kernels"]["program"][0]["test_kernels"] and train_kernels > 0
    assert "--extra" not in capsys.readouterr().out


def test_shipped_recipe_warm_rows_continue_a_two_member_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`--ranker shipped-recipe --warm-from FILE` takes a gbdt-ens file of any member count (forty-seventh session);
    a single-model ranker still refuses one."""
    import json

    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor
    from cost_model.learned.tpugraphs import load_dir

    _matmul_folder(tmp_path / "host")
    _matmul_folder(tmp_path / "other", programs=2)
    two = GbdtEnsembleTilePredictor.train(load_dir(tmp_path / "other"), members=(("rank", 0, 50), ("ndcg", 0, 50)), rounds=5, depth=3)
    start = two.save(tmp_path / "two.json")
    with benchmark_script("bench_tile_more_kernels") as bench:
        assert bench.main([str(tmp_path / "host"), "--ranker", "shipped-recipe", "--seeds", "3", "--splits", "random", "--fixed", str(start),
                           "--warm-from", str(start), "--json", str(tmp_path / "rows.json")]) == 0
        rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
        assert set(rows) == {"training kernels", "training kernels, warm", "fixed two.json"}
        assert all(0.0 <= row["random"][0]["top1"] and -1.0 <= row["random"][0]["kendall"] <= 1.0 for row in rows.values())
        with pytest.raises(SystemExit, match="one-member"):
            bench.main([str(tmp_path / "host"), "--ranker", "rank-all-d10", "--seeds", "3", "--warm-from", str(start)])


def test_extra_code_features_need_code_features(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    with benchmark_script("bench_tile_more_kernels") as bench, pytest.raises(SystemExit):
        bench.main([str(tmp_path), "--extra-code-features", str(tmp_path / "cache")])
    # this refusal, not another argument error (a missing --extra exited the same way before it was optional)
    assert "--extra-code-features needs --code-features" in capsys.readouterr().err
