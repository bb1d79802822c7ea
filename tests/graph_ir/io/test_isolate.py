"""The forked helper for native calls that may abort (graph_ir/io/_isolate.py)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from graph_ir.io import _isolate

TESTDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "testdata" / "external" / "tf"


def _pid(payload: bytes) -> bytes:
    return str(os.getpid()).encode()


_isolate.register("test_isolate_pid", _pid)  # at import, as the importers register theirs


def test_a_function_registered_after_the_helper_forked_is_imported_there(tmp_path, monkeypatch):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here: calls run in process")
    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    helper = _isolate._Helper()  # a helper of this test's own, forked below
    monkeypatch.setattr(_isolate, "_HELPER", helper)
    (tmp_path / "late_registered_module.py").write_text(textwrap.dedent("""
        from graph_ir.io._isolate import register
        register("late_echo", lambda payload: payload[::-1])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        helper_pid = int(_isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30))
        assert helper_pid not in (0, os.getpid())
        import late_registered_module  # noqa: F401 - registers here, after the fork

        assert _isolate.call_isolated("late_echo", b"abc", what="a test", timeout_s=30) == b"cba"
        assert int(_isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30)) == helper_pid  # the same helper
    finally:
        if helper.pid:
            helper.stop()
        sys.modules.pop("late_registered_module", None)


def _fail(payload: bytes) -> bytes:
    raise ValueError(f"bad payload {payload!r}")


_isolate.register("test_isolate_fail", _fail)  # at import, as the importers register theirs


def test_an_exception_in_the_helper_comes_back_as_its_text(monkeypatch):
    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    with pytest.raises(RuntimeError, match="bad payload b'x'"):
        _isolate.call_isolated("test_isolate_fail", b"x", what="a test", timeout_s=30)


@pytest.mark.parametrize("name", [
    "tensorflow-tensorflow__tensorflow__compiler__mlir__tensorflow__tests__graphdef2mlir__graph-function-defs.pbtxt",
    "tensorflow-tensorflow__tensorflow__core__grappler__costs__graph_properties_testdata__function_switch_shapes.pbtxt",
    "tensorflow-tensorflow__tensorflow__core__example__testdata__parse_example_graph_def.pbtxt",  # TF refuses it
])
def test_tensorflow_shape_inference_in_the_helper_gives_what_it_gives_in_process(name, monkeypatch):
    pytest.importorskip("tensorflow")
    from graph_ir.io.tf_import import load_tf

    path = TESTDATA / name
    if not path.exists():
        pytest.skip(f"{path.name} is not in the shared testdata")

    def types(graph):
        values = {(node.name, i): str(v.type) for node in graph for i, v in enumerate(node.outputs)}
        for function in graph.functions.values():
            values.update({(function.name, node.name, i): str(v.type) for node in function.graph for i, v in enumerate(node.outputs)})
        return values, graph.meta.get("tf.import_warning")

    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    in_helper = types(load_tf(path))
    monkeypatch.setenv(_isolate.IN_PROCESS_ENV, "1")
    in_process = types(load_tf(path))
    assert in_helper == in_process
    assert any("?" not in t for t in in_helper[0].values())  # shapes were inferred at all


def _abort(payload: bytes) -> bytes:
    os.abort()


STABLEHLO = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""


@pytest.mark.parametrize("function, load, what", [
    ("stablehlo_parse", "load_stablehlo", "MLIR's StableHLO parser"),
    ("stablehlo_to_hlo", "load_stablehlo_as_hlo", "XLA's StableHLO -> HLO lowering"),
])
def test_native_stablehlo_calls_run_in_the_helper(function, load, what, tmp_path, monkeypatch):
    # No input is known to crash these; the wiring is checked with a helper function that aborts as a crash would.
    pytest.importorskip("jaxlib")
    if not hasattr(os, "fork"):
        pytest.skip("no fork here: calls run in process")
    from graph_ir.errors import CorruptModelError
    from graph_ir.io import stablehlo_import

    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    path = tmp_path / "m.mlir"
    path.write_text(STABLEHLO)
    assert getattr(stablehlo_import, load)(path).verify() is None  # through the real helper
    helper = _isolate._Helper()
    monkeypatch.setattr(_isolate, "_HELPER", helper)
    monkeypatch.setitem(_isolate._FUNCTIONS, function, _abort)
    try:
        with pytest.raises(CorruptModelError, match=f"{what} crashed on this input") as info:
            getattr(stablehlo_import, load)(path)
        assert info.value.file == str(path)
    finally:
        if helper.pid:
            helper.stop()


def test_a_stablehlo_syntax_error_keeps_its_line_and_column(tmp_path):
    pytest.importorskip("jaxlib")
    from graph_ir.io.stablehlo_import import load_stablehlo
    from graph_ir.io.xla_bridge import HloSyntaxError

    path = tmp_path / "m.mlir"
    path.write_text(STABLEHLO.replace("stablehlo.add %a, %a", "stablehlo.add %a, %b"))
    with pytest.raises(HloSyntaxError) as info:
        load_stablehlo(path)
    assert (info.value.line, info.value.column) == (2, 26) and "undeclared SSA value" in str(info.value)


def _warn_check(payload: bytes) -> bytes:
    os.write(2, b"F0000 x.cc:1] Check failed: an earlier call's message, not fatal there\n")
    return b"ok"


def _abort_with_check(payload: bytes) -> bytes:
    os.write(2, b"F0000 y.cc:2] Check failed: this call's own\n")
    os.abort()


_isolate.register("test_isolate_warn_check", _warn_check)
_isolate.register("test_isolate_abort_with_check", _abort_with_check)


def test_a_crash_quotes_its_own_calls_check_and_the_log_does_not_grow(monkeypatch):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here: calls run in process")
    from graph_ir.errors import CorruptModelError

    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    helper = _isolate._Helper()
    monkeypatch.setattr(_isolate, "_HELPER", helper)
    try:
        for _ in range(3):
            assert _isolate.call_isolated("test_isolate_warn_check", b"", what="a test", timeout_s=30) == b"ok"
        assert os.fstat(helper.log.fileno()).st_size < 100  # the last call's line only
        with pytest.raises(CorruptModelError, match="Check failed: this call's own"):
            _isolate.call_isolated("test_isolate_abort_with_check", b"", what="a test", timeout_s=30)
    finally:
        if helper.pid:
            helper.stop()


def test_the_helper_forks_again_once_the_caller_has_loaded_a_heavy_library(monkeypatch):
    # TensorFlow imported after the helper forked would be imported again inside it (seconds); a new fork inherits it.
    if not hasattr(os, "fork"):
        pytest.skip("no fork here: calls run in process")
    import types

    monkeypatch.delenv(_isolate.IN_PROCESS_ENV, raising=False)
    monkeypatch.setattr(_isolate, "HEAVY_MODULES", ("test_isolate_heavy_library",))
    helper = _isolate._Helper()
    monkeypatch.setattr(_isolate, "_HELPER", helper)
    try:
        first = _isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30)
        assert _isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30) == first
        monkeypatch.setitem(sys.modules, "test_isolate_heavy_library", types.ModuleType("test_isolate_heavy_library"))
        second = _isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30)
        assert second != first
        assert _isolate.call_isolated("test_isolate_pid", b"", what="a test", timeout_s=30) == second
    finally:
        if helper.pid:
            helper.stop()
