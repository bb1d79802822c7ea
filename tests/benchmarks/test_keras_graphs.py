"""benchmarks/keras_graphs.py: frozen GraphDefs of tf.keras.applications models outside the suite."""

from __future__ import annotations

import pytest

from tests.benchmark_scripts import benchmark_script

pytest.importorskip("tensorflow")


def test_an_unknown_model_is_named_with_the_known_ones() -> None:
    from compiler_opt.workloads.inception import application_graphdef_bytes

    with pytest.raises(ValueError, match=r"no model 'NoSuchNet'.*MobileNetV2"):
        application_graphdef_bytes("NoSuchNet", "inference", batch=1, image_size=32)
    with pytest.raises(ValueError, match="mode"):
        application_graphdef_bytes("MobileNetV2", "eval", batch=1, image_size=32)


@pytest.mark.slow
def test_a_model_is_written_once_and_imports(tmp_path, capsys) -> None:
    import graph_ir

    with benchmark_script("keras_graphs") as script:
        assert script.main(["--models", "MobileNetV2", "--batch", "2", "--image-size", "32", "--out", str(tmp_path)]) == 0
        path = tmp_path / "MobileNetV2-b2-32.pb"
        graph = graph_ir.load(str(path))
        assert sum(node.op_type == "Conv2D" for node in graph) >= 30 and f"{path.name}: {len(graph.nodes)} nodes" in capsys.readouterr().out
        before = path.stat().st_mtime_ns
        assert script.main(["--models", "MobileNetV2", "--batch", "2", "--image-size", "32", "--out", str(tmp_path)]) == 0
        assert path.stat().st_mtime_ns == before  # kept, not rebuilt
        assert not list(tmp_path.glob("*.tmp"))
        with pytest.raises(SystemExit):
            script.main(["--models", "MobileNetV2", "--batch", "0", "--out", str(tmp_path)])
