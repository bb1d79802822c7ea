"""`compiler-opt costmodel collect|train|evaluate` and `compiler-opt autotune`, end to end on real
measurements of this machine (slow tier: TVM compiles every configuration)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from compiler_opt.cli.main import main


def test_parser_knows_the_commands(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["costmodel", "train", "--help"]) == 0
    assert "--loss" in capsys.readouterr().out
    assert main(["autotune", "m.onnx", "-o", "x.onnx", "--task", "placement"]) == 2  # not a task: refused by the parser


def test_train_on_a_missing_folder_is_a_user_error(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["costmodel", "train", str(tmp_path), "-o", str(tmp_path / "m.pt")]) == 2
    assert "no .npz files" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "evaluate"])
@pytest.mark.parametrize("fraction", ["0", "1", "1.5", "-0.2"])
def test_a_test_fraction_outside_0_1_is_a_user_error(tmp_path, capsys, command, fraction) -> None:  # type: ignore[no-untyped-def]
    args = ["costmodel", command, *(["m.pt", str(tmp_path)] if command == "evaluate" else [str(tmp_path), "-o", str(tmp_path / "m.pt")])]
    assert main([*args, "--test-fraction", fraction]) == 2
    assert "--test-fraction: a share of the kernels strictly between 0 and 1" in capsys.readouterr().err
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.slow
def test_collect_train_evaluate_autotune(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    import onnx

    import graph_ir

    data = tmp_path / "tile"
    data.mkdir()
    kernels = [{"kind": "matmul", "dims": [16, 24, 8], "source": "a/x"}, {"kind": "matmul", "dims": [8, 16, 32], "source": "b/x"},
               {"kind": "reduce", "dims": [16, 64], "source": "c/x"}, {"kind": "matmul", "dims": [2, 4, 3], "source": "d/x"}]
    (data / "kernels.json").write_text(json.dumps(kernels))
    os.environ["TVM_NUM_THREADS"] = "1"
    assert main(["costmodel", "collect", "--task", "tile", "--out", str(data), "--configs", "6", "--repeats", "2", "--no-progress"]) == 0
    assert "noise floor" in capsys.readouterr().out
    assert len(list(data.glob("*.npz"))) == 4
    model = tmp_path / "m.pt"
    assert main(["costmodel", "train", str(data), "-o", str(model), "--epochs", "5", "--hidden", "16", "--split", "program", "--test-fraction", "0.25"]) == 0
    assert main(["costmodel", "evaluate", str(model), str(data), "--split", "all"]) == 0
    report = json.loads(capsys.readouterr().out.split("\n}\n", 1)[1])
    assert report["kernels"] == 4 and -1 <= report["metrics"]["kendall"] <= 1

    source = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted", "test_Conv2d", "model.onnx")
    out = tmp_path / "tuned.onnx"
    cache = tmp_path / "tune.sqlite"
    args = ["autotune", source, "--task", "tile", "--cost-model", str(model), "--budget", "12", "--top-k", "3", "--cache", str(cache), "-o", str(out), "--no-progress"]
    assert main(args) == 0
    assert "1 kernels tuned" in capsys.readouterr().out
    tuned = graph_ir.load(str(out))
    convs = [n for n in tuned if n.op_type == "Conv"]
    assert convs and all(n.tile is not None and len(n.tile) == 4 * 3 + 3 * 2 + 4 for n in convs)  # 4 spatial x 3 + 3 reduction x 2 + flags
    # The tuned ONNX still computes the same thing (tiles are metadata for the kernel generator).
    import onnxruntime as ort

    session = ort.InferenceSession(source)
    feeds = {i.name: np.random.default_rng(0).standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()}
    before = session.run(None, feeds)
    after = ort.InferenceSession(str(out)).run(None, feeds)
    for a, b in zip(before, after):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # the export may pick another opset, hence another conv kernel
    # Resumable: a second run measures nothing (every top-k config is in the cache).
    import sqlite3

    rows = sqlite3.connect(cache).execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
    tuned_model = tmp_path / "tuned.pt"
    assert main(args + ["--finetune", "5", "--save-model", str(tuned_model)]) == 0
    assert sqlite3.connect(cache).execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == rows
    # The online update changed the weights (and the checkpoint loads back).
    from cost_model.learned.train import load_model

    before, after = load_model(model)[0].state_dict(), load_model(tuned_model)[0].state_dict()
    assert any(not np.allclose(before[k].numpy(), after[k].numpy()) for k in before)


def test_autotune_fusion_refuses_the_gbdt_ranker(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["autotune", "m.hlo", "-o", str(tmp_path / "x.hlo"), "--task", "fusion", "--ranker", "gbdt"]) == 2
    assert "ranks with the additive model" in capsys.readouterr().err
    assert main(["autotune", "m.onnx", "-o", str(tmp_path / "x.onnx"), "--task", "tile", "--ranker", "additive"]) == 2
    assert "--ranker additive ranks fusions" in capsys.readouterr().err
    assert main(["autotune", "m.hlo", "-o", str(tmp_path / "x.hlo"), "--task", "fusion", "--extra-k", "5"]) == 2
    assert "--extra-k is for --task tile" in capsys.readouterr().err
    assert main(["autotune", "m.onnx", "-o", str(tmp_path / "x.onnx"), "--task", "tile", "--extra-k", "-1"]) == 2
    assert "--extra-k must be >= 0" in capsys.readouterr().err and not (tmp_path / "x.onnx").exists()
    assert main(["autotune", "m.hlo", "-o", str(tmp_path / "x.hlo"), "--task", "fusion", "--prefilter", "0.5"]) == 2
    assert "--prefilter is for --task tile" in capsys.readouterr().err
    assert main(["autotune", "m.onnx", "-o", str(tmp_path / "x.onnx"), "--task", "tile", "--prefilter", "0"]) == 2
    assert "--prefilter must be a fraction in (0, 1]" in capsys.readouterr().err and not (tmp_path / "x.onnx").exists()
    for task in ("tile", "fusion"):
        for flag in ("--top-k", "--budget"):
            assert main(["autotune", "m.onnx", "-o", str(tmp_path / "x.onnx"), "--task", task, flag, "0"]) == 2
            assert f"{flag} must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_autotune_with_the_shipped_gbdt_ranker_end_to_end(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tvm")
    pytest.importorskip("xgboost")
    import onnx

    import graph_ir
    from cost_model.learned.gbdt_predictor import GbdtTilePredictor

    os.environ["TVM_NUM_THREADS"] = "1"
    source = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted", "test_Conv2d", "model.onnx")
    out, cache, saved = tmp_path / "tuned.onnx", tmp_path / "tune.sqlite", tmp_path / "tuned.ubj"
    args = ["autotune", source, "--task", "tile", "--ranker", "gbdt", "--budget", "12", "--top-k", "3", "--cache", str(cache), "-o", str(out),
            "--no-progress", "--finetune", "4", "--save-model", str(saved)]
    assert main(args) == 0
    assert "1 kernels tuned" in capsys.readouterr().out
    convs = [n for n in graph_ir.load(str(out)) if n.op_type == "Conv"]
    assert convs and all(n.tile is not None for n in convs)
    shipped, tuned = GbdtTilePredictor.packaged(), GbdtTilePredictor.load(saved)
    assert tuned.extra["finetune_rounds"] == 4 and tuned.extra["finetuned_on"] == "model.onnx"
    assert tuned.gbdt.booster.num_boosted_rounds() == shipped.gbdt.booster.num_boosted_rounds() + 4


@pytest.mark.slow
def test_collect_fusion_one_graph_in_a_fresh_process(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.tpugraphs import load_dir

    data = tmp_path / "fusion"
    assert main(["costmodel", "collect", "--task", "fusion", "--out", str(data), "--graphs", "swiglu@1", "--configs", "3", "--repeats", "2",
                 "--reference", "none", "--no-progress"]) == 0
    assert "fusion: 1 files" in capsys.readouterr().out
    (record,) = load_dir(data)
    assert record.name == "swiglu@1" and record.num_configs == 3 and "reference" not in record.meta
    assert record.node_conv_time is not None and not record.node_conv_time.any()  # conv times added afterwards (no conv here: zeros)
    summary = json.loads((data / "dataset.json").read_text())
    assert summary["machine"]["repeats"] == 2 and summary["xla_timing"]["isolated"] is True and summary["xla_timing"]["child_applied"] is True


def test_conv_times_command_times_a_folders_convs(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`costmodel conv-times DIR`: the convs of a fusion file timed alone for real (cached in
    DIR/measurements.sqlite, so a rerun times nothing) and stored per node."""
    pytest.importorskip("jax")
    from compiler_opt.costmodel.fusion_collect import fusion_record
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import Decisions, node_order
    from cost_model.learned.tpugraphs import load_npz, save_npz

    nodes = node_order(fusion_graph("dw_sep@1"))
    save_npz(fusion_record("dw_sep@1", nodes, [Decisions.default(len(nodes))], [2e-4], {}), tmp_path / "dw_sep@1.npz")
    assert main(["costmodel", "conv-times", str(tmp_path), "--repeats", "3"]) == 0
    assert "2 distinct convs (2 timed now" in capsys.readouterr().out
    seconds = load_npz(tmp_path / "dw_sep@1.npz").node_conv_time
    convs = np.array([n.kind.value == "conv" for n in nodes])
    assert (seconds[convs] > 0).all() and (seconds[convs] < 0.05).all() and not seconds[~convs].any()
    assert main(["costmodel", "conv-times", str(tmp_path)]) == 0
    assert "(0 timed now" in capsys.readouterr().out


