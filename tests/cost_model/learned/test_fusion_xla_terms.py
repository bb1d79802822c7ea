"""What XLA's CPU backend makes of a call (`fusion_xla_terms`): the optimized-HLO parser on real
functions compiled here, the call cache, the per-configuration sums, and the shipped additive model
unchanged by the optional term set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cost_model.learned.fusion_xla_terms import (CALL_COUNT_NAMES, XLA_TERM_NAMES, XlaCallCache, call_counts, collect_xla_calls, config_calls,
                                                 parse_optimized_hlo, record_xla_terms)

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _compiled(fn, *shapes):  # type: ignore[no-untyped-def]
    args = [np.ones(s, dtype=np.float32) for s in shapes]
    return jax.jit(fn).lower(*args).compile()


def test_an_elementwise_chain_is_one_loop_fusion_and_a_reduction_is_a_reduce_fusion() -> None:
    chain = parse_optimized_hlo(_compiled(lambda x: jnp.tanh(x * 2.0 + 1.0) * x, (64, 32)).as_text())
    assert chain["xla_loop_fusions"] == 1 and chain["xla_reduce_fusions"] == 0 and chain["xla_thunks"] == 1
    assert chain["xla_parameters"] == 1 and chain["xla_outputs"] == 1
    assert chain["xla_fused_instructions"] >= 3  # multiply, add, tanh, multiply (broadcasts of constants too)
    assert chain["xla_transcendental_melements"] == pytest.approx(64 * 32 * 1e-6)  # the one tanh over 2048 elements
    assert chain["xla_transposes"] == 0 and chain["xla_copies"] == 0
    reduced = parse_optimized_hlo(_compiled(lambda x: jnp.sum(jnp.exp(x), axis=1), (64, 32)).as_text())
    assert reduced["xla_reduce_fusions"] + reduced["xla_ynn_reduce_fusions"] == 1 and reduced["xla_loop_fusions"] == 0
    if reduced["xla_reduce_fusions"]:  # XLA's own loop-emitted reduction reads all 2048 elements
        assert reduced["xla_loop_reduce_in_melements"] == pytest.approx(64 * 32 * 1e-6)


def test_a_transpose_xla_must_materialise_shows_up_and_a_pooling_window_is_its_own_kind() -> None:
    moved = parse_optimized_hlo(_compiled(lambda x: jnp.transpose(x) + 1.0, (64, 32)).as_text())
    assert moved["xla_transposes"] + moved["xla_copies"] >= 1
    pooled = parse_optimized_hlo(_compiled(lambda x: jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"),
                                           (1, 16, 16, 4)).as_text())
    assert pooled["xla_window_fusions"] + pooled["xla_unfused_data_ops"] == 1 and pooled["xla_reduce_fusions"] == 0


def test_dots_convs_and_tuple_outputs_are_counted() -> None:
    two = parse_optimized_hlo(_compiled(lambda a, b: (a @ b, jnp.maximum(a, 0.0)), (32, 32), (32, 32)).as_text())
    assert two["xla_outputs"] == 2 and two["xla_parameters"] == 2
    assert two["xla_ynn_dot_fusions"] + two["xla_eigen_dots"] + two["xla_custom_calls"] >= 1  # the dot: a library call of some kind
    dn = ("NHWC", "HWIO", "NHWC")
    conv = parse_optimized_hlo(_compiled(lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=dn),
                                         (1, 8, 8, 4), (3, 3, 4, 4)).as_text())
    assert conv["xla_convs"] + conv["xla_custom_calls"] + conv["xla_ynn_dot_fusions"] + conv["xla_ynn_other_fusions"] == 1


def test_call_counts_reads_the_executable() -> None:
    compiled = _compiled(lambda x: jnp.sum(jnp.exp(x) * 3.0), (128, 64))
    counts = call_counts(compiled.runtime_executable())
    assert set(counts) == set(CALL_COUNT_NAMES)
    # exp, scale and a full sum: one fusion, XLA's own or (this jaxlib) a YNNPACK custom fusion
    assert counts["xla_reduce_fusions"] + counts["xla_ynn_other_fusions"] == 1 and counts["xla_thunks"] == 1
    assert counts["xla_fused_instructions"] >= 3 and counts["xla_transcendental_melements"] == pytest.approx(128 * 64 * 1e-6)
    assert counts["xla_thunk_output_mb"] == pytest.approx(4e-6)  # one f32 scalar leaves the call
    mlp = call_counts(_compiled(lambda x, w: jnp.tanh(x @ w), (64, 64), (64, 64)).runtime_executable())
    assert mlp["xla_bytes_mb"] >= 2 * 64 * 64 * 4 * 1e-6  # XLA's cost analysis read both operands


def test_config_calls_groups_members_and_keeps_lone_nodes_alone() -> None:
    assert sorted(config_calls(np.array([-1, 0, 0, -1, 1, 1]))) == [(0,), (1, 2), (3,), (4, 5)]


class _Record:
    def __init__(self, name: str, configs: list[str]) -> None:
        self.name, self.config_text = name, configs


def test_the_cache_round_trips_and_sums_per_configuration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.fusion_xla_terms import EXECUTABLE_COUNT_NAMES

    one = _compiled(lambda x: jnp.tanh(x) + 1.0, (8, 8)).as_text()  # one loop fusion
    two = _compiled(lambda x: (jnp.transpose(x) * 2.0, jnp.sum(x, axis=0)), (8, 16)).as_text()
    with XlaCallCache(tmp_path / "calls.sqlite") as cache:
        cache.put_call("a", one, dict.fromkeys(EXECUTABLE_COUNT_NAMES, 1.0), 0.1)
        cache.put_call("b", two, dict.fromkeys(EXECUTABLE_COUNT_NAMES, 2.0), 0.2)
        cache.put_config("g@1", "[0, 0]", ["a"])
        cache.put_config("g@1", "[-1, -1]", ["a", "b", "b"])
    with XlaCallCache(tmp_path / "calls.sqlite") as cache:  # reopened: what was written is there
        assert cache.call_text("b") == two and cache.call("c") is None
        assert cache.call("b") == parse_optimized_hlo(two) | dict.fromkeys(EXECUTABLE_COUNT_NAMES, 2.0)
        assert cache.compile_seconds() == (2, pytest.approx(0.3))
        terms = record_xla_terms(_Record("g@1", ["[-1, -1]", "[0, 0]"]), cache)
        with pytest.raises(KeyError, match="g@1"):
            record_xla_terms(_Record("g@1", ["[0, -1]"]), cache)
    assert terms.shape == (2, len(XLA_TERM_NAMES))
    for name in ("xla_thunks", "xla_outputs", "xla_fused_instructions"):
        column = XLA_TERM_NAMES.index(name)
        np.testing.assert_allclose(terms[:, column], [parse_optimized_hlo(one)[name] + 2 * parse_optimized_hlo(two)[name], parse_optimized_hlo(one)[name]])
    np.testing.assert_allclose(terms[:, XLA_TERM_NAMES.index("xla_temp_mb")], [5.0, 1.0])
    assert parse_optimized_hlo(two)["xla_outputs"] == 2


def test_collect_on_a_real_fusion_graph_is_resumable_and_dedupes_calls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.costmodel.fusion_graphs import fusion_graph

    graph = fusion_graph("mlp@1")
    n = len(list(graph))
    alone, whole = json.dumps([-1] * n), json.dumps([0] * n)
    with XlaCallCache(tmp_path / "calls.sqlite") as cache:
        first = collect_xla_calls([("mlp@1", [alone, whole])], cache, build=lambda _: graph, progress=False)
        again = collect_xla_calls([("mlp@1", [alone, whole])], cache, build=lambda _: graph, progress=False)
        keys_alone, keys_whole = cache.config_keys("mlp@1", alone), cache.config_keys("mlp@1", whole)
        terms = record_xla_terms(_Record("mlp@1", [alone, whole]), cache)
    assert first["configs"] == 2 and again["configs"] == 0 and again["calls_compiled"] == 0
    assert len(keys_alone) == n and len(keys_whole) == 1
    assert first["calls_compiled"] == len(set(keys_alone) | set(keys_whole)) <= n + 1  # isomorphic lone nodes compile once
    thunks, params = XLA_TERM_NAMES.index("xla_thunks"), XLA_TERM_NAMES.index("xla_parameters")
    assert terms[0, thunks] > terms[1, thunks]  # one executable per node runs more thunks than XLA's fusion of them all
    assert terms[0, params] > terms[1, params]


def test_the_shipped_model_is_the_preregistered_one_with_ynnpack_reduce_fusions() -> None:
    """Seventeenth session (c): `fusion_additive.json` is model B of the pre-registered test (the
    shipped form + `xla_ynn_reduce_fusions`); twentieth session: refitted by a second pre-registered
    rule on `fusion_s20` (`fusion_s12c` + the eleven new programs collected again on a quiet core);
    twenty-first session: + the call growth term `kernels_pow1_5` by a third pre-registered test (ten
    new programs), refitted on `fusion_s21all` (`fusion_s20` + those ten). It reads that XLA count and
    no other, and refuses rows without the XLA columns."""
    from cost_model.learned.fusion_additive import ALL_TERM_NAMES, AdditiveFusionModel
    from cost_model.learned.fusion_terms import SHIPPED_TERMS, TERM_NAMES
    from cost_model.learned.predictor import PACKAGED_FUSION_ADDITIVE

    model = AdditiveFusionModel.load(PACKAGED_FUSION_ADDITIVE)
    assert model.uses_xla_terms and model.terms == SHIPPED_TERMS[:-1] + ("kernels_pow1_5", "xla_ynn_reduce_fusions", "roofline_s")
    assert model.extra["train_config"]["xla_terms"] == ["xla_ynn_reduce_fusions"] and model.extra["data"] == "fusion_s21all"
    assert model.extra["train_config"]["extra_terms"] == ["kernels_pow1_5"]
    assert 3e-6 < model.weights[model.terms.index("xla_ynn_reduce_fusions")] < 6e-6  # ~3.7 us a YNNPACK reduce fusion
    assert 0.3e-6 < model.weights[model.terms.index("kernels_pow1_5")] < 1e-6  # ~0.6 us x sqrt(calls) a call
    rng = np.random.default_rng(17)
    # the file's own columns drawn by name, so a term added to TERM_NAMES later leaves the draw as it is
    wide = np.zeros((4, len(ALL_TERM_NAMES)))
    wide[:, [ALL_TERM_NAMES.index(n) for n in model.terms[:-1]]] = rng.uniform(0, 20, size=(4, len(model.terms) - 1))
    wide[:, ALL_TERM_NAMES.index("roofline_s")] = rng.uniform(20e-6, 300e-6, size=4)
    others = [i for i, n in enumerate(ALL_TERM_NAMES) if n not in model.terms]
    wide[:, others] = rng.uniform(0, 50, size=(4, len(others)))
    rows = wide[:, : len(TERM_NAMES)]
    expected = [24.41112934, 18.19639625, 15.50460435, 22.19086082]  # this file on these rows (its weights . the rows, by hand: the same)
    np.testing.assert_allclose(model.predict_terms(wide), expected, rtol=1e-8)
    other = wide.copy()
    others = [i for i, n in enumerate(ALL_TERM_NAMES) if n.startswith("xla_") and n != "xla_ynn_reduce_fusions"]
    other[:, others] += 7.0
    np.testing.assert_allclose(model.predict_terms(other), model.predict_terms(wide), rtol=0)  # the other XLA counts are not read
    with pytest.raises(ValueError, match="columns"):
        model.predict_terms(rows)


def test_a_model_with_xla_terms_fits_them_and_refuses_narrow_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.fusion_additive import ALL_TERM_NAMES, AdditiveFusionModel

    rng = np.random.default_rng(0)
    names = ("kernels", "xla_thunks", "xla_copies", "roofline_s")
    x = np.stack([rng.integers(2, 30, 200), rng.integers(2, 60, 200), rng.integers(0, 8, 200), rng.uniform(20e-6, 90e-6, 200)], axis=1).astype(float)
    runtime = x @ np.array([4e-6, 1.5e-6, 3e-6, 1.0])
    model = AdditiveFusionModel(terms=names).fit_terms(x, runtime)
    np.testing.assert_allclose(model.weights, [4e-6, 1.5e-6, 3e-6, 1.0], rtol=1e-6)
    wide = np.zeros((len(x), len(ALL_TERM_NAMES)))
    wide[:, [ALL_TERM_NAMES.index(n) for n in names]] = x
    loaded = AdditiveFusionModel.load(model.save(tmp_path / "m.json"))
    np.testing.assert_allclose(loaded.predict_terms(wide), runtime, rtol=1e-6)
    with pytest.raises(ValueError, match="columns"):
        loaded.predict_terms(wide[:, : len(ALL_TERM_NAMES) - len(XLA_TERM_NAMES)])


def test_the_tuner_path_gives_the_dataset_path_terms(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`graph_xla_terms` (the autotuner's candidates) and `collect_xla_calls` + `record_xla_terms`
    (the dataset) compile the same calls and sum the same counts."""
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.learned.fusion_xla_terms import graph_xla_terms

    graph = fusion_graph("mlp@1")
    nodes = node_order(graph)
    rng = np.random.default_rng(0)
    groups = [np.full(len(nodes), -1), np.zeros(len(nodes), dtype=np.int64), rng.integers(-1, 3, size=len(nodes))]
    texts = [json.dumps([int(g) for g in row]) for row in groups]
    with XlaCallCache(tmp_path / "calls.sqlite") as cache:
        collect_xla_calls([("mlp@1", texts)], cache, build=lambda _: graph, progress=False)
        dataset = record_xla_terms(_Record("mlp@1", texts), cache)
    rows, cost = graph_xla_terms(graph, nodes, groups)
    np.testing.assert_allclose(rows, dataset, rtol=1e-12)
    assert cost["calls_compiled"] == cost["calls"] > 0 and cost["seconds_per_candidate"] > 0


