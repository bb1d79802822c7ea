"""`bench` at paper sizes (issue 9, item 4): the default sizes, the equal-time budget rule of
`sa`/`random`, the one-GPU launch share, the max-nodes refusal and bench_placement.py's JSON."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from compiler_opt.cli.bench_cells import equal_time_budget, launch_share, order_methods
from compiler_opt.cli.bench_lib import BenchSpec, run_bench
from compiler_opt.cli.main import build_parser
from compiler_opt.workloads import build_workload, list_workloads
from compiler_opt.workloads.registry import WorkloadError

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_equal_time_budget_is_the_larger_of_the_minimum_and_the_slowest_methods_time() -> None:
    assert equal_time_budget(2000, 1.0, 0.01) == 2000  # 100 evaluations fit: the minimum wins
    assert equal_time_budget(2000, 30.0, 0.01) == 3000  # the slowest method ran 30 s: 3000 fit
    assert equal_time_budget(2000, 30.001, 0.01) == 3001  # rounded up, never less time
    assert equal_time_budget(5, 0.0, 0.01) == 5  # no other method ran
    with pytest.raises(ValueError, match="at least 1"):
        equal_time_budget(0, 1.0, 0.01)


def test_searches_run_after_every_other_method() -> None:
    assert order_methods(["random", "metis", "sa", "m-sct"]) == ["metis", "m-sct", "random", "sa"]


def test_bench_raises_the_search_budget_to_the_slowest_methods_cpu_time(example_model: Path) -> None:
    spec = BenchSpec([str(example_model)], devices=["2xV100"], methods=["random", "m-sct", "sa"], budget=3)
    rows = run_bench(spec, progress=False)
    assert [r["method"] for r in rows] == ["m-sct", "random", "sa"]  # searches last, whatever the order given
    slowest = rows[0]["search_cpu_seconds"]
    for row in rows[1:]:
        rule = row["budget_rule"]
        assert rule["minimum"] == 3 and rule["slowest_other_cpu_s"] == slowest
        assert row["budget"] == equal_time_budget(3, slowest, rule["evaluation_cpu_s"])
        assert row["evaluations"] == row["budget"]  # the search spent what the rule gave it
    plain = run_bench(BenchSpec([str(example_model)], devices=["2xV100"], methods=["m-sct", "random"], budget=3, equal_time=False), progress=False)
    assert plain[1]["evaluations"] == 3 and "budget_rule" not in plain[1]


def test_bench_builds_suite_workloads_at_paper_sizes_by_default() -> None:
    assert BenchSpec(["x"]).paper_sizes is True
    args = build_parser().parse_args(["bench", "--workloads", "rnnlm-2:inference"])
    assert not args.default_sizes
    small_args = build_parser().parse_args(["bench", "--workloads", "rnnlm-2:inference", "--default-sizes"])
    assert small_args.default_sizes
    common = {"devices": ["2xV100"], "methods": ["single-device"]}
    paper = run_bench(BenchSpec(["rnnlm-2:inference"], **common), progress=False)[0]
    small = run_bench(BenchSpec(["rnnlm-2:inference"], paper_sizes=False, **common), progress=False)[0]
    assert paper["sizes"] == "paper" and small["sizes"] == "default"
    assert paper["nodes"] == len(build_workload("rnnlm-2", "inference", paper=True))
    assert small["nodes"] == len(build_workload("rnnlm-2", "inference"))
    assert paper["default_fusion"] != "none"
    # The point of paper sizes: the small RNNLM step is mostly launch overhead, the paper one is not.
    assert small["launch_share"] > 0.5 > 0.1 > paper["launch_share"] > 0.0
    # Everything on one GPU of the 2-GPU box is the one-GPU step.
    assert paper["objective_value"] == pytest.approx(paper["one_gpu_step_s"], rel=1e-9)


def test_launch_share_counts_one_launch_per_kernel(example_model: Path) -> None:
    import numpy as np

    from compiler_opt.cli.simulate_lib import load_simulation_graph
    from cost_model.decisions import node_order
    from cost_model.devices import load_topology

    graph, _ = load_simulation_graph(str(example_model))
    unfused = launch_share(graph, np.full(len(node_order(graph)), -1, dtype=np.int32))
    topology = load_topology("1xV100")
    launch = topology.devices[topology.device_names.index(unfused.device)].launch_overhead_s
    assert unfused.device.startswith("gpu")  # the GPU, not the host CPU the topology also holds
    assert unfused.launch_s == pytest.approx(unfused.kernels * launch)
    assert 0.0 < unfused.share < 1.0 and unfused.step_s > unfused.launch_s


def test_graphs_above_max_nodes_get_rows_that_say_so(example_model: Path) -> None:
    rows = run_bench(BenchSpec([str(example_model)], devices=["2xV100", "4xV100"], methods=["metis", "sa"], max_nodes=5), progress=False)
    assert len(rows) == 4 and all(r["objective_value"] is None for r in rows)
    assert all("above max_nodes=5" in r["error"] and "too large" in r["error"] for r in rows)


def test_every_workload_documents_its_paper_sizes() -> None:
    for workload in list_workloads():
        assert len(workload.paper_source) > 20, workload.name


def test_transformer_xl_takes_heads_of_odd_width() -> None:
    # The base model has 10 heads of 41; heads of 21 here, at a size that lowers in seconds.
    sizes = {"layers": 1, "d_model": 42, "heads": 2, "d_ff": 64, "seg_len": 8, "mem_len": 8, "vocab": 100, "batch": 2}
    graph = build_workload("transformer-xl", "inference", **sizes)
    graph.verify()
    shapes = {tuple(v.type.shape) for node in graph for v in node.outputs if hasattr(v.type, "shape")}
    assert any(len(s) == 4 and s[-1] == 21 for s in shapes)  # [.., heads, 21] head tensors
    with pytest.raises(WorkloadError, match="must be even"):
        build_workload("transformer-xl", "inference", **{**sizes, "d_model": 43, "heads": 1})


def _bench_placement(monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("bench_placement", REPO_ROOT / "benchmarks" / "bench_placement.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_placement", module)
    spec.loader.exec_module(module)
    return module


def test_bench_placement_writes_its_rows_as_it_goes(tmp_path: Path, example_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench_placement(monkeypatch)
    out = tmp_path / "rows.json"
    seen: list[int] = []
    real_write = bench._write

    def spy(path: Path, data: dict) -> None:  # records each rewrite, then writes for real
        seen.append(len(data["rows"]))
        real_write(path, data)

    monkeypatch.setattr(bench, "_write", spy)
    code = bench.main(["--workloads", str(example_model), "--devices", "2xV100", "--methods", "metis", "random",
                       "--budget", "4", "--default-sizes", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["complete"] is True and data["paper_sizes"] is False and data["equal_time"] is True
    assert [r["method"] for r in data["rows"]] == ["metis", "random"]
    assert seen == [1, 2, 2]  # after each row, then the finished rows


PAPER_CASES = [(w.name, mode) for w in list_workloads() for mode in w.modes]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), PAPER_CASES, ids=[f"{n}:{m}" for n, m in PAPER_CASES])
def test_every_workload_builds_at_paper_size(name: str, mode: str) -> None:
    """The paper-size graph builds, verifies and simulates on one V100 (the largest, gnmt-8:train,
    takes many minutes to lower on two cores; see WORKSPACE.md for the measured sizes)."""
    import numpy as np

    from cost_model.decisions import node_order

    paper = build_workload(name, mode, paper=True)
    paper.verify()
    assert len(paper) >= len(build_workload(name, mode))
    one = launch_share(paper, np.full(len(node_order(paper)), -1, dtype=np.int32))
    assert one.step_s > 0 and 0.0 < one.share < 1.0


def test_placement_table_merges_files_and_leaves_unfinished_cells_out_of_the_summary(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("placement_table", REPO_ROOT / "benchmarks" / "placement_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    base = {"workload": "w:inference", "nodes": 10, "one_gpu_step_s": 0.004, "launch_share": 0.25, "lower_bound": 0.001}
    done = [{**base, "devices": "2xV100", "method": m, "objective_value": 0.002 if m == "m-etf" else 0.004, "evaluations": 7} for m in table.METHODS]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"rows": done[:3]}))
    second.write_text(json.dumps({"rows": done[3:] + [{**base, "devices": "4xV100", "method": "metis", "objective_value": 0.001}]}))
    text = table.markdown(table.load_rows([str(first), str(second)]))
    lines = text.splitlines()
    assert "| w:inference | 2 | 10 | 4 | 25.0% | 1 |" in lines[2] and "**2**" in lines[2] and lines[2].endswith("| 7/7 |")
    assert "…" in lines[3]  # the 4-GPU cell has one method only
    assert "(1 complete cells)" in lines[4]  # ... and is not in the geomean
    assert lines[5].split("|")[7 + table.METHODS.index("m-etf")].strip() == "1.0"  # m-etf won the finished cell


def test_fusion_aware_bench_scores_the_fused_step_in_the_search() -> None:
    common = {"devices": ["2xV100"], "methods": ["single-device", "sa"], "budget": 150, "paper_sizes": False, "equal_time": False}
    aware = {r["method"]: r for r in run_bench(BenchSpec(["rnnlm-2:inference"], fusion_aware=True, **common), progress=False)}
    plain = {r["method"]: r for r in run_bench(BenchSpec(["rnnlm-2:inference"], **common), progress=False)}
    assert aware["sa"]["fusion_aware"] is True and plain["sa"]["fusion_aware"] is False
    assert aware["single-device"]["objective_value"] == pytest.approx(plain["single-device"]["objective_value"], rel=1e-12)
    assert aware["sa"]["objective_value"] <= aware["single-device"]["objective_value"] * (1 + 1e-9)
    assert plain["sa"]["objective_value"] > aware["sa"]["objective_value"]
