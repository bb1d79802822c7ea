"""Synthetic tile kernel shapes: reproducible, distinct, within the FLOP budget, every kind drawn,
and the collect command's spec list."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from cost_model.measure.tile.dataset import program_of
from cost_model.measure.tile.kernels import KINDS
from cost_model.measure.tile.synthetic import synthetic_kernels


def test_same_seed_same_list_other_seed_other_list() -> None:
    first, again, other = synthetic_kernels(40, seed=3), synthetic_kernels(40, seed=3), synthetic_kernels(40, seed=4)
    assert [s.signature for s in first] == [s.signature for s in again]
    assert [s.signature for s in first] != [s.signature for s in other]


def test_distinct_in_budget_all_kinds_one_program() -> None:
    specs = synthetic_kernels(150, seed=0, max_flops=8e6, min_flops=1e4)
    assert len({s.signature for s in specs}) == 150
    assert all(1e4 <= s.flops <= 8e6 for s in specs)
    kinds = Counter(s.kind for s in specs)
    assert set(kinds) == set(KINDS)
    assert kinds.most_common(1)[0][0] == "matmul"  # drawn most often by design
    assert {program_of(s) for s in specs} == {program_of(specs[0])}  # one program: a held-out split keeps them together


def test_impossible_budget_and_bad_count_are_refused() -> None:
    with pytest.raises(ValueError, match="min_flops <= max_flops"):
        synthetic_kernels(5, seed=0, max_flops=10.0, min_flops=1e4)
    with pytest.raises(ValueError, match=">= 0"):
        synthetic_kernels(-1)


def test_collect_writes_the_synthetic_spec_list(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # one kernel of the six measured for real (2 configurations), the listing written first
    from compiler_opt.cli.main import main

    out = tmp_path / "syn"
    rc = main(["costmodel", "collect", "--task", "tile", "--out", str(out), "--synthetic", "6", "--synthetic-seed", "9",
               "--seed", "0", "--configs", "2", "--max-kernels", "1", "--no-progress"])
    assert rc == 0
    listed = json.loads((out / "kernels.json").read_text())
    assert [(s["kind"], tuple(s["dims"])) for s in listed] == [(s.kind, s.dims) for s in synthetic_kernels(6, seed=9)]
    assert len(list(out.glob("*.npz"))) == 1


def test_collect_of_another_element_type_names_it_and_never_mixes_types(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`--dtype float16`: the listing and every record name the type (float32 datasets name none, as before),
    the records read back as f16 kernels, and resuming the folder as another type is refused."""
    pytest.importorskip("tvm")
    from compiler_opt.cli.main import main
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.tile.dataset import spec_of

    out = tmp_path / "f16"
    args = ["costmodel", "collect", "--task", "tile", "--out", str(out), "--synthetic", "3", "--synthetic-seed", "9",
            "--seed", "0", "--configs", "2", "--max-kernels", "1", "--no-progress"]
    assert main([*args, "--dtype", "float16"]) == 0
    listed = json.loads((out / "kernels.json").read_text())
    assert {(s["dtype"], s["out_dtype"]) for s in listed} == {("float16", "")}
    (record,) = load_dir(str(out))
    spec = spec_of(record.meta)
    assert spec.dtype == "float16" and record.meta["kernel"] == spec.signature and spec.signature.endswith(":float16")
    assert main([*args, "--dtype", "bfloat16"]) == 2
    assert "holds float16 kernels, not --dtype bfloat16" in capsys.readouterr().err
    assert spec_of({"kind": "reduce", "dims": [4, 8]}).signature == "tvm-tile:reduce(4,8):float32"  # every older record
    assert main(["costmodel", "collect", "--task", "fusion", "--out", str(tmp_path / "fu"), "--dtype", "float16"]) == 2
    assert "--dtype is for --task tile" in capsys.readouterr().err and not (tmp_path / "fu").exists()


