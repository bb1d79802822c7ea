"""`compiler-opt bench`: JSON rows with the documented keys, tables, and exit 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler_opt.cli.main import main

PLACEMENT = Path(__file__).resolve().parents[2].parent / "shared" / "testdata" / "placement"
needs_data = pytest.mark.skipif(not PLACEMENT.is_dir(), reason="shared/testdata/placement is not beside this checkout")
KEYS = {"workload", "method", "devices", "objective", "objective_value", "lower_bound", "search_seconds", "vs_expert", "vs_lower_bound", "oom"}


@needs_data
def test_profiled_rows_carry_the_readme_references(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    workload = PLACEMENT / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    code = main(["bench", "--workloads", str(workload), "--methods", "dp,sa,human-expert,expert", "--budget", "50",
                 "--expert", str(PLACEMENT / "human-experts"), "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["method"] for r in rows] == ["dp", "sa", "human-expert", "expert"]
    for row in rows:
        assert KEYS <= set(row)
        assert row["objective"] == "throughput" and row["devices"] == "6acc+cpu"
        assert row["reference_optimum"] == 17.79 and row["reference_expert"] == 20.08
    by_method = {r["method"]: r for r in rows}
    assert by_method["expert"]["objective_value"] == pytest.approx(20.08, rel=0.01)
    assert by_method["expert"]["vs_expert"] == pytest.approx(1.0)
    assert by_method["dp"]["objective_value"] == pytest.approx(17.79, rel=1e-3)
    assert by_method["sa"]["evaluations"] == 50
    printed = capsys.readouterr().out
    assert "geomean" in printed and "README optimum" in printed


def test_graph_workloads_run_per_topology(tmp_path: Path, example_model: Path) -> None:
    out = tmp_path / "rows.json"
    # Space- and comma-separated topologies both work.
    code = main(["bench", "--workloads", str(example_model), "--devices", "2xV100", "4xV100", "--methods", "dp,random",
                 "--budget", "5", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [(r["devices"], r["method"]) for r in rows] == [("2xV100", "dp"), ("2xV100", "random"), ("4xV100", "dp"), ("4xV100", "random")]
    for row in rows:
        assert KEYS <= set(row) and row["objective"] == "latency"
        assert row["objective_value"] >= row["lower_bound"] * (1 - 1e-9)


@pytest.mark.parametrize(
    "argv",
    [
        ["--workloads", "no-such-workload"],
        ["--workloads", "missing.onnx"],
        ["--workloads", "examples/small_cnn.onnx", "--methods", "nonsense"],
        ["--workloads", "examples/small_cnn.onnx", "--budget", "0"],
        ["--workloads", "examples/small_cnn.onnx", "--expert", "missing_expert.json"],
        ["--workloads", "examples"],
        ["--workloads", "examples/small_cnn.onnx", "--costs", "guesswork"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str], repo_root: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo_root)
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiler-opt: error:")


def test_go_rows_run_the_learned_policy_on_graph_workloads(tmp_path: Path, example_model: Path) -> None:
    out = tmp_path / "rows.json"
    code = main(["bench", "--workloads", str(example_model), "--devices", "2xV100", "--methods", "human-expert", "go-zero-shot",
                 "--json", str(out)])
    assert code == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())}
    go = rows["go-zero-shot"]
    assert "error" not in go and go["objective_value"] >= go["lower_bound"] * (1 - 1e-9)
    assert go["vs_expert"] is not None and go["search_seconds"] > 0


def _tf_chain_pb(path: Path, layers: int = 3, width: int = 64) -> Path:
    """A binary TF GraphDef: x -> (MatMul, Relu) x layers, constant weights."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    f32 = 'attr { key: "T" value { type: DT_FLOAT } }'
    weight = ('attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT '
              f'tensor_shape {{ dim {{ size: {width} }} dim {{ size: {width} }} }} float_val: 0.01 }} }} }}')
    text = [f'node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
            f'attr {{ key: "shape" value {{ shape {{ dim {{ size: 32 }} dim {{ size: {width} }} }} }} }} }}']
    prev = "x"
    for i in range(layers):
        text.append(f'node {{ name: "w{i}" op: "Const" {weight} }}')
        text.append(f'node {{ name: "m{i}" op: "MatMul" input: "{prev}" input: "w{i}" {f32} }}')
        text.append(f'node {{ name: "r{i}" op: "Relu" input: "m{i}" {f32} }}')
        prev = f"r{i}"
    path.write_bytes(text_format.Parse("\n".join(text), graph_pb2.GraphDef()).SerializeToString())
    return path