def test_code_feature_set_choices_match_the_feature_sets() -> None:
    """The CLI lists the sets by hand (its module imports only the standard library); a set added to
    `tile_code_features` must be offered there too."""
    from compiler_opt.cli.main import build_parser
    from cost_model.learned.tile_code_features import CODE_FEATURE_SETS

    parser = build_parser()
    costmodel = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith("costmodel"))
    train = costmodel._subparsers._group_actions[0].choices["train"]
    action = next(a for a in train._actions if "--code-feature-set" in a.option_strings)
    assert tuple(action.choices) == CODE_FEATURE_SETS


def test_an_output_that_cannot_be_written_fails_before_the_work(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    model = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "small_cnn.onnx")
    missing = tmp_path / "no_such_folder"
    for task in ("tile", "fusion"):  # measuring would take minutes; the typo must cost a second
        assert main(["autotune", model, "-o", str(missing / "x.onnx"), "--task", task, "--no-progress"]) == 2
        assert "output folder does not exist" in capsys.readouterr().err
    assert main(["autotune", model, "-o", str(tmp_path / "x.txt"), "--task", "tile", "--no-progress"]) == 2
    assert "unknown model format" in capsys.readouterr().err
    assert main(["autotune", model, "-o", str(tmp_path / "x.onnx"), "--save-model", str(missing / "m.json"), "--no-progress"]) == 2
    assert "--save-model" in capsys.readouterr().err
    assert main(["costmodel", "train", str(tmp_path), "-o", str(missing / "m.json"), "--model", "gbdt-ens"]) == 2
    assert "output folder" in capsys.readouterr().err and not missing.exists()


def test_collect_fusion_refuses_an_unknown_graph_name(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Forty-ninth session: a typo in --graphs left no graph and ended later as "no .npz files"."""
    out = tmp_path / "fusion"
    assert main(["costmodel", "collect", "--task", "fusion", "--out", str(out), "--graphs", "mlp@1,mpl@1"]) == 2
    err = capsys.readouterr().err
    assert "unknown fusion graph(s) ['mpl@1']" in err and "mlp@1" in err and not out.exists()
