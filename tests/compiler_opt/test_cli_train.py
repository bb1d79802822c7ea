"""`compiler-opt train` in-process: go-one writes checkpoints carrying config and command;
zero-shot applies one; errors exit 2."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from compiler_opt.cli.main import main
from compiler_opt.policy import load_checkpoint
from compiler_opt.workloads.synthetic import random_onnx_dag


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("train") / "dag.onnx"
    onnx.save(random_onnx_dag(40, seed=2), str(path))
    return path


def test_go_one_then_zero_shot(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--mode", "go-one", "--workloads", str(model), "--devices", "2xV100", "--iterations", "2", "--samples", "2", "--out", str(out), "--threads", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ratio to reference" in printed and "@2xV100" in printed
    policy, meta = load_checkpoint(out / "latest.pt")
    assert meta["command"].startswith("compiler-opt train --mode go-one")
    assert meta["train_config"]["mode"] == "go-one" and meta["train_config"]["iterations"] == 2
    assert (out / "best.pt").is_file() and (out / "scalars.csv").is_file() or (out / "tensorboard").is_dir()
    argv = ["train", "--mode", "zero-shot", "--workloads", str(model), "--devices", "4xV100", "--checkpoint", str(out / "best.pt"), "--samples", "2", "--threads", "1"]
    assert main(argv) == 0
    assert "@4xV100" in capsys.readouterr().out


def test_zero_shot_and_fine_tune_default_to_the_shipped_checkpoint(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Forty-ninth session: zero-shot works right after install with no --checkpoint; an explicit empty one
    (a fresh policy) still fails cleanly in the modes that need a pretrained one."""
    from compiler_opt.cli.main import build_parser
    from compiler_opt.cli.train_lib import config_from_args

    def checkpoint(*argv: str) -> str:
        return config_from_args(build_parser().parse_args(["train", "--workloads", str(model), *argv])).init_checkpoint

    assert checkpoint("--mode", "zero-shot") == checkpoint("--mode", "fine-tune") == "default"
    assert checkpoint("--mode", "go-one") == checkpoint("--mode", "pretrain") == ""  # these train a fresh policy
    assert checkpoint("--mode", "fine-tune", "--checkpoint", "x.pt") == "x.pt"
    assert checkpoint("--mode", "fine-tune", "--policy", "hidden=16") == ""  # sizes of a fresh policy: not overridden by the default
    argv = ["train", "--mode", "zero-shot", "--workloads", str(model), "--devices", "2xV100", "--samples", "2", "--out", str(tmp_path), "--threads", "1"]
    assert main(argv) == 0
    assert "@2xV100" in capsys.readouterr().out
    assert main(["train", "--mode", "fine-tune", "--workloads", str(model), "--checkpoint", "", "--out", str(tmp_path), "--threads", "1"]) == 2
    assert "init_checkpoint" in capsys.readouterr().err


def test_seeds_and_entropy_target_reach_the_config(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--mode", "go-one", "--workloads", str(model), "--devices", "2xV100", "--iterations", "1", "--samples", "2",
            "--seeds", "metis,critical-path", "--entropy-target", "2.5", "--out", str(out), "--threads", "1"]
    assert main(argv) == 0
    _, meta = load_checkpoint(out / "latest.pt")
    assert meta["train_config"]["warm_start"] == ["metis", "critical-path"] and meta["train_config"]["entropy_target"] == 2.5
    assert meta["train_config"]["polish_evaluations"] == 300 and "polish: local search" in capsys.readouterr().out
    argv[argv.index("--entropy-target")] = "--polish"
    argv[argv.index("2.5")] = "0"
    assert main(argv) == 0
    _, meta = load_checkpoint(out / "latest.pt")
    assert meta["train_config"]["polish_fraction"] == 0.0 and "polish:" not in capsys.readouterr().out
    assert main(["train", "--mode", "go-one", "--workloads", str(model), "--seeds", "nope", "--out", str(tmp_path), "--threads", "1"]) == 2
    assert "warm-start" in capsys.readouterr().err


def test_generated_graphs_are_written_into_the_config() -> None:
    from compiler_opt.cli.main import build_parser
    from compiler_opt.cli.train_lib import config_from_args
    from compiler_opt.workloads.variants import random_variants

    argv = ["train", "--mode", "imitate", "--workloads", "rnnlm-2:inference", "--generated", "4", "--generated-seed", "5", "--seed", "1"]
    config = config_from_args(build_parser().parse_args(argv))
    assert config.workloads == ["rnnlm-2:inference", *random_variants(4, seed=5)] and config.seed == 1
    # the draw does not follow --seed: a second training seed sees the same graphs
    assert config_from_args(build_parser().parse_args(argv[:-4] + ["--seed", "2"])).workloads == ["rnnlm-2:inference", *random_variants(4, seed=0)]
    args = build_parser().parse_args(["train", "--workloads", "rnnlm-2:inference"])
    assert config_from_args(args).workloads == ["rnnlm-2:inference"]


def test_policy_sizes_reach_a_fresh_policy_and_bad_ones_are_refused(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--mode", "go-one", "--workloads", str(model), "--devices", "2xV100", "--iterations", "1", "--samples", "2",
            "--seeds", "off", "--polish", "0", "--policy", "hidden=16,sage_layers=3", "--out", str(out), "--threads", "1"]
    assert main(argv) == 0
    policy, meta = load_checkpoint(out / "latest.pt")
    assert policy.config.hidden == 16 and policy.config.sage_layers == 3 and meta["train_config"]["policy"] == {"hidden": 16, "sage_layers": 3}
    capsys.readouterr()
    for sizes, message in (("hidden=1x", "expected KEY=INTEGER"), ("width=3", "unknown policy config fields"), ("hidden=18", "multiple of heads")):
        assert main([*argv[:-6], "--policy", sizes, "--out", str(tmp_path / "bad"), "--threads", "1"]) == 2
        assert message in capsys.readouterr().err
    assert main([*argv[:-6], "--policy", "hidden=16", "--checkpoint", str(out / "latest.pt"), "--out", str(tmp_path / "bad"), "--threads", "1"]) == 2
    assert "the --checkpoint brings its own" in capsys.readouterr().err
