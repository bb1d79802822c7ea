"""The tenth to thirteenth and the seventeenth and twenty-first sessions' fusion programs: each imports as a valid graph, and random legal
fusions of it, run group by group through XLA, compute what the JAX program computes."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jax")

from compiler_opt.costmodel.fusion_graphs import (  # noqa: E402
    EXTRA_PROGRAMS, FIFTH_KIND_PROGRAMS, FIRST_PROGRAMS, FOURTH_KIND_PROGRAMS, GROUPED_PROGRAMS, SECOND_KIND_PROGRAMS, THIRD_KIND_PROGRAMS, fusion_graph_names,
    fusion_workload)
from cost_model.decisions import node_order  # noqa: E402
from cost_model.profiling.calibration import GroupExecutor  # noqa: E402
from passes.autotune.fusion import draw_fusions  # noqa: E402


def _check(name: str, fusions: int) -> set[str]:
    import jax

    workload = fusion_workload(name)
    graph = workload.graph
    graph.verify()
    nodes = node_order(graph)
    executor = GroupExecutor(graph, nodes, seed=0)
    for value, arg in zip(graph.inputs, workload.args):  # the program's own arguments, not random ones
        executor.input_arrays[value] = np.asarray(arg)
    want = np.asarray(jax.jit(workload.reference)(*workload.args))
    drawn = draw_fusions(graph, nodes, np.random.default_rng(0), 30)
    assert len(drawn) >= 20  # enough distinct legal fusions to rank
    for decisions in list(drawn.values())[:fusions]:
        (got,) = executor.plan(decisions).run()
        np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))
    return {n.op_type for n in nodes}


def test_the_extra_programs_are_new_names_after_the_first_fifteen() -> None:
    assert len(EXTRA_PROGRAMS) == 14 and not set(EXTRA_PROGRAMS) & set(FIRST_PROGRAMS)
    assert len(GROUPED_PROGRAMS) == 4 and not set(GROUPED_PROGRAMS) & set(FIRST_PROGRAMS + EXTRA_PROGRAMS)
    old = FIRST_PROGRAMS + EXTRA_PROGRAMS + GROUPED_PROGRAMS
    assert len(SECOND_KIND_PROGRAMS) == 4 and not set(SECOND_KIND_PROGRAMS) & set(old)
    assert len(THIRD_KIND_PROGRAMS) == 4 and not set(THIRD_KIND_PROGRAMS) & set(old + SECOND_KIND_PROGRAMS)
    assert len(FOURTH_KIND_PROGRAMS) == 11 and not set(FOURTH_KIND_PROGRAMS) & set(old + SECOND_KIND_PROGRAMS + THIRD_KIND_PROGRAMS)
    earlier = old + SECOND_KIND_PROGRAMS + THIRD_KIND_PROGRAMS + FOURTH_KIND_PROGRAMS
    assert len(FIFTH_KIND_PROGRAMS) == 10 and not set(FIFTH_KIND_PROGRAMS) & set(earlier)
    assert fusion_graph_names((1,)) == [f"{p}@1" for p in earlier + FIFTH_KIND_PROGRAMS]  # the old names keep their order
    with pytest.raises(KeyError, match="no fusion program"):
        fusion_workload("nope@1")


def test_extra_programs_at_scale_1_fuse_and_match_jax() -> None:
    ops: set[str] = set()
    for program in EXTRA_PROGRAMS:
        ops |= _check(f"{program}@1", fusions=2)
    # what the first fifteen lack: pooling windows, gathers, pads, concatenations, slices
    assert {"reduce-window", "gather", "pad", "concatenate", "slice", "convolution", "transpose"} <= ops
    assert "call" not in ops  # no opaque calls: every op is priced by its class


def test_grouped_programs_at_scale_1_fuse_and_match_jax() -> None:
    for program in GROUPED_PROGRAMS:
        assert "convolution" in _check(f"{program}@1", fusions=2)


def test_second_kind_programs_at_scale_1_fuse_and_match_jax() -> None:
    ops = [_check(f"{program}@1", fusions=2) for program in SECOND_KIND_PROGRAMS]
    # each adds a second program to a class one program alone had
    assert "reduce-window" in ops[0] and {"pad", "concatenate", "slice", "convolution"} <= ops[1]
    assert all("reduce" in o for o in ops[2:]) and not any("call" in o for o in ops)


def test_third_kind_programs_at_scale_1_fuse_and_match_jax() -> None:
    ops = [_check(f"{program}@1", fusions=2) for program in THIRD_KIND_PROGRAMS]
    # an Inception block: several pads, a four-way concatenation, an average pool and its convs
    assert {"pad", "concatenate", "reduce-window", "convolution"} <= ops[0]
    assert {"broadcast", "reduce", "dot"} <= ops[1]  # FiLM: per-sample, per-channel broadcasts
    assert {"transpose", "reduce", "log"} <= ops[2] and {"reduce", "log"} <= ops[3]  # two cross-entropies
    assert not any("call" in o for o in ops)


def test_inception_pads_and_concatenates_megabytes() -> None:
    """The block moves MBs through its pads and its concatenation at scale 2 (the programs before
    it moved < 0.12 MB), so the fit has a program where the class's cost is not negligible."""
    from cost_model.learned.fusion_features import fusion_graph_arrays
    from cost_model.learned.fusion_terms import CLASS_MB, OP_CLASSES, _graph_parts

    nodes = node_order(fusion_workload("inception@2").graph)
    assert sum(n.op_type == "pad" for n in nodes) == 4 and sum(n.op_type == "concatenate" for n in nodes) == 1
    classes = _graph_parts(*fusion_graph_arrays(nodes)[:2])[3]
    assert classes[len(OP_CLASSES) + CLASS_MB.index("concat_pad_mb")] > 0.5


