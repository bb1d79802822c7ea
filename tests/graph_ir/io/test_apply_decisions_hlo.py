"""Fused groups and priorities exported as XLA fusions and a schedule (hlo_export with
materialize_fusions): XLA's parser and the StableHLO verifier accept the module, and it compiles
and runs on the CPU with the outputs of the JAX function it came from."""

from __future__ import annotations

import collections
import logging

import numpy as np
import pytest

pytest.importorskip("jaxlib")
pytest.importorskip("tensorflow", reason="the HLO proto schema ships with the TensorFlow wheel")

from graph_ir.errors import ExportError  # noqa: E402
from graph_ir.io.hlo_export import FUSED_GROUP_KEY, export_hlo_proto, export_hlo_text  # noqa: E402
from graph_ir.io.hlo_import import import_hlo_text  # noqa: E402

logger = logging.getLogger(__name__)

# Same XLA CPU compiler on both sides; fusion changes only evaluation order inside a kernel.
RTOL, ATOL = 1e-5, 1e-5


def _run(proto, *args) -> list[np.ndarray]:
    """Compile and run an HloModuleProto on XLA's CPU backend."""
    from graph_ir.io.xla_bridge import run_hlo_module

    return run_hlo_module(proto, *args)


def _mlp(x, w1, b1, w2):
    import jax
    import jax.numpy as jnp

    h = jax.nn.relu(x @ w1 + b1)
    return jnp.sum(jnp.tanh(h @ w2) * 2.0, axis=1), jnp.max(h)


