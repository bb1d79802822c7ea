"""Fusion terms against hand-computed values, the residual target's round trip, the additive model
(recovers known weights, saves and loads), GraphSAGE in the residual form (overfits a tiny
dataset), and the roofline step time the predictor computes (equal to the simulator's)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cost_model.learned.features import NODE_FEATURES, OPCODES
from cost_model.learned.fusion_additive import AdditiveFusionModel
from cost_model.learned.fusion_terms import (BUFFER_SIZE_TERMS, CALL_GROWTH_TERMS, CLASS_MB, CONV_TERMS, LARGE_BUFFER_BYTES, LOG_SIZE_TERMS, MEASURED_CONV_TERMS, OP_CLASSES, S9_TERMS,
                                             S10_TERMS, S11_TERMS, SHIPPED_TERMS, SIZE_CLASS_TERMS, TERM_NAMES, config_terms, graph_terms, record_terms,
                                             residual_seconds, residual_target)
from cost_model.learned.tpugraphs import DatasetError, KernelRecord

# A 4-node graph: 0 -> 1 -> 2, 0 -> 3. Edges are [consumer, producer] rows.
EDGES = np.array([[1, 0], [2, 1], [3, 0]])
LOG2_ELEMENTS = np.array([4.0, 5.0, 6.0, 3.0])  # 16, 32, 64, 8 elements
LOG2_FLOPS = np.array([10.0, 0.0, 12.0, 0.0])  # 1024 + 4096 FLOPs; 0 means none
OPS = ["matmul", "binary", "unary", "reshape"]


def _graph() -> tuple[np.ndarray, np.ndarray]:
    feat = np.zeros((4, NODE_FEATURES), dtype=np.float32)
    feat[:, 6], feat[:, -1] = LOG2_ELEMENTS, LOG2_FLOPS
    return feat, np.array([OPCODES.index(o) for o in OPS])


def test_config_terms_by_hand() -> None:
    feat, ops = _graph()
    # groups: {0, 1} fused, 2 and 3 alone -> kernels {0,1}, {2}, {3}
    terms = config_terms(feat, ops, EDGES, np.array([0, 0, -1, -1]))
    kernels, inputs, outputs, in_mb, out_mb, fused, layout, gflops, *classes = terms
    counts = dict(zip(OP_CLASSES, classes))
    assert counts == {"reduce_nodes": 0, "transpose_nodes": 0, "slice_nodes": 0, "matmul_nodes": 1, "conv_nodes": 0, "broadcast_reshape_nodes": 1,
                      "elementwise_nodes": 2, "pool_nodes": 0, "gather_nodes": 0, "concat_pad_nodes": 0}
    megabytes = dict(zip(CLASS_MB, classes[len(OP_CLASSES):]))
    assert megabytes["matmul_mb"] == pytest.approx(4e-6 * 16) and megabytes["elementwise_mb"] == pytest.approx(4e-6 * (32 + 64))
    assert megabytes["broadcast_reshape_mb"] == pytest.approx(4e-6 * 8) and megabytes["conv_mb"] == 0
    assert len(terms) == len(TERM_NAMES) - 1  # all but roofline_s
    assert kernels == 3 and fused == 1
    assert inputs == 2  # node 1 -> kernel {2}, node 0 -> kernel {3}
    assert outputs == 4  # 0 and 1 leave their kernel, 2 and 3 are graph outputs
    assert in_mb == pytest.approx(4e-6 * (32 + 16))
    assert out_mb == pytest.approx(4e-6 * (16 + 32 + 64 + 8))
    assert layout == 1  # the lone reshape
    assert gflops == pytest.approx(1e-9 * (1024 + 4096))
    # all alone: 4 kernels, every edge crosses, every node's output leaves
    alone = config_terms(feat, ops, EDGES, np.full(4, -1))
    assert alone[:3].tolist() == [4, 3, 4] and alone[5] == 0
    # everything in one group: one call, nothing passed between calls, only graph outputs leave
    one = config_terms(feat, ops, EDGES, np.zeros(4, dtype=int))
    assert one[:3].tolist() == [1, 0, 2] and one[4] == pytest.approx(4e-6 * (64 + 8)) and one[6] == 0
    with pytest.raises(ValueError, match="shape"):
        config_terms(feat, ops, EDGES, np.zeros(3, dtype=int))


def test_tenth_session_op_classes_are_counted_and_s9_terms_are_the_old_ones() -> None:
    feat, _ = _graph()
    ops = np.array([OPCODES.index(o) for o in ["pool", "gather", "concat", "pad"]])
    terms = config_terms(feat, ops, EDGES, np.full(4, -1))
    counts = dict(zip(OP_CLASSES, terms[8:]))
    assert counts["pool_nodes"] == 1 and counts["gather_nodes"] == 1 and counts["concat_pad_nodes"] == 2
    assert sum(counts.values()) == 4  # each node in exactly one class
    megabytes = dict(zip(CLASS_MB, terms[8 + len(OP_CLASSES):]))
    assert megabytes["pool_mb"] == pytest.approx(4e-6 * 16) and megabytes["concat_pad_mb"] == pytest.approx(4e-6 * (64 + 8))
    assert S9_TERMS == ("kernels", "kernel_inputs", "kernel_outputs", "input_mb", "output_mb", "fused_groups", "layout_kernels", "graph_gflops",
                        "reduce_nodes", "transpose_nodes", "slice_nodes", "matmul_nodes", "conv_nodes", "broadcast_reshape_nodes",
                        "elementwise_nodes", "roofline_s")
    assert set(S9_TERMS) < set(TERM_NAMES) and TERM_NAMES[-1] == "roofline_s"


def test_eleventh_session_conv_terms_by_hand() -> None:
    from cost_model.learned.conv_features import CONV_FEATURE_NAMES

    feat, _ = _graph()
    ops = np.array([OPCODES.index(o) for o in ["conv", "conv", "conv", "binary"]])
    conv = np.zeros((4, len(CONV_FEATURE_NAMES)), dtype=np.float32)
    col = {name: i for i, name in enumerate(CONV_FEATURE_NAMES)}
    # node 0: depthwise 3x3 (16 groups), 0.5 M MACs; node 1: 4 groups, stride 2, 2 M MACs; node 2: dense, kernel dilation 2
    conv[0, [col["feature_groups"], col["depthwise"], col["window"], col["stride"], col["kernel_dilation"], col["input_dilation"], col["mmacs"]]] = [16, 1, 9, 1, 1, 1, 0.5]
    conv[1, [col["feature_groups"], col["window"], col["stride"], col["kernel_dilation"], col["input_dilation"], col["mmacs"]]] = [4, 9, 2, 1, 1, 2.0]
    conv[2, [col["feature_groups"], col["window"], col["stride"], col["kernel_dilation"], col["input_dilation"], col["mmacs"]]] = [1, 9, 1, 2, 1, 7.0]
    terms = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_feat=conv)))
    assert terms["grouped_conv_nodes"] == 2 and terms["conv_nodes"] == 3
    assert terms["grouped_conv_mb"] == pytest.approx(4e-6 * (16 + 32))  # what nodes 0 and 1 write
    assert terms["grouped_conv_mmacs"] == pytest.approx(2.5)  # the dense conv's 7 M MACs are not in it
    assert CONV_TERMS == ("grouped_conv_nodes", "grouped_conv_mb", "grouped_conv_mmacs")  # strides / dilations: features, not terms
    # without the column (files collected before it): every conv term 0, the rest unchanged
    old = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.full(4, -1))))
    assert all(old[t] == 0 for t in CONV_TERMS) and all(old[t] == terms[t] for t in S10_TERMS if t != "roofline_s")
    with pytest.raises(ValueError, match="node_conv_feat"):
        config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_feat=conv[:3])
    assert S10_TERMS == tuple(t for t in S11_TERMS if t not in CONV_TERMS) and TERM_NAMES[-1] == "roofline_s"


def test_twelfth_session_measured_conv_terms_by_hand() -> None:
    from cost_model.learned.conv_features import CONV_FEATURE_NAMES

    feat, _ = _graph()
    ops = np.array([OPCODES.index(o) for o in ["conv", "conv", "conv", "binary"]])
    conv = np.zeros((4, len(CONV_FEATURE_NAMES)), dtype=np.float32)
    conv[:3, CONV_FEATURE_NAMES.index("feature_groups")] = [16, 1, 1]  # node 0 grouped, 1 and 2 dense
    seconds = np.array([300e-6, 40e-6, np.nan, 0.0])  # node 2: a conv not timed (counts 0)
    terms = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_feat=conv, node_conv_time=seconds)))
    assert terms["measured_grouped_conv_s"] == pytest.approx(300e-6) and terms["measured_dense_conv_s"] == pytest.approx(40e-6)
    # the same under another grouping: per graph, like the counts
    fused = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.zeros(4, dtype=int), node_conv_feat=conv, node_conv_time=seconds)))
    assert all(fused[t] == terms[t] for t in MEASURED_CONV_TERMS)
    # without node_conv_feat every conv counts as dense; without node_conv_time both terms are 0 and nothing else moves
    dense = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_time=seconds)))
    assert dense["measured_dense_conv_s"] == pytest.approx(340e-6) and dense["measured_grouped_conv_s"] == 0
    old = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_feat=conv)))
    assert all(old[t] == 0 for t in MEASURED_CONV_TERMS) and all(old[t] == terms[t] for t in S11_TERMS if t != "roofline_s")
    with pytest.raises(ValueError, match="node_conv_time"):
        config_terms(feat, ops, EDGES, np.full(4, -1), node_conv_time=seconds[:3])
    assert S11_TERMS == tuple(t for t in SHIPPED_TERMS if t not in MEASURED_CONV_TERMS) and TERM_NAMES[-1] == "roofline_s"


def test_graph_terms_time_a_real_conv_once_per_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`graph_terms` with a `ConvTimer`: the depthwise conv of a tiny JAX program timed alone for
    real through XLA (cached), its seconds in the grouped term of every candidate, the dense 1x1
    conv's in the dense term; the convs are timed once for all candidates."""
    jax = pytest.importorskip("jax")
    from jax import lax

    from cost_model.decisions import node_order
    from cost_model.measure.conv_timing import ConvTimer
    from cost_model.profiling.cache import ProfileCache
    from graph_ir.io.hlo_import import import_hlo_text

    dn = ("NHWC", "HWIO", "NHWC")

    def program(x, dw, pw):  # type: ignore[no-untyped-def]
        y = lax.conv_general_dilated(x, dw, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=8)
        return lax.conv_general_dilated(jax.nn.relu(y), pw, (1, 1), "SAME", dimension_numbers=dn)

    args = (np.ones((1, 8, 8, 8), np.float32), np.ones((3, 3, 1, 8), np.float32), np.ones((1, 1, 8, 8), np.float32))
    graph = import_hlo_text(jax.jit(program).lower(*args).as_text(dialect="hlo"))
    nodes = node_order(graph)
    convs = [i for i, n in enumerate(nodes) if n.kind.value == "conv"]
    assert len(convs) == 2
    groups = [np.full(len(nodes), -1), np.zeros(len(nodes), dtype=int)]
    with ProfileCache(tmp_path / "m.sqlite") as cache:
        timer = ConvTimer(cache, repeats=3, min_sample_s=2e-4)
        terms = graph_terms(nodes, groups, graph=graph, conv_timer=timer)
        assert timer.measured == 2  # two distinct convs, each timed once for both candidates
        seconds = timer.node_times(nodes)
        grouped = [i for i in convs if nodes[i].attr("feature_group_count", 1) > 1]
        column = {t: TERM_NAMES.index(t) for t in MEASURED_CONV_TERMS}
        np.testing.assert_allclose(terms[:, column["measured_grouped_conv_s"]], seconds[grouped].sum())
        np.testing.assert_allclose(terms[:, column["measured_dense_conv_s"]], seconds[convs].sum() - seconds[grouped].sum())
        assert (seconds[convs] > 0).all() and (seconds[convs] < 0.05).all() and seconds[[i for i in range(len(nodes)) if i not in convs]].sum() == 0
        again = ConvTimer(cache, repeats=3, min_sample_s=2e-4)  # a new process on the same machine: read from the cache
        np.testing.assert_array_equal(again.node_times(nodes), seconds)
        assert again.measured == 0
    # the additive predictor times them only when its model weighs a measured term, into the cache it is handed
    from cost_model.learned.predictor import AdditiveFusionPredictor

    weighted = AdditiveFusionModel(terms=TERM_NAMES).fit_terms(terms, np.array([2e-4, 1e-4]))
    weighted.weights = np.where(np.isin(np.array(TERM_NAMES), MEASURED_CONV_TERMS), 0.5, 1e-9 * (np.array(TERM_NAMES) != "roofline_s"))
    weighted.weights[TERM_NAMES.index("roofline_s")] = 1.0
    predictor = AdditiveFusionPredictor(weighted)
    assert predictor.measures_convs
    with ProfileCache(tmp_path / "tuner.sqlite") as cache:
        predictor.use_measurement_cache(cache)
        first = predictor.predict_log(nodes, groups, graph=graph)
        assert len(cache) == 2 and predictor.conv_timer.measured == 2
        np.testing.assert_allclose(first, predictor.predict_log(nodes, groups, graph=graph))  # timed once: the same seconds again
    unweighted = AdditiveFusionModel(terms=S11_TERMS)
    unweighted.weights = np.ones(len(S11_TERMS))
    idle = AdditiveFusionPredictor(unweighted)
    assert not idle.measures_convs
    idle.predict_log(nodes, groups, graph=graph)
    assert idle.conv_timer is None
    plain = graph_terms(nodes, groups, graph=graph)  # no timer: the measured terms are 0, the rest the same
    assert (plain[:, list(column.values())] == 0).all()
    others = [i for i in range(len(TERM_NAMES)) if i not in column.values()]
    np.testing.assert_allclose(plain[:, others], terms[:, others])


