"""Paper cuts of issue 12, each pinned: space-separated `bench` lists, FLOPs of an untyped ONNX
file without `--infer-shapes`, frozen GraphDef weights and Placeholders, pipeline typos blamed on
the pipeline, `fuse{max-nodes=0}` refused, units in `bench` headers (a crashing pass exiting 1: test_cli_convert.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest

from compiler_opt.cli.main import build_parser, main

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_takes_space_separated_lists_as_the_readme_writes_them():
    args = build_parser().parse_args(["bench", "--workloads", "a", "b,c", "--devices", "2xV100", "4xV100", "--methods", "m-etf", "dp"])
    assert args.workloads == ["a", "b,c"] and args.devices == ["2xV100", "4xV100"] and args.methods == ["m-etf", "dp"]


def test_inspect_light_resnet50_counts_flops_without_infer_shapes(capsys, onnx_backend_data):
    path = onnx_backend_data / "light" / "light_resnet50.onnx"
    code, out, _ = _run(capsys, "inspect", str(path), "--json")
    assert code == 0
    assert json.loads(out)["flops"] > 7e9  # ResNet-50 at 224x224: ~8.2 GFLOPs (2 per MAC)


def test_frozen_graphdef_counts_const_weights_and_lists_its_placeholder(capsys, shared_testdata):
    path = shared_testdata / "external" / "tf" / "onnx-tensorflow-onnx__tests__models__fc-layers__frozen.pb"
    if not path.is_file():
        pytest.skip(f"{path.name} not in the shared test data")
    code, out, _ = _run(capsys, "inspect", str(path), "--json")
    summary = json.loads(out)
    # 784x256 + 256 + 256x256 + 256 + 256x10 + 10 float32 weights in six Const nodes
    assert code == 0 and summary["parameters"] == 269322 and summary["constant_nodes"] == 6
    assert [i["name"] for i in summary["inputs"]] == ["X:0"]


def test_pipeline_typo_is_blamed_on_the_pipeline_not_the_input(capsys, example_model, tmp_path):
    code, _, err = _run(capsys, "convert", str(example_model), str(tmp_path / "o.onnx"), "-p", "dce,fusee")
    assert code == 2 and err.startswith("compiler-opt: error: --passes dce,fusee: unknown pass 'fusee'")
    assert str(example_model) not in err


@pytest.mark.parametrize("pipeline", ["fuse{max-nodes=0}", "fuse-by-priority{max-nodes=-1}", "fuse{max-duplicates=-1}"])
def test_fusion_limits_that_make_no_sense_are_refused(capsys, example_model, tmp_path, pipeline):
    code, _, err = _run(capsys, "convert", str(example_model), str(tmp_path / "o.onnx"), "-p", pipeline)
    assert code == 2 and "must be" in err and not (tmp_path / "o.onnx").exists()


def test_bench_headers_carry_units():
    from compiler_opt.cli.bench_lib import bench_tables

    row = {"workload": "w", "kind": "graph", "devices": "2xV100", "method": "m-etf", "objective": "latency", "objective_value": 1e-3}
    headers = bench_tables([row])[0].headers
    assert "latency (s)" in headers and "search (s)" in headers and "peak mem (x capacity)" in headers


def test_readme_names_no_machine_path():
    text = (REPO_ROOT / "README.md").read_text()
    assert "/work/" not in text and "/root/" not in text and "/home/" not in text
