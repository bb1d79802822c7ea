"""The ONNX importer/exporter against every model that ships with the installed onnx package.

Corpus: the 149 models under `onnx/backend/test/data/{light,simple,pytorch-converted,
pytorch-operator}` and the ~1,884 node test cases of `onnx.backend.test.case.node`.

Stages, each asserted per model (so a failure names the model):
1. import (`load_onnx` for files, `import_onnx` for node cases) and `verify()`;
2. export and `onnx.checker.check_model(full_check=True)`;
3. lossless: re-import of the export is structurally equal to the first import, the exported
   ModelProto equals the original semantically (`onnx_testlib.model_differences`), and a
   second export is byte-identical to the first;
4. onnxruntime: original and export run on the same inputs (the case's own data; seeded random
   inputs for shipped models, falling back to their `test_data_set_0`) and agree within
   `onnx_testlib.FLOAT_TOLERANCE` (float32: rtol 1e-5, atol 1e-6; ints, bools and strings
   exactly; NaNs equal). Models ORT cannot run are recorded with ORT's reason, not failed.

Originals that onnx's own full checker rejects are skipped with the checker's message.
By default all shipped models and every 10th node case run; `--runslow` runs every case.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections import Counter
from typing import Any

import onnx
import pytest
from onnx_testlib import (
    OrtOutcome,
    case_inputs,
    compare_in_ort,
    model_differences,
    original_check_failure,
    shipped_inputs,
    shipped_model_id,
    shipped_model_paths,
)

from graph_ir import assert_structurally_equal
from graph_ir.io.onnx_export import export_onnx
from graph_ir.io.onnx_import import import_onnx, load_onnx

SHIPPED_PATHS = shipped_model_paths()
DEFAULT_CASE_STRIDE = 10  # the default run checks node cases 0, 10, 20, ...

# Floors for the share that onnxruntime can run, below what onnxruntime 1.32 / onnx 1.23 give
# (shipped: 109 of 149, most of the rest opset 6 which ORT no longer runs; node cases: 1,709 of
# 1,883). A newer ORT may run more; far fewer means the comparison itself broke.
MIN_ORT_SHARE_SHIPPED = 0.65
MIN_ORT_SHARE_CASES = 0.88


@dataclasses.dataclass
class Outcome:
    name: str
    excluded: str | None = None  # why the ORIGINAL is not a valid model (onnx's checker)
    failure: str | None = None  # stage and error of the first failed stage
    stages: list[str] = dataclasses.field(default_factory=list)
    ort: OrtOutcome | None = None


def _node_case_names(config: pytest.Config) -> list[str]:
    """Node case names, cached per onnx version (collecting the cases takes ~10 s)."""
    key = f"compiler_opt/onnx_node_case_names/{onnx.__version__}"
    cache = getattr(config, "cache", None)
    names = cache.get(key, None) if cache is not None else None
    if not names:
        names = [case.name for case in _node_cases().values()]
        if cache is not None:
            cache.set(key, names)
    return names


@functools.cache
def _node_cases() -> dict[str, Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference implementations warn on inf/nan casts
        return {case.name: case for case in collect_testcases()}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node_case_name" in metafunc.fixturenames:
        params = []
        for index, name in enumerate(_node_case_names(metafunc.config)):
            marks = () if index % DEFAULT_CASE_STRIDE == 0 else (pytest.mark.slow,)
            params.append(pytest.param(name, id=name, marks=marks))
        metafunc.parametrize("node_case_name", params)


# -- the pipeline, shared by the per-model tests and the summary (cached per session) -----------

_OUTCOMES: dict[str, Outcome] = {}


def _run_pipeline(name: str, original: onnx.ModelProto, load: Any, feeds: Any, fallback: Any = None) -> Outcome:
    if name in _OUTCOMES:
        return _OUTCOMES[name]
    outcome = _OUTCOMES[name] = Outcome(name)
    outcome.excluded = original_check_failure(original)
    if outcome.excluded:
        return outcome
    stage = "import"
    try:
        graph = load()
        outcome.stages.append("imported")
        stage = "verify"
        graph.verify()
        outcome.stages.append("verified")
        stage = "export+check"
        exported = export_onnx(graph)
        onnx.checker.check_model(exported, full_check=True)
        outcome.stages.append("exported+checked")
        stage = "lossless"
        again = import_onnx(exported)
        again.verify()
        assert_structurally_equal(again, graph)
        differences = model_differences(original, exported)
        assert not differences, "exported model differs from the original:\n  " + "\n  ".join(differences[:10])
        assert export_onnx(again).SerializeToString() == exported.SerializeToString(), "second export differs"
        outcome.stages.append("lossless")
        stage = "onnxruntime"
        outcome.ort = compare_in_ort(original, exported, feeds() if feeds else None, fallback() if fallback else None)
        if outcome.ort.status != "refused":
            outcome.stages.append("ort-comparable")
            if outcome.ort.status == "equal":
                outcome.stages.append("ort-equal")
    except Exception as err:  # noqa: BLE001 - recorded, then re-raised by the per-model test
        outcome.failure = f"{stage}: {type(err).__name__}: {err}"
    return outcome


def _shipped_outcome(path: str) -> Outcome:
    original = onnx.load(path, load_external_data=False)
    return _run_pipeline(
        shipped_model_id(path),
        original,
        lambda: load_onnx(path),
        feeds=None,
        fallback=lambda: shipped_inputs(original, path),
    )


def _case_outcome(name: str) -> Outcome:
    case = _node_cases()[name]
    return _run_pipeline(
        name, case.model, lambda: import_onnx(case.model), feeds=lambda: case_inputs(case.model, case.data_sets[0][0])
    )


def _check(outcome: Outcome) -> None:
    if outcome.excluded:
        pytest.skip(f"the original fails onnx.checker full_check: {outcome.excluded}")
    assert outcome.failure is None, f"{outcome.name}: {outcome.failure}"


# -- per-model tests -------------------------------------------------------------------------------


def test_corpus_is_complete() -> None:
    assert len(SHIPPED_PATHS) >= 149, SHIPPED_PATHS


@pytest.mark.parametrize("path", SHIPPED_PATHS, ids=[shipped_model_id(p) for p in SHIPPED_PATHS])
def test_shipped_model(path: str) -> None:
    _check(_shipped_outcome(path))


def test_node_case(node_case_name: str) -> None:
    _check(_case_outcome(node_case_name))


# -- summaries -------------------------------------------------------------------------------------

STAGES = ("imported", "verified", "exported+checked", "lossless", "ort-comparable", "ort-equal")


def _summarize(outcomes: list[Outcome], title: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in outcomes:
        counts.update(outcome.stages)
    lines = [f"{title}: {len(outcomes)} models"]
    lines += [f"  {stage:>17}: {counts[stage]}" for stage in STAGES]
    for outcome in outcomes:
        if outcome.excluded:
            lines.append(f"  excluded {outcome.name}: original fails full_check: {outcome.excluded}")
        elif outcome.failure:
            lines.append(f"  FAILED {outcome.name}: {outcome.failure.splitlines()[0]}")
        elif outcome.ort is not None and outcome.ort.status != "equal":
            lines.append(f"  ORT {outcome.ort.status} {outcome.name}: {outcome.ort.reason}")
    print("\n".join(lines))
    return counts


def _assert_floors(outcomes: list[Outcome], counts: Counter[str], min_ort_share: float) -> None:
    valid = [o for o in outcomes if not o.excluded]
    failures = [f"{o.name}: {o.failure}" for o in valid if o.failure]
    assert not failures, "\n".join(failures[:20])
    for stage in ("imported", "verified", "exported+checked", "lossless"):
        assert counts[stage] == len(valid), stage
    nondeterministic = sum(1 for o in valid if o.ort is not None and o.ort.status == "nondeterministic")
    assert counts["ort-equal"] + nondeterministic == counts["ort-comparable"]
    assert counts["ort-comparable"] >= min_ort_share * len(valid), counts


def test_conformance_summary_default() -> None:
    """Counts for the default subset: every shipped model and every 10th node case."""
    shipped = [_shipped_outcome(p) for p in SHIPPED_PATHS]
    cases = [_case_outcome(n) for n in _node_case_names_for_summary(every=DEFAULT_CASE_STRIDE)]
    _assert_floors(shipped, _summarize(shipped, "ONNX conformance, shipped models"), MIN_ORT_SHARE_SHIPPED)
    _assert_floors(cases, _summarize(cases, "ONNX conformance, every 10th node case"), MIN_ORT_SHARE_CASES)


@pytest.mark.slow
def test_conformance_summary_full() -> None:
    """Counts for the whole corpus: 149 shipped models and every node case."""
    shipped = [_shipped_outcome(p) for p in SHIPPED_PATHS]
    cases = [_case_outcome(n) for n in _node_case_names_for_summary(every=1)]
    shipped_counts = _summarize(shipped, "ONNX conformance, shipped models")
    case_counts = _summarize(cases, "ONNX conformance, node cases")
    _assert_floors(shipped, shipped_counts, MIN_ORT_SHARE_SHIPPED)
    _assert_floors(cases, case_counts, MIN_ORT_SHARE_CASES)
    excluded = sorted(o.name for o in cases if o.excluded)
    assert len(excluded) <= 3, excluded  # onnx 1.23: test_mvn only


def _node_case_names_for_summary(every: int) -> list[str]:
    return [name for index, name in enumerate(_node_cases()) if index % every == 0]