def _sized_record() -> KernelRecord:
    """The 4-node graph with buffers around `LARGE_BUFFER_BYTES`: 1024, 2048, 64, 8 elements (4096,
    8192, 256, 32 bytes: node 0 exactly at the boundary, node 1 over it), three groupings."""
    feat, ops = _graph()
    feat[:, 6] = [10.0, 11.0, 6.0, 3.0]
    groups = [np.array([0, 0, -1, -1]), np.full(4, -1), np.zeros(4, dtype=int)]
    return KernelRecord(feat, ops, EDGES, np.full(3, 1e-4), np.full(3, 1e-4), node_config_ids=np.arange(4),
                        node_config_feat=np.zeros((3, 4, 4), dtype=np.float32), config_text=[json.dumps(g.tolist()) for g in groups],
                        meta={"program": "p", "roofline_s": [5e-5] * 3})


def test_sixteenth_session_buffer_size_terms_by_hand() -> None:
    """Per configuration: the arguments' / outputs' log2 elements summed, and those over 4 KiB counted,
    from the same (kernel, producer) arguments and leaving outputs as `kernel_inputs` / `kernel_outputs`."""
    assert LARGE_BUFFER_BYTES == 4096 and BUFFER_SIZE_TERMS == LOG_SIZE_TERMS + SIZE_CLASS_TERMS
    assert not set(BUFFER_SIZE_TERMS) & set(SHIPPED_TERMS) and set(SHIPPED_TERMS) | set(BUFFER_SIZE_TERMS) | set(CALL_GROWTH_TERMS) == set(TERM_NAMES)
    assert AdditiveFusionModel().terms == SHIPPED_TERMS  # off by default
    terms = record_terms(_sized_record())
    got = {name: terms[:, TERM_NAMES.index(name)].tolist() for name in ("kernel_inputs", "kernel_outputs") + BUFFER_SIZE_TERMS}
    # {0, 1} fused, 2 and 3 alone: arguments node 1 -> {2} (2048 el.), node 0 -> {3} (1024); outputs 0, 1 (leave), 2, 3 (graph outputs)
    # all alone: arguments 0 -> 1, 1 -> 2, 0 -> 3 (1024, 2048, 1024), outputs all four; one group: no arguments, outputs 2 and 3
    assert got == {"kernel_inputs": [2, 3, 0], "kernel_outputs": [4, 4, 2],
                   "kernel_input_log2_elements": [11 + 10, 10 + 11 + 10, 0], "kernel_output_log2_elements": [10 + 11 + 6 + 3, 10 + 11 + 6 + 3, 6 + 3],
                   "large_kernel_inputs": [1, 1, 0], "large_kernel_outputs": [1, 1, 0]}  # only node 1's 8192 bytes is over 4096


