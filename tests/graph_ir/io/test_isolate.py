"""The forked helper for native calls that may abort (graph_ir/io/_isolate.py)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from graph_ir.io import _isolate

TESTDATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "testdata" / "external" / "tf"


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
    _isolate.register("pid", lambda payload: str(os.getpid()).encode())
    try:
        helper_pid = int(_isolate.call_isolated("pid", b"", what="a test", timeout_s=30))
        assert helper_pid not in (0, os.getpid())
        import late_registered_module  # noqa: F401 - registers here, after the fork

        assert _isolate.call_isolated("late_echo", b"abc", what="a test", timeout_s=30) == b"cba"
        assert int(_isolate.call_isolated("pid", b"", what="a test", timeout_s=30)) == helper_pid  # the same helper
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
