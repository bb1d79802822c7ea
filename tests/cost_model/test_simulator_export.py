"""Chrome trace JSON and Gantt PNG exports of a simulated timeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cost_model.simulator import SimulationProblem, plot_gantt, simulate, to_chrome_trace
from test_simulator import decide, diamond, topology


@pytest.fixture()
def result():
    problem = SimulationProblem.from_graph(diamond().graph, topology(2))
    return simulate(problem, decide(problem, [0, 0, 1, 0]))


def test_chrome_trace_is_valid_json_with_complete_events(result, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    to_chrome_trace(result, path)
    payload = json.loads(path.read_text())
    events = payload["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 4 + 2  # four kernels, two single-hop transfers
    for event in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid"} <= event.keys()
        assert event["dur"] >= 0 and isinstance(event["pid"], int)
    by_name = {e["name"]: e for e in complete if e["cat"] == "compute"}
    # D runs on d0 from 28 us for 13 us (see test_simulator's diamond).
    assert by_name["D"]["pid"] == 0 and by_name["D"]["tid"] == 0
    assert by_name["D"]["ts"] == pytest.approx(28.0) and by_name["D"]["dur"] == pytest.approx(13.0)
    copies = [e for e in complete if e["cat"] == "transfer"]
    assert sorted((e["pid"], e["tid"]) for e in copies) == [(0, 2), (1, 1)]  # d0 -> d1, d1 -> d0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"d0", "d1"}
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # written atomically, no leftovers


def test_gantt_png_is_written(result, tmp_path: Path) -> None:
    path = tmp_path / "out" / "gantt.png"
    plot_gantt(result, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