def test_twenty_first_session_call_growth_term_by_hand() -> None:
    """`kernels_pow1_5`: the configuration's calls to the power 1.5 (outside the default form)."""
    assert CALL_GROWTH_TERMS == ("kernels_pow1_5",) and not set(CALL_GROWTH_TERMS) & set(SHIPPED_TERMS)
    terms = record_terms(_sized_record())
    kernels = terms[:, TERM_NAMES.index("kernels")]
    assert kernels.tolist() == [3, 4, 1]  # {0, 1} fused + 2 + 3; all four alone; one group
    assert np.allclose(terms[:, TERM_NAMES.index("kernels_pow1_5")], [3**1.5, 8.0, 1.0])


def test_a_fit_with_the_call_growth_term_recovers_a_cost_per_call_that_grows_with_the_calls() -> None:
    """Truth: each call costs 2 us + 0.5 us x sqrt(calls), plus the roofline: the form with
    `kernels_pow1_5` recovers both weights and fits exactly; the default form cannot."""
    rng = np.random.default_rng(5)
    feat, ops = _graph()
    rows, runtime = [], []
    for _ in range(40):
        t = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, rng.integers(-1, 3, size=4))))
        t["roofline_s"] = rng.uniform(1e-5, 5e-5)
        rows.append([t[n] for n in TERM_NAMES])
        runtime.append(2e-6 * t["kernels"] + 0.5e-6 * t["kernels"] ** 1.5 + t["roofline_s"])
    rows, runtime = np.array(rows), np.array(runtime)
    names = ("kernels", "kernels_pow1_5", "roofline_s")
    model = AdditiveFusionModel(terms=names).fit_terms(rows[:, [TERM_NAMES.index(n) for n in names]], runtime)
    assert np.allclose(model.weights, [2e-6, 0.5e-6, 1.0], rtol=1e-4)
    linear = AdditiveFusionModel(terms=("kernels", "roofline_s")).fit_terms(rows[:, [TERM_NAMES.index("kernels"), TERM_NAMES.index("roofline_s")]], runtime)
    pred = rows[:, [TERM_NAMES.index("kernels"), TERM_NAMES.index("roofline_s")]] @ linear.weights
    assert np.abs(pred / runtime - 1).max() > 0.01