@pytest.mark.slow  # TF, JAX and a suite build: minutes on the shared 2-core machine
def test_workloads_take_model_files_of_every_format_beside_suite_names(tmp_path: Path) -> None:
    """`--workloads` mixes .pb, .hlo, .mlir files and a suite name; each is placed and scored,
    and the HDP-style reference runs as a method."""
    import jax
    import numpy as np

    from compiler_opt.workloads import export_workload

    pb = _tf_chain_pb(tmp_path / "chain.pb")
    hlo = export_workload("rnnlm-2", "inference", tmp_path / "rnnlm.hlo", steps=2)
    mlir = tmp_path / "mlp.mlir"
    mlir.write_text(jax.jit(lambda x, w: jax.nn.relu(x @ w) @ w).lower(np.ones((8, 32), np.float32), np.ones((32, 32), np.float32)).as_text())
    out = tmp_path / "rows.json"
    code = main(["bench", "--workloads", str(pb), str(hlo), str(mlir), "rnnlm-2:inference", "--devices", "2xV100",
                 "--methods", "human-expert,hdp", "--budget", "16", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["workload"] for r in rows[::2]] == ["chain.pb", "rnnlm.hlo", "mlp.mlir", "rnnlm-2:inference"]
    for row in rows:
        assert "error" not in row and row["nodes"] >= 3
        assert row["objective_value"] >= row["lower_bound"] * (1 - 1e-9)
    hdp = [r for r in rows if r["method"] == "hdp"]
    assert all(r["evaluations"] == 16 and r["vs_expert"] is not None for r in hdp)


def test_hdp_row_on_a_stablehlo_file(tmp_path: Path) -> None:
    """The fast tier of the above: one .mlir file, the HDP row trained for 2 updates."""
    import jax
    import numpy as np

    mlir = tmp_path / "mlp.mlir"
    mlir.write_text(jax.jit(lambda x, w: jax.nn.relu(x @ w) @ w).lower(np.ones((8, 32), np.float32), np.ones((32, 32), np.float32)).as_text())
    out = tmp_path / "rows.json"
    assert main(["bench", "--workloads", str(mlir), "--devices", "2xV100", "--methods", "human-expert,hdp", "--budget", "16", "--json", str(out)]) == 0
    rows = {r["method"]: r for r in json.loads(out.read_text())}
    assert rows["hdp"]["workload"] == "mlp.mlir" and rows["hdp"]["evaluations"] == 16 and "error" not in rows["hdp"]
    assert rows["hdp"]["objective_value"] >= rows["hdp"]["lower_bound"] * (1 - 1e-9)


_TWO_MODULES = """HloModule small
ENTRY main {
  p = f32[8,8] parameter(0)
  ROOT n = f32[8,8] negate(p)
}

// -----

HloModule larger
ENTRY main {
  p = f32[16,16] parameter(0)
  d = f32[16,16] dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[16,16] tanh(d)
}
"""


def test_a_module_of_a_multi_module_hlo_file_as_a_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`FILE#N` picks module N of a multi-module HLO file in bench, simulate and training specs;
    the bare file names the modules and the way to pick one."""
    from compiler_opt.rl.trainer import load_graph

    hlo = tmp_path / "two.hlo"
    hlo.write_text(_TWO_MODULES)
    out = tmp_path / "rows.json"
    assert main(["bench", "--workloads", f"{hlo}#1", "--devices", "2xV100", "--methods", "metis", "--json", str(out)]) == 0
    row = json.loads(out.read_text())[0]
    assert row["workload"] == "two.hlo#1" and row["nodes"] == 2 and "error" not in row  # dot, tanh
    assert len(load_graph(f"{hlo}#0")[1]) == 1 and len(load_graph(f"{hlo}#1")[1]) == 2
    assert main(["simulate", f"{hlo}#5", "--devices", "2xV100"]) == 2
    assert "module 5 requested, the file holds 2" in capsys.readouterr().err
    assert main(["bench", "--workloads", str(hlo), "--devices", "2xV100", "--methods", "metis"]) == 2
    assert "FILE#N" in capsys.readouterr().err