@pytest.mark.parametrize("program", FOURTH_KIND_PROGRAMS)
def test_fourth_kind_programs_build_run_under_jit_and_fuse_like_jax(program: str) -> None:
    """The seventeenth session's eleven (the pre-registered test's new programs): each builds at both
    scales with seeded inputs, runs under jax.jit to finite values, has no opaque calls, and at scale 1
    two random legal fusions run group by group through XLA compute what jax.jit computes."""
    import jax

    for scale in (1, 2):
        workload = fusion_workload(f"{program}@{scale}")
        again = fusion_workload(f"{program}@{scale}")
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(workload.args, again.args))  # seeded
        assert np.isfinite(np.asarray(jax.jit(workload.reference)(*workload.args))).all()
    ops = _check(f"{program}@1", fusions=2)
    assert "call" not in ops and ({"dot", "convolution"} & ops)  # every op priced by its class; a matmul or conv in each
    kinds = {"convnext": {"convolution", "rsqrt"}, "swin_attn": {"transpose", "exponential"}, "t5_relpos": {"gather", "dot"},
             "rope_rms": {"slice", "concatenate", "rsqrt"}, "bottleneck": {"convolution"}, "wavenet": {"pad", "convolution", "tanh"},
             "pointnet": {"reduce", "log"}, "conformer_conv": {"convolution", "slice"}, "moe_gate": {"exponential", "reduce"},
             "se_block": {"reduce", "minimum"}, "odd_mlp": {"tanh", "rsqrt"}}
    assert kinds[program] <= ops


@pytest.mark.parametrize("program", FIFTH_KIND_PROGRAMS)
def test_fifth_kind_programs_build_run_under_jit_and_fuse_like_jax(program: str) -> None:
    """The twenty-first session's ten (the next pre-registered test's new programs), checked as the
    fourth kind are: seeded, finite under jax.jit at both scales, no opaque calls, two random legal
    fusions at scale 1 equal to jax.jit, and each has the ops that make it what it is."""
    import jax

    for scale in (1, 2):
        workload = fusion_workload(f"{program}@{scale}")
        again = fusion_workload(f"{program}@{scale}")
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(workload.args, again.args))
        assert np.isfinite(np.asarray(jax.jit(workload.reference)(*workload.args))).all()
    ops = _check(f"{program}@1", fusions=2)
    assert "call" not in ops and ({"dot", "convolution"} & ops)
    kinds = {"vit_patch": {"convolution", "concatenate", "rsqrt"}, "cross_attn": {"dot", "exponential", "transpose"},
             "gcn": {"dot", "rsqrt", "log"}, "fpn_merge": {"convolution", "broadcast"}, "dlrm": {"gather", "concatenate", "dot"},
             "qk_norm_attn": {"rsqrt", "exponential", "dot"}, "nerf_mlp": {"sine", "cosine", "concatenate"},
             "vae_loss": {"exponential", "reduce", "dot"}, "pixel_shuffle": {"convolution", "transpose"}, "mlp_grad": {"tanh", "transpose", "concatenate"}}
    assert kinds[program] <= ops


@pytest.mark.slow
@pytest.mark.parametrize("program", EXTRA_PROGRAMS + GROUPED_PROGRAMS + SECOND_KIND_PROGRAMS + THIRD_KIND_PROGRAMS + FOURTH_KIND_PROGRAMS
                         + FIFTH_KIND_PROGRAMS)
def test_extra_programs_at_scale_2_fuse_and_match_jax(program: str) -> None:
    _check(f"{program}@2", fusions=3)