def test_a_fit_recovers_a_per_argument_cost_that_grows_with_the_buffer() -> None:
    """Truth: each argument costs 1 us + 0.5 us x log2(elements), each output over 4 KiB 3 us more,
    plus the roofline; the fit with the buffer size terms recovers those weights, the shipped form
    cannot fit it."""
    rng = np.random.default_rng(3)
    feat, ops = _graph()
    rows, runtime = [], []
    for _ in range(30):  # graphs with other buffer sizes, each under random groupings
        feat[:, 6] = rng.uniform(0, 14, size=4)
        for _ in range(6):
            t = dict(zip(TERM_NAMES, config_terms(feat, ops, EDGES, rng.integers(-1, 2, size=4))))
            t["roofline_s"] = rng.uniform(20e-6, 80e-6)
            rows.append([t[n] for n in TERM_NAMES])
            runtime.append(1e-6 * t["kernel_inputs"] + 0.5e-6 * t["kernel_input_log2_elements"] + 3e-6 * t["large_kernel_outputs"] + t["roofline_s"])
    rows, runtime = np.array(rows), np.array(runtime)
    names = ("kernel_inputs", "kernel_input_log2_elements", "large_kernel_outputs", "kernel_outputs", "roofline_s")
    model = AdditiveFusionModel(terms=names).fit_terms(rows[:, [TERM_NAMES.index(n) for n in names]], runtime)
    np.testing.assert_allclose(model.weights, [1e-6, 0.5e-6, 3e-6, 0.0, 1.0], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(model.predict_terms(rows), runtime, rtol=1e-6)
    shipped = AdditiveFusionModel(terms=("kernel_inputs", "kernel_outputs", "input_mb", "output_mb", "roofline_s"))
    shipped.fit_terms(rows[:, [TERM_NAMES.index(n) for n in shipped.terms]], runtime)
    assert np.abs(shipped.predict_terms(rows) / runtime - 1).mean() > 0.005


def test_residual_round_trip() -> None:
    runtime, roofline = np.array([2e-4, 3e-4]), np.array([1e-4, 6e-4])
    residual = residual_target(runtime, roofline)
    np.testing.assert_allclose(residual, [math.log(2.0), math.log(0.5)])
    np.testing.assert_allclose(residual_seconds(residual, roofline), runtime)
    with pytest.raises(ValueError):
        residual_target(np.array([1.0]), np.array([0.0]))


def _fusion_records(count: int = 3, configs: int = 12, seed: int = 0) -> list[KernelRecord]:
    """Layout-form records of the 4-node graph with random groupings; runtime = 20 us per kernel +
    10 us per output + 2 x roofline (a known additive truth); roofline = 30 us per kernel + 5 us."""
    feat, ops = _graph()
    rng = np.random.default_rng(seed)
    records = []
    for k in range(count):
        groups = [rng.integers(-1, 2, size=4) for _ in range(configs)]
        terms = np.stack([config_terms(feat, ops, EDGES, g) for g in groups])
        roofline = 30e-6 * terms[:, 0] + 5e-6 * (1 + k)
        runtime = 20e-6 * terms[:, 0] + 10e-6 * terms[:, 2] + 2 * roofline
        node_config = rng.standard_normal((configs, 4, 4)).astype(np.float32)
        node_config[:, :, 0] = np.stack([(g >= 0) for g in groups])
        records.append(KernelRecord(feat, ops, EDGES, runtime, np.full(configs, runtime.min()), node_config_ids=np.arange(4), node_config_feat=node_config,
                                    config_text=[json.dumps(g.tolist()) for g in groups], meta={"program": f"p{k}", "roofline_s": roofline.tolist()}))
    return records


def test_record_terms_and_errors() -> None:
    record = _fusion_records(count=1)[0]
    terms = record_terms(record)
    assert terms.shape == (record.num_configs, len(TERM_NAMES))
    np.testing.assert_allclose(terms[:, -1], record.meta["roofline_s"])
    record.meta.pop("roofline_s")
    with pytest.raises(DatasetError, match="roofline_s"):
        record_terms(record)
    record = _fusion_records(count=1)[0]
    record.config_text = []
    with pytest.raises(DatasetError, match="config_text"):
        record_terms(record)


def test_additive_model_recovers_known_weights(tmp_path) -> None:  # type: ignore[no-untyped-def]
    records = _fusion_records()
    model = AdditiveFusionModel().fit(records)
    weights = dict(zip(model.terms, model.weights))
    # the truth is 20 us/kernel + 10 us/output + 2 x roofline; kernels and roofline are collinear
    # here (roofline = 30 us x kernels + a per-record constant), so check the fit, not each weight
    for record in records:
        np.testing.assert_allclose(np.exp(model.predict(record)), record.config_runtime, rtol=1e-6)
        np.testing.assert_allclose(model.log_roofline_residual(record), residual_target(record.config_runtime, record.meta["roofline_s"]), atol=1e-6)
    assert all(w >= 0 for w in weights.values())
    path = model.save(tmp_path / "m.json", extra={"note": "x"})
    loaded = AdditiveFusionModel.load(path)
    np.testing.assert_allclose(loaded.predict(records[0]), model.predict(records[0]))
    assert loaded.extra == {"note": "x"}
    l1 = AdditiveFusionModel(loss="l1").fit(records)  # the exact fit is also the l1 optimum
    for record in records:
        np.testing.assert_allclose(np.exp(l1.predict(record)), record.config_runtime, rtol=1e-4)
    assert AdditiveFusionModel.load(l1.save(tmp_path / "l1.json")).loss == "l1"
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(DatasetError, match="format"):
        AdditiveFusionModel.load(tmp_path / "bad.json")


def test_graphsage_residual_form_overfits() -> None:
    from cost_model.learned.train import TrainConfig, evaluate_model, fit, predict, tensors_for

    records = _fusion_records(count=4, configs=16)
    model = fit(records, TrainConfig(loss="mse", mse_weight=0.0, epochs=150, hidden=16, layers=1, lr=5e-3, kernels_per_step=4,
                                     configs_per_step=16, residual=True))
    assert model.config.residual and model.config.graph_features == len(SHIPPED_TERMS)
    metrics = evaluate_model(model, records)
    assert metrics["mape"] < 0.05, metrics
    assert metrics["kendall"] > 0.85, metrics
    # the output is the MLP's residual plus log roofline_s: a 2x larger roofline offset adds log 2
    d = tensors_for(model, records[0])
    before = predict(model, d)
    d.offset = d.offset + math.log(2.0)
    np.testing.assert_allclose(predict(model, d) - before, math.log(2.0), atol=1e-9)
    with pytest.raises(DatasetError, match="layout-form"):
        fit([KernelRecord(r.node_feat, r.node_opcode, r.edge_index, r.config_runtime, r.config_runtime_normalizers,
                          config_feat=np.zeros((r.num_configs, 2), dtype=np.float32), meta=r.meta) for r in records], TrainConfig(residual=True, epochs=1))


def test_xgboost_residual_form_adds_to_the_roofline() -> None:
    """`GbdtBaseline(objective="residual")`: trees fitted on log(runtime / roofline_s), the
    prediction log roofline_s + the trees' output, so the residual and the roofline add up."""
    xgb = pytest.importorskip("xgboost")
    from cost_model.learned.baselines import GbdtBaseline

    records = _fusion_records(count=4, configs=16)
    model = GbdtBaseline(objective="residual", rounds=200, depth=3).fit(records)
    for record in records:
        predicted = model.predict(record)
        np.testing.assert_allclose(np.exp(predicted), record.config_runtime, rtol=0.1)
        trees = predicted - np.log(record.meta["roofline_s"])
        np.testing.assert_allclose(trees, model.booster.predict(xgb.DMatrix(model._rows(record, record_terms(record)))), rtol=1e-5, atol=1e-6)


def test_predictor_roofline_equals_the_simulator() -> None:
    """What the autotuner computes for its candidates is the collector's meta["roofline_s"]."""
    pytest.importorskip("jax")
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.learned.fusion_terms import graph_terms
    from cost_model.learned.predictor import AdditiveFusionPredictor, load_fusion_ranker
    from cost_model.profiling.host import host_topology
    from cost_model.simulator import SimulationProblem, simulate
    from passes.autotune.fusion import draw_fusions

    graph = fusion_graph("swiglu@1")
    nodes = node_order(graph)
    drawn = list(draw_fusions(graph, nodes, np.random.default_rng(0), 4).values())
    terms = graph_terms(nodes, [d.fusion_group for d in drawn])
    problem = SimulationProblem.from_graph(graph, host_topology(1))
    np.testing.assert_allclose(terms[:, -1], [simulate(problem, d).step_time_s for d in drawn], rtol=1e-12)
    predictor = load_fusion_ranker()
    assert isinstance(predictor, AdditiveFusionPredictor)
    logs = predictor.predict_log(nodes, [d.fusion_group for d in drawn])
    if predictor.model.uses_xla_terms:  # the packaged model reads XLA call counts (seventeenth session, pre-registered test)
        from cost_model.learned.fusion_xla_terms import graph_xla_terms

        terms = np.concatenate([terms, graph_xla_terms(graph, nodes, [d.fusion_group for d in drawn])[0]], axis=1)
    np.testing.assert_allclose(logs, np.log(predictor.model.predict_terms(terms)))
    assert np.isfinite(logs).all()


def test_l1_fit_ignores_an_outlier_the_l2_fit_follows() -> None:
    kernels = np.arange(1.0, 21.0)
    terms = np.stack([kernels, np.zeros_like(kernels)], axis=1)  # (kernels, roofline_s = 0)
    runtime = 10e-6 * kernels
    runtime[3] *= 3.0  # one configuration timed 3x slow
    l1 = AdditiveFusionModel(terms=("kernels", "roofline_s"), loss="l1").fit_terms(terms, runtime)
    l2 = AdditiveFusionModel(terms=("kernels", "roofline_s")).fit_terms(terms, runtime)
    assert l1.weights[0] == pytest.approx(10e-6, rel=1e-3)
    assert abs(l2.weights[0] / 10e-6 - 1) > 0.01  # one in 20 rows 3x off moves it 1.2%
    with pytest.raises(ValueError, match="loss"):
        AdditiveFusionModel(loss="huber")


def test_train_additive_and_save_with_the_l1_loss(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.fusion_additive import train_additive_and_save
    from cost_model.learned.tpugraphs import save_npz

    for i, record in enumerate(_fusion_records()):
        save_npz(record, tmp_path / "data" / f"g{i}.npz")
    report = train_additive_and_save(str(tmp_path / "data"), str(tmp_path / "m.json"), test_fraction=0.0, loss="l1")
    assert report["train_config"]["loss"] == "l1" and report["test_kernels"] == 1  # a split keeps one test graph
    assert AdditiveFusionModel.load(tmp_path / "m.json").loss == "l1"
    assert report["metrics"]["train"]["mape"] < 1e-3


def _conv_offset_rows(rows: int = 40, seed: int = 0) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Terms (conv_nodes, measured_dense_conv_s, kernel_outputs, roofline_s) of graphs whose
    runtime is 0.9 x their convs' seconds alone - 10 us per conv + 5 us per output buffer + the
    roofline: a conv timed alone carries a call's overhead that the in-graph sum prices elsewhere."""
    rng = np.random.default_rng(seed)
    convs = rng.integers(1, 5, size=rows).astype(np.float64)
    seconds = convs * rng.uniform(15e-6, 60e-6, size=rows)
    outputs = rng.integers(2, 20, size=rows).astype(np.float64)
    roofline = rng.uniform(20e-6, 80e-6, size=rows)
    runtime = 0.9 * seconds - 10e-6 * convs + 5e-6 * outputs + roofline
    return ("conv_nodes", "measured_dense_conv_s", "kernel_outputs", "roofline_s"), np.stack([convs, seconds, outputs, roofline], axis=1), runtime


def test_a_signed_term_recovers_a_negative_offset_the_nonnegative_fit_cannot(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.fusion_additive import CONV_OFFSET

    names, terms, runtime = _conv_offset_rows()
    signed = AdditiveFusionModel(terms=names, signed_terms=CONV_OFFSET).fit_terms(terms, runtime)
    np.testing.assert_allclose(signed.weights, [-10e-6, 0.9, 5e-6, 1.0], rtol=1e-6)
    full = np.zeros((len(terms), len(TERM_NAMES)))
    full[:, [TERM_NAMES.index(n) for n in names]] = terms
    np.testing.assert_allclose(signed.predict_terms(full), runtime, rtol=1e-6)
    plain = AdditiveFusionModel(terms=names).fit_terms(terms, runtime)
    assert plain.weights[0] == 0.0  # pinned at the bound: the conv seconds can only be scaled down
    assert np.abs(plain.predict_terms(full) / runtime - 1).mean() > 0.01
    l1 = AdditiveFusionModel(terms=names, signed_terms=CONV_OFFSET, loss="l1").fit_terms(terms, runtime)
    np.testing.assert_allclose(l1.weights, signed.weights, rtol=1e-3)
    loaded = AdditiveFusionModel.load(signed.save(tmp_path / "m.json"))
    assert loaded.signed_terms == ("conv_nodes",)
    np.testing.assert_allclose(loaded.predict_terms(full), signed.predict_terms(full))
    # a file written before the field existed loads with every weight >= 0
    state = json.loads((tmp_path / "m.json").read_text())
    del state["signed_terms"]
    (tmp_path / "old.json").write_text(json.dumps(state))
    assert AdditiveFusionModel.load(tmp_path / "old.json").signed_terms == ()
    with pytest.raises(ValueError, match="signed_terms must be among"):
        AdditiveFusionModel(terms=("kernels", "roofline_s"), signed_terms=CONV_OFFSET)



def test_tied_terms_hold_their_ratio_and_recover_a_truth_that_obeys_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """(a, b, r) ties w_b = r x w_a: exact on a truth with that ratio; held on one without it,
    where the free fit finds the other split; saved and loaded with the model."""
    rng = np.random.default_rng(1)
    names = ("kernel_inputs", "kernel_outputs", "input_mb", "output_mb", "roofline_s")
    terms = np.stack([rng.integers(2, 30, 60), rng.integers(2, 20, 60), rng.uniform(0.01, 2, 60), rng.uniform(0.01, 2, 60),
                      rng.uniform(20e-6, 80e-6, 60)], axis=1).astype(np.float64)
    truth = np.array([2e-6, 6e-6, 60e-6, 30e-6, 1.0])  # outputs 3 x arguments, MB written 0.5 x MB read
    runtime = terms @ truth
    tied = AdditiveFusionModel(terms=names, tied_terms=[("kernel_inputs", "kernel_outputs", 3.0), ("input_mb", "output_mb", 0.5)])
    np.testing.assert_allclose(tied.fit_terms(terms, runtime).weights, truth, rtol=1e-6)
    equal = AdditiveFusionModel(terms=names, tied_terms=[("kernel_inputs", "kernel_outputs", 1.0)]).fit_terms(terms, runtime)
    assert equal.weights[0] == pytest.approx(equal.weights[1], rel=1e-12) and equal.weights[0] > 0  # tied equal though the truth is 1:3
    free = AdditiveFusionModel(terms=names).fit_terms(terms, runtime)
    np.testing.assert_allclose(free.weights, truth, rtol=1e-6)
    full = np.zeros((len(terms), len(TERM_NAMES)))
    full[:, [TERM_NAMES.index(n) for n in names]] = terms
    loaded = AdditiveFusionModel.load(equal.save(tmp_path / "m.json"))
    assert loaded.tied_terms == (("kernel_inputs", "kernel_outputs", 1.0),)
    np.testing.assert_allclose(loaded.predict_terms(full), equal.predict_terms(full))
    state = json.loads((tmp_path / "m.json").read_text())
    del state["tied_terms"]
    (tmp_path / "old.json").write_text(json.dumps(state))
    assert AdditiveFusionModel.load(tmp_path / "old.json").tied_terms == ()
    for bad in ([("kernel_inputs", "kernel_inputs", 1.0)], [("kernel_inputs", "fused_groups", 1.0)], [("input_mb", "output_mb", -1.0)],
                [("kernel_inputs", "kernel_outputs", 1.0), ("kernel_outputs", "input_mb", 1.0)]):
        with pytest.raises(ValueError, match="tied_terms"):
            AdditiveFusionModel(terms=names, tied_terms=bad)
    with pytest.raises(ValueError, match="signed term"):
        AdditiveFusionModel(terms=("conv_nodes",) + names, signed_terms=("conv_nodes",), tied_terms=[("kernel_inputs", "conv_nodes", 1.0)])

def test_train_additive_and_save_frees_the_conv_offset_by_default(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main
    from cost_model.learned.fusion_additive import train_additive_and_save
    from cost_model.learned.tpugraphs import save_npz

    for i, record in enumerate(_fusion_records()):
        save_npz(record, tmp_path / "data" / f"g{i}.npz")
    report = train_additive_and_save(str(tmp_path / "data"), str(tmp_path / "m.json"), test_fraction=0.0)
    assert report["train_config"]["signed_terms"] == ["conv_nodes"]
    assert AdditiveFusionModel.load(tmp_path / "m.json").signed_terms == ("conv_nodes",)
    assert main(["costmodel", "train", str(tmp_path / "data"), "-o", str(tmp_path / "p.json"), "--model", "additive", "--additive-signed-terms", ""]) == 0
    assert AdditiveFusionModel.load(tmp_path / "p.json").signed_terms == ()
    assert main(["costmodel", "train", str(tmp_path / "data"), "-o", str(tmp_path / "q.json"), "--model", "additive", "--additive-signed-terms", "conv_count"]) == 2
    assert "--additive-signed-terms" in capsys.readouterr().err and not (tmp_path / "q.json").exists()
    # --additive-terms: a term outside the default form joins it (twenty-first session); others are refused
    assert main(["costmodel", "train", str(tmp_path / "data"), "-o", str(tmp_path / "c.json"), "--model", "additive", "--additive-terms", "kernels_pow1_5"]) == 0
    grown = AdditiveFusionModel.load(tmp_path / "c.json")
    assert grown.terms == SHIPPED_TERMS[:-1] + ("kernels_pow1_5", "roofline_s") and json.loads((tmp_path / "c.json").read_text())["extra"]["train_config"]["extra_terms"] == ["kernels_pow1_5"]
    for bad in ("kernels", "no_such_term", "kernels_pow1_5,kernels_pow1_5"):
        assert main(["costmodel", "train", str(tmp_path / "data"), "-o", str(tmp_path / "r.json"), "--model", "additive", "--additive-terms", bad]) == 2
        assert "--additive-terms" in capsys.readouterr().err and not (tmp_path / "r.json").exists()