def _convnet(x, k1, k2, w):
    import jax
    import jax.numpy as jnp

    def conv(v, k):
        return jax.lax.conv_general_dilated(v, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    y = jax.nn.relu(conv(x, k1) + 0.1)
    y = jnp.tanh(conv(y, k2)) * 0.5
    return jnp.mean(y, axis=(1, 2)) @ w


CASES = {
    "mlp": (_mlp, [(4, 8), (8, 16), (16,), (16, 8)]),
    "convnet": (_convnet, [(2, 8, 8, 3), (3, 3, 3, 4), (3, 3, 4, 4), (4, 5)]),
}


def _imported(name: str):
    import jax

    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    graph = import_hlo_text(jax.jit(fn).lower(*args).as_text(dialect="hlo"))
    expected = [np.asarray(e) for e in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    return graph, args, expected


def _assert_close(got, expected) -> float:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
    return max(float(np.max(np.abs(g - e))) for g, e in zip(got, expected))


def _assert_list_schedule(graph) -> None:
    """Producers first, and each instruction had the highest priority among those ready when
    it was placed (a get-tuple-element of a fusion counts as part of it)."""
    done: set = set()
    pending = list(graph)
    for node in graph:
        ready = [n for n in pending if all(v.producer is None or v.producer in done for v in n.inputs)]
        assert node in ready, f"{node.name} comes before one of its operands"
        if node.op_type != "get-tuple-element" or node.inputs[0].producer.op_type != "fusion":
            assert (node.priority or 0.0) >= max(n.priority or 0.0 for n in ready), node.name
        done.add(node)
        pending.remove(node)


@pytest.mark.parametrize("name", ["mlp", "convnet"])
def test_fused_and_scheduled_jax_module_parses_and_runs_equal(name):
    from passes.fusion import Fuse
    from passes.scheduling import Schedule

    graph, args, expected = _imported(name)
    nodes_before = len(graph)
    Fuse()(graph)
    Schedule()(graph)
    groups = collections.Counter(n.fusion_group for n in graph if n.fusion_group is not None)
    groups = {g: c for g, c in groups.items() if c >= 2}
    assert len(groups) >= 2
    before = str(graph)
    text = export_hlo_text(graph, materialize_fusions=True)
    assert str(graph) == before  # export works on a copy
    assert "is_scheduled=true" in text.splitlines()[0]

    again = import_hlo_text(text)  # XLA's parser, then the StableHLO verifier on the shapes
    again.verify()
    fusions = [n for n in again if n.op_type == "fusion"]
    assert len(fusions) == len(groups)
    for fusion in fusions:
        (body,) = fusion.attrs["calls"].value
        assert fusion.attr("fusion_kind") == "kLoop"  # XLA:CPU's kind for every fused group
        assert len(body) == groups[int(fusion.metadata_props[FUSED_GROUP_KEY])]
        assert len(body.inputs) == len(fusion.inputs) and all(n.fusion_group is None for n in body)
    assert len(again) == nodes_before - sum(groups.values()) + len(groups)
    _assert_list_schedule(again)

    diff = _assert_close(_run(export_hlo_proto(graph, materialize_fusions=True), *args), expected)
    _assert_close(_run(export_hlo_proto(again), *args), expected)  # through text, too
    logger.info("%s: %d instructions -> %d (%d fusions), max |diff| %.3g", name, nodes_before, len(again), len(fusions), diff)

    # A re-export of the fused module fuses nothing more.
    assert export_hlo_text(again, materialize_fusions=True).count(" fusion(") == len(groups)


def test_group_with_two_results_is_a_tuple_fusion_on_gpu_and_split_on_cpu():
    import jax
    import jax.numpy as jnp

    def fn(x):
        e = jnp.exp(x)
        return jnp.sum(e, axis=0), e * 3.0

    x = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    graph = import_hlo_text(jax.jit(fn).lower(x).as_text(dialect="hlo"))
    for node in graph:  # exp is read by the reduce outside and by the multiply inside
        if node.op_type in ("exponential", "multiply", "broadcast"):
            node.fusion_group = 0
            for value in node.inputs:  # the broadcast constant 3.0, not the reduction's init value
                if value.producer is not None and value.producer.op_type == "constant":
                    value.producer.fusion_group = 0
    # XLA:GPU fuses both results into one kernel: a tuple ROOT, unpacked by get-tuple-elements.
    again = import_hlo_text(export_hlo_text(graph, materialize_fusions=True, fusion_kinds="gpu"))
    again.verify()
    (fusion,) = [n for n in again if n.op_type == "fusion"]
    (body,) = fusion.attrs["calls"].value
    assert body.outputs[0].producer.op_type == "tuple" and len(body.outputs[0].producer.inputs) == 2
    assert sorted(n.attr("tuple_index") for n in fusion.outputs[0].users()) == [0, 1]
    # XLA:CPU has no multi-output fusion: exp stays alone, the multiply's part is one fusion.
    again = import_hlo_text(export_hlo_text(graph, materialize_fusions=True))
    (fusion,) = [n for n in again if n.op_type == "fusion"]
    assert sorted(n.op_type for n in fusion.attrs["calls"].value[0]) == ["broadcast", "constant", "multiply"]
    expected = [np.asarray(e) for e in fn(x)]
    _assert_close(_run(export_hlo_proto(graph, materialize_fusions=True), x), expected)
    _assert_close(_run(export_hlo_proto(again), x), expected)


def test_gpu_fusion_kinds_follow_the_hero():
    graph, _, _ = _imported("mlp")
    for node in graph:  # a dot with its epilogue, and a reduction with its producers
        if node.name in ("dot_general.3", "tanh.1"):
            node.fusion_group = 1
    graph.find_node("constant.7").fusion_group = 2
    graph.find_node("reduce_sum.7").fusion_group = 2
    text = export_hlo_text(graph, materialize_fusions=True, fusion_kinds="gpu")
    again = import_hlo_text(text)
    again.verify()
    kinds = {n.metadata_props[FUSED_GROUP_KEY]: n.attr("fusion_kind") for n in again if n.op_type == "fusion"}
    assert kinds == {"1": "kOutput", "2": "kInput"}
    with pytest.raises(ExportError, match="fusion_kinds must be one of cpu, gpu, call"):
        export_hlo_proto(graph, materialize_fusions=True, fusion_kinds="tpu")


def _reshaping(x, w):
    import jax.numpy as jnp

    y = jnp.tanh(x @ w).reshape(x.shape[0], 2, -1) * 2.0  # a reshape between elementwise ops
    return jnp.where(y > 0.1, y, 0.0).reshape(x.shape[0], -1) + 1.0


def test_call_kind_outlines_groups_as_calls_that_xla_cpu_runs():
    """A fusion holding reshapes: jaxlib's MLIR path drops the fused computation's
    layouts and XLA:CPU aborts on a fused reshape (has_layout() CHECK), so execution checks outline
    the same groups as calls. The call module computes the function's outputs; the kLoop form
    of the same groups is still what the text export writes."""
    import jax

    from passes.fusion import Fuse

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 8)).astype(np.float32)]
    graph = import_hlo_text(jax.jit(_reshaping).lower(*args).as_text(dialect="hlo"))
    Fuse()(graph)
    grouped = [n for n in graph if n.fusion_group is not None]
    assert "reshape" in {n.op_type for n in grouped}
    proto = export_hlo_proto(graph, materialize_fusions=True, fusion_kinds="call")
    again = import_hlo_text(export_hlo_text(graph, materialize_fusions=True, fusion_kinds="call"))
    again.verify()
    assert not any(n.op_type == "fusion" for n in again)
    calls = [n for n in again if n.metadata_props.get(FUSED_GROUP_KEY) is not None]
    assert calls and all(n.op_type == "call" for n in calls)
    assert " fusion(" in export_hlo_text(graph, materialize_fusions=True)
    _assert_close(_run(proto, *args), [np.asarray(jax.jit(_reshaping)(*args))])