def test_merge_moves_a_collection_onto_the_first_ones_scale(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.costmodel.fusion_merge import merge_fusion_collections
    from cost_model.learned.tpugraphs import DatasetError, KernelRecord, load_dir, save_npz

    def collection(folder, scale, names):  # type: ignore[no-untyped-def]
        folder.mkdir()
        for i, name in enumerate(names):
            ratios = np.array([1.0, 2.0, 1.5]) * (i + 1)
            record = KernelRecord(np.zeros((2, 3), np.float32), np.zeros(2, np.int32), np.zeros((1, 2), np.int64), ratios * scale,
                                  np.full(3, scale), node_config_ids=np.arange(2), node_config_feat=np.zeros((3, 2, 4), np.float32),
                                  config_text=["a", "b", "c"],
                                  meta={"kernel": name, "program": name.split("@")[0], "reference": {"graph": "mlp@1", "scale": scale},
                                        "retest": [[ratios[0] * scale, ratios[0] * scale * 1.02]], "config_runtime_median": list(ratios * scale)})
            save_npz(record, folder / f"{name}.npz")
        (folder / "dataset.json").write_text(json.dumps({"seed": 0, "configs_per_kernel": 3,
                                                         "reference": {"graph": "mlp@1", "scale_s": scale, "per_graph_s": {n: scale for n in names}}}))

    collection(tmp_path / "old", 3e-4, ["a@1", "a@2"])
    collection(tmp_path / "new", 4e-4, ["b@1"])
    summary = merge_fusion_collections([tmp_path / "old", tmp_path / "new"], tmp_path / "merged")
    assert summary["kernels"] == 3 and summary["reference"]["scale_s"] == 3e-4
    assert [s["factor"] for s in summary["merged_from"]] == pytest.approx([1.0, 0.75])
    merged = {r.name: r for r in load_dir(tmp_path / "merged")}
    np.testing.assert_allclose(merged["a@2"].config_runtime, np.array([2.0, 4.0, 3.0]) * 3e-4)  # the first source: unchanged
    np.testing.assert_allclose(merged["b@1"].config_runtime, np.array([1.0, 2.0, 1.5]) * 3e-4)  # same ratios, the first one's seconds
    np.testing.assert_allclose(merged["b@1"].config_runtime_normalizers, np.full(3, 3e-4))
    np.testing.assert_allclose(merged["b@1"].meta["retest"], [[3e-4, 3.06e-4]])
    assert merged["b@1"].meta["reference"]["collection_scale"] == 4e-4
    assert summary["noise_floor"]["pairs"] == 3 and abs(summary["noise_floor"]["median"] - 0.02) < 1e-9
    with pytest.raises(DatasetError, match="in two sources"):
        merge_fusion_collections([tmp_path / "old", tmp_path / "old"], tmp_path / "twice")
    with pytest.raises(DatasetError, match="must not be one of the sources"):
        merge_fusion_collections([tmp_path / "old", tmp_path / "new"], tmp_path / "new")


def test_merge_moves_referenced_conv_times_with_the_labels_and_drops_raw_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Twelfth session: `node_conv_time` in a collection's unit (timed with its reference and scale)
    is multiplied by the same factor as the labels; raw seconds (no reference) are dropped."""
    from compiler_opt.costmodel.fusion_merge import merge_fusion_collections
    from cost_model.learned.tpugraphs import KernelRecord, load_dir, save_npz

    def collection(folder, scale, name, conv_scale):  # type: ignore[no-untyped-def]
        folder.mkdir()
        record = KernelRecord(np.zeros((2, 3), np.float32), np.zeros(2, np.int32), np.zeros((1, 2), np.int64), np.array([1.0, 2.0]) * scale,
                              np.full(2, scale), node_config_ids=np.arange(2), node_config_feat=np.zeros((2, 2, 4), np.float32), config_text=["a", "b"],
                              meta={"kernel": name, "program": name.split("@")[0], "reference": {"graph": "mlp@1", "scale": scale}, "retest": [],
                                    "conv_times": {"scale_s": conv_scale}}, node_conv_time=np.array([0.0, 1e-4]))
        save_npz(record, folder / f"{name}.npz")
        (folder / "dataset.json").write_text(json.dumps({"seed": 0, "reference": {"graph": "mlp@1", "scale_s": scale, "per_graph_s": {name: scale}}}))

    collection(tmp_path / "one", 3e-4, "a@1", 3e-4)
    collection(tmp_path / "two", 4e-4, "b@1", 4e-4)  # referenced: in its collection's unit
    collection(tmp_path / "raw", 5e-4, "c@1", 1.0)  # raw seconds
    merge_fusion_collections([tmp_path / "one", tmp_path / "two", tmp_path / "raw"], tmp_path / "merged")
    merged = {r.name: r for r in load_dir(tmp_path / "merged")}
    np.testing.assert_allclose(merged["a@1"].node_conv_time, [0.0, 1e-4])
    np.testing.assert_allclose(merged["b@1"].node_conv_time, [0.0, 0.75e-4])  # x 3e-4 / 4e-4, as its labels
    assert merged["b@1"].meta["conv_times"]["scale_s"] == 3e-4
    assert merged["c@1"].node_conv_time is None and "conv_times" not in merged["c@1"].meta