def test_collect_refuses_a_negative_synthetic_count(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    assert main(["costmodel", "collect", "--task", "tile", "--out", str(tmp_path / "s"), "--synthetic", "-3"]) == 2
    assert "--synthetic must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_kind_weights_redraw_the_mix_and_the_default_mix_is_unchanged() -> None:
    from cost_model.measure.tile.synthetic import KIND_WEIGHTS, parse_kind_weights

    default = synthetic_kernels(30, seed=5)
    assert [s.signature for s in synthetic_kernels(30, seed=5, kind_weights=dict(KIND_WEIGHTS))] == [s.signature for s in default]
    only = synthetic_kernels(20, seed=5, kind_weights=parse_kind_weights("reduce=1, ew_reduce=1"))
    assert {s.kind for s in only} == {"reduce", "ew_reduce"}
    assert parse_kind_weights("reduce=3,matmul=0,conv2d_nchw=2") == {"reduce": 3, "matmul": 0, "conv2d_nchw": 2}
    for bad, message in [("reduce", "KIND=INTEGER"), ("reduce=x", "KIND=INTEGER"), ("gemm=2", "unknown kernel kind"),
                         ("reduce=0", "all zero"), ("reduce=-1", ">= 0")]:
        with pytest.raises(ValueError, match=message):
            parse_kind_weights(bad)


def test_single_row_reductions_are_drawn_on_request_and_the_default_draw_is_unchanged() -> None:
    weights = {"reduce": 1, "ew_reduce": 1, "matmul": 1}
    before = [s.signature for s in synthetic_kernels(40, seed=7, kind_weights=weights)]
    assert [s.signature for s in synthetic_kernels(40, seed=7, kind_weights=weights, single_row=0.0)] == before
    every = synthetic_kernels(60, seed=7, kind_weights=weights, single_row=1.0)
    reductions = [s for s in every if s.kind in ("reduce", "ew_reduce")]
    assert reductions and all(s.dims[0] == 1 for s in reductions)
    assert max(s.dims[1] for s in reductions) >= 65536  # long rows, the ones the default draw never makes
    assert all(1e4 <= s.flops <= 8e6 for s in every)
    half = synthetic_kernels(200, seed=7, kind_weights={"reduce": 1}, single_row=0.5)
    assert 0.3 < sum(s.dims[0] == 1 for s in half) / len(half) < 0.7
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="single-row share"):
            synthetic_kernels(5, seed=0, single_row=bad)


def test_collect_refuses_bad_kind_weights(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    assert main(["costmodel", "collect", "--task", "tile", "--out", str(tmp_path / "s"), "--synthetic", "3",
                 "--synthetic-kinds", "gemm=2"]) == 2
    assert "--synthetic-kinds: unknown kernel kind(s) ['gemm']" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("flags, message", [(["--synthetic-kinds", "reduce=1"], "need --synthetic N"),
                                            (["--synthetic-seed", "3"], "need --synthetic N"),
                                            (["--synthetic-single-row", "0.5"], "need --synthetic N"),
                                            (["--synthetic", "4", "--synthetic-single-row", "2"], "--synthetic-single-row must lie in [0, 1]"),
                                            (["--synthetic", "4", "--task", "fusion"], "--task fusion does not take it"),
                                            (["--synthetic", "4", "--max-flops", "10"], "--synthetic: synthetic kernels need 0 < min_flops"),
                                            (["--synthetic", "4", "--configs", "0"], "--configs must be >= 1"),
                                            (["--synthetic", "4", "--max-flops", "0"], "--max-flops must be > 0"),
                                            (["--synthetic", "4", "--max-kernels", "-1"], "--max-kernels must be >= 0")])
def test_collect_refuses_bad_sizes_before_creating_the_folder(tmp_path, capsys, flags, message) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    assert main(["costmodel", "collect", "--task", "tile", "--out", str(tmp_path / "s"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_collect_offers_every_tile_element_type() -> None:
    """The CLI spells the types out (importing the kernels at every start would load numpy and
    cost_model for `--help`), so they must not drift from the kernels' table."""
    from compiler_opt.cli.main import build_parser
    from cost_model.measure.tile.kernels import DTYPES

    costmodel = next(a for a in build_parser()._subparsers._group_actions[0].choices["costmodel"]._actions if a.dest == "costmodel_command")  # noqa: SLF001
    dtype = next(a for a in costmodel.choices["collect"]._actions if a.dest == "dtype")  # noqa: SLF001
    assert tuple(dtype.choices) == tuple(DTYPES) and dtype.default == "float32"


def test_collect_writes_the_code_cache_from_its_compile_probe(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`--code-cache`: each kernel's compiled-code feature file comes from the compile child's assembly,
    the same file a separate fill would compile and write; both need `--compile-timeout`."""
    pytest.importorskip("tvm")
    import numpy as np

    from compiler_opt.cli.main import main
    from cost_model.learned.tile_code_features import fill_code_feature_cache, load_code_features
    from cost_model.learned.tpugraphs import load_dir

    out, code = tmp_path / "tiles", tmp_path / "tiles_code"
    args = ["costmodel", "collect", "--task", "tile", "--out", str(out), "--synthetic", "3", "--synthetic-seed", "9",
            "--seed", "0", "--configs", "3", "--max-kernels", "1", "--no-progress"]
    assert main([*args, "--code-cache", str(code)]) == 2
    assert "--code-cache works through the compile probe" in capsys.readouterr().err and not code.exists()
    assert main([*args, "--compile-timeout", "60", "--compile-cpus", "10000"]) == 2
    assert "--compile-cpus: compile CPUs must be CPU numbers of this machine" in capsys.readouterr().err
    assert main([*args, "--compile-timeout", "120", "--compile-cpus", "0", "--code-cache", str(code)]) == 0
    records = load_dir(str(out))
    (written,) = load_code_features(records, code, "s18")
    assert written is not None and written.shape[0] == records[0].num_configs
    fill_code_feature_cache(records, tmp_path / "filled", progress=False, timeout=120)
    (filled,) = load_code_features(records, tmp_path / "filled", "s18")
    np.testing.assert_array_equal(written, filled)
