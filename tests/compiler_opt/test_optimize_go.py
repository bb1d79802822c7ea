"""The learned GO policy inside `optimize()`: `method="go"` (zero-shot with the shipped
checkpoint) and the `auto` portfolio, which takes GO as its third method where torch is
installed. Both results must run equal to the original in onnxruntime."""

from __future__ import annotations

import pytest

import compiler_opt
from compiler_opt.api import AUTO_METHODS, CLASSICAL_AUTO_METHODS, GO_AVAILABLE

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(not GO_AVAILABLE, reason="the GO policy needs torch and torch_geometric")


def test_go_is_in_the_auto_portfolio_where_torch_is_installed():
    assert AUTO_METHODS[:3] == CLASSICAL_AUTO_METHODS[:2] + ("go",)
    assert set(AUTO_METHODS) - {"go"} == set(CLASSICAL_AUTO_METHODS)


def test_method_go_places_fuses_and_checks(example_model):
    result = compiler_opt.optimize(str(example_model), target="2xV100", method="go", check=True)
    assert result.method == "go" and set(result.candidates) == {"go"}
    assert result.numerics.ok, result.numerics.one_line()
    assert result.step_time_after_s >= result.lower_bound_s > 0
    assert all(node.device in ("gpu0", "gpu1") for node in result.graph if node.op_type != "Constant")


def test_auto_runs_go_within_the_budget_and_keeps_the_best(example_model):
    # The first two methods take well under a second on the small CNN; a 20 s budget lets the
    # third (GO) start, and GO's zero-shot sampling then spends it, so the rest are skipped.
    result = compiler_opt.optimize(str(example_model), target="4xV100", method="auto", budget_s=20, check=True)
    assert "go" in result.candidates, result.notes
    assert result.method == min(result.candidates, key=result.candidates.get)
    assert result.numerics.ok


def test_auto_does_not_import_torch_when_the_budget_stops_before_go(example_model):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(compiler_opt.__file__).resolve().parents[1])  # this checkout, not an installed copy
    code = (
        "import sys, compiler_opt; compiler_opt.optimize(sys.argv[1], method='auto', budget_s=0, check=False); "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(example_model)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_method_go_spends_its_budget_on_seeds_and_search_after_the_answer(example_model):
    """`method="go"` with seconds to spend adds the warm start's seeds and a local search after the policy's answer
    (split as the ten-second zero-shot splits its 5 s); below a second it is the answer alone. The warm result keeps
    the policy's greedy answer among its candidates, so it is never slower than the cold one here."""
    from compiler_opt.api.optimize import GO_MIN_WARM_BUDGET_S, _go_pipeline

    assert _go_pipeline(3, GO_MIN_WARM_BUDGET_S / 2) == "go{seed=3}"
    assert _go_pipeline(0, 5.0) == "go{seed=0,seeds=default,seed-seconds=2,polish-seconds=3}"
    cold = compiler_opt.optimize(str(example_model), target="4xV100", method="go", budget_s=0, check=False)
    warm = compiler_opt.optimize(str(example_model), target="4xV100", method="go", budget_s=2, check=True)
    placement = [p.name for p in warm.passes if p.stage == "placement"]
    assert len(placement) == 1 and "seeds=default" in placement[0] and "polish-seconds=1.2" in placement[0], placement
    assert [p.name for p in cold.passes if p.stage == "placement"] == ["go"]
    assert warm.step_time_after_s <= cold.step_time_after_s * (1 + 1e-9)
    assert warm.numerics.ok, warm.numerics.one_line()


def test_auto_gives_go_the_budget_left(example_model, monkeypatch):
    """`auto`'s GO runs in the warm form with what the budget has left when it starts (AUTO_GO_WARM, on since a
    pre-registered test), and as the answer alone with the flag off."""
    import importlib

    optimize_module = importlib.import_module("compiler_opt.api.optimize")
    seen: list[str] = []
    real = optimize_module._run_stage

    def spy(graph, stage, pipeline, *args, **kwargs):
        if stage == "placement":
            seen.append(pipeline)
        return real(graph, stage, pipeline, *args, **kwargs)

    monkeypatch.setattr(optimize_module, "_run_stage", spy)
    compiler_opt.optimize(str(example_model), target="4xV100", method="auto", budget_s=20, check=False)
    go = [p for p in seen if p.startswith("go")]
    assert len(go) == 1 and "seeds=default" in go[0] and "polish-seconds=" in go[0], seen
    assert optimize_module.AUTO_GO_WARM
    monkeypatch.setattr(optimize_module, "AUTO_GO_WARM", False)
    seen.clear()
    compiler_opt.optimize(str(example_model), target="4xV100", method="auto", budget_s=20, check=False)
    assert [p for p in seen if p.startswith("go")] == ["go{seed=0}"], seen