def test_the_predictor_compiles_candidates_for_a_model_with_xla_terms(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.decisions import node_order
    from cost_model.learned.fusion_additive import AdditiveFusionModel
    from cost_model.learned.fusion_terms import SHIPPED_TERMS, graph_terms
    from cost_model.learned.fusion_xla_terms import graph_xla_terms
    from cost_model.learned.predictor import AdditiveFusionPredictor

    names = SHIPPED_TERMS[:-1] + ("xla_ynn_reduce_fusions", "xla_thunks", "roofline_s")
    model = AdditiveFusionModel(terms=names)
    model.weights = np.linspace(1e-6, 3e-6, len(names))
    predictor = AdditiveFusionPredictor.load(model.save(tmp_path / "m.json"))
    graph = fusion_graph("mlp@1")
    nodes = node_order(graph)
    groups = [np.full(len(nodes), -1), np.zeros(len(nodes), dtype=np.int64)]
    got = predictor.predict_log(nodes, groups, graph=graph)
    wide = np.concatenate([graph_terms(nodes, groups, graph=graph), graph_xla_terms(graph, nodes, groups)[0]], axis=1)
    np.testing.assert_allclose(got, np.log(model.predict_terms(wide)), rtol=1e-12)
    assert predictor.xla_cost["calls_compiled"] > 0


def test_training_refuses_unknown_xla_terms_or_a_missing_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cost_model.learned.fusion_additive import train_additive_and_save

    with pytest.raises(ValueError, match="xla_terms"):
        train_additive_and_save(str(tmp_path), str(tmp_path / "m.json"), xla_terms=["xla_no_such_count"], xla_calls=tmp_path / "c.sqlite")
    with pytest.raises(ValueError, match="xla_calls"):
        train_additive_and_save(str(tmp_path), str(tmp_path / "m.json"), xla_terms=["xla_ynn_reduce_fusions"])