def test_unfusable_instruction_and_cycle_are_rejected():
    graph, _, _ = _imported("mlp")
    graph.find_node("add.7").fusion_group = 3
    graph.find_node("jit_relu_.1").fusion_group = 3
    with pytest.raises(ExportError, match="fusion group 3: XLA does not fuse a 'call' instruction"):
        export_hlo_proto(graph, materialize_fusions=True)
    graph.find_node("jit_relu_.1").fusion_group = None
    graph.find_node("dot_general.3").fusion_group = 3  # add.7 -> relu call -> dot: through an outside node
    with pytest.raises(ExportError, match=r"fusion groups 3 .*\(group 3 -> node 'jit_relu_.1' -> group 3\)"):
        export_hlo_proto(graph, materialize_fusions=True)
    export_hlo_proto(graph)  # not materialized: the groups are only frontend attributes


def test_priorities_alone_make_a_scheduled_module():
    graph, args, expected = _imported("mlp")
    nodes = list(graph)
    for rank, node in enumerate(nodes):
        node.priority = float(rank % 3)  # an order unlike the graph's
    text = export_hlo_text(graph, schedule=True)
    assert "is_scheduled=true" in text.splitlines()[0] and " fusion(" not in text
    again = import_hlo_text(text)
    _assert_list_schedule(again)
    assert [n.name for n in again] != [n.name for n in nodes]
    _assert_close(_run(export_hlo_proto(again), *args), expected)


def test_save_hlo_applies_decisions_unless_told_not_to(tmp_path):
    from graph_ir.io.hlo_export import save_hlo

    graph, _, _ = _imported("mlp")
    graph.find_node("dot_general.3").fusion_group = 0
    graph.find_node("tanh.1").fusion_group = 0
    graph.find_node("tanh.1").priority = 1.0
    save_hlo(graph, tmp_path / "applied.hlo")
    text = (tmp_path / "applied.hlo").read_text()
    assert " fusion(" in text and "is_scheduled=true" in text.splitlines()[0]
    save_hlo(graph, tmp_path / "plain.hlo", materialize_fusions=False, schedule=False)
    text = (tmp_path / "plain.hlo").read_text()
    assert " fusion(" not in text and "is_scheduled" not in text.splitlines()[0]
