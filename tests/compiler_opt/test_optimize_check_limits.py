"""`optimize --check` at its limits. The backend refuses a model: the original (an opset
onnxruntime no longer runs) is "no check possible", named as such, never an internal error; the
optimized one (a rewrite that broke the model) is a failed check; both leave nothing written.
Inputs without static shapes fail before the work. Random outputs (a random op, a seed read from
the runtime) are named and not compared."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import compiler_opt
from compiler_opt.cli.main import main
from compiler_opt.cli.optimize_lib import NUMERICS_EXIT


def _old_opset_model(onnx_backend_data):
    """A shipped opset-6 model; skipped where this onnxruntime runs it after all."""
    path = onnx_backend_data / "pytorch-converted" / "test_BatchNorm2d_eval" / "model.onnx"
    if not path.is_file():
        pytest.skip(f"{path} not shipped with this onnx")
    try:
        ort.InferenceSession(onnx.load(path).SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - exactly the refusal this test needs
        return path
    pytest.skip(f"onnxruntime {ort.__version__} runs {path.name}'s opset; nothing refuses it here")


def test_original_the_backend_cannot_run_is_reported_not_crashed(onnx_backend_data):
    path = _old_opset_model(onnx_backend_data)
    result = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", budget_s=2, check=True)
    check = result.numerics
    assert check is not None and not check.ok and not check.ran
    assert "not possible" in check.one_line() and "cannot run the original model" in check.one_line()
    assert "BatchNormalization" in check.one_line()  # onnxruntime's own reason is kept
    report = result.to_json()
    assert report["numerics_ran"] is False and report["numerics_ok"] is False


def test_cli_exits_3_with_a_hint_and_writes_nothing(onnx_backend_data, tmp_path, capsys):
    path = _old_opset_model(onnx_backend_data)
    out = tmp_path / "o.onnx"
    code = main(["optimize", str(path), "-o", str(out), "--method", "m-etf", "--check"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == NUMERICS_EXIT and not out.exists()
    assert len(err) == 1 and str(path) in err[0] and "rerun without --check" in err[0]
    assert "internal error" not in err[0]
    assert main(["optimize", str(path), "-o", str(out), "--method", "m-etf"]) == 0 and out.is_file()  # unchecked: written


def test_a_rewrite_the_backend_refuses_is_a_failed_check(example_model, monkeypatch):
    from passes.onnx import conv_fold

    original_call = conv_fold.FoldConvBatchNorm.call

    def breaks_an_op(self, graph):  # noqa: ANN001, ANN202 - the bug: an op renamed to one nobody implements
        result = original_call(self, graph)
        relu = next(node for node in result.graph if node.op_type == "Relu")
        relu.op_type = "NoSuchOp"
        return result

    monkeypatch.setattr(conv_fold.FoldConvBatchNorm, "call", breaks_an_op)
    result = compiler_opt.optimize(str(example_model), target="2xV100", method="single-device", budget_s=1, check=True)
    check = result.numerics
    assert check is not None and check.ran and not check.ok
    assert "runs the original model but not the optimized one" in check.one_line()


def test_check_without_static_input_shapes_fails_before_the_work(onnx_backend_data, tmp_path, capsys):
    path = onnx_backend_data / "simple" / "test_sequence_model8" / "model.onnx"  # input X: f32[n]
    if not path.is_file():
        pytest.skip(f"{path} not shipped with this onnx")
    with pytest.raises(compiler_opt.api.OptimizeError) as info:
        compiler_opt.optimize(path, target="2xV100", method="m-etf", check=True)
    assert info.value.field == "input_shapes" and "X: f32[n]" in str(info.value) and str(path) in str(info.value)
    out = tmp_path / "o.onnx"
    assert main(["optimize", str(path), "-o", str(out), "--check"]) == 2 and not out.exists()
    assert "--input-shape" in capsys.readouterr().err
    # With the shape given the check runs; this model's second input holds split sizes, which random
    # values do not satisfy, so onnxruntime refuses the original: "not possible", not a failure.
    result = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", check=True, input_shapes={"X": (15,)})
    assert result.numerics is not None and not result.numerics.ran
    assert "cannot run the original model" in result.numerics.one_line() and "split" in result.numerics.one_line()


def _random_model(tmp_path, *, deterministic_output: bool):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    outputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 4])]
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["n"]), helper.make_node("Mul", ["n", "x"], ["z"])]
    if deterministic_output:
        outputs.insert(0, helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4]))
        nodes += [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outputs), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "random.onnx"
    onnx.save(model, path)
    return path


def test_outputs_of_random_ops_are_named_and_not_compared(tmp_path):
    # Unseeded, onnxruntime draws the same numbers in two sessions of one model and other numbers
    # in the rewritten one: compared, 'z' would fail a correct rewrite.
    path = _random_model(tmp_path, deterministic_output=True)
    check = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", check=True).numerics
    assert check is not None and check.ok and check.varying_outputs == ("z",)
    assert "not compared: 'z'" in check.one_line()
    only_random = _random_model(tmp_path, deterministic_output=False)
    check = compiler_opt.optimize(str(only_random), target="2xV100", method="m-etf", check=True).numerics
    assert check is not None and not check.ran and "every output is random" in check.one_line()


def _external_hlo(shared_testdata, *names: str):
    """The named files of the external HLO testdata (skipped without jax or the files)."""
    pytest.importorskip("jax")
    paths = [shared_testdata / "external" / "hlo" / name for name in names]
    if not all(path.is_file() for path in paths):
        pytest.skip("external HLO testdata not here")
    return paths


def test_external_hlo_with_a_runtime_seed_and_with_a_gpu_kernel(shared_testdata):
    seeded, triton = _external_hlo(
        shared_testdata, "openxla-xla__xla__backends__cpu__tests__thunk_coverage__cpu.hlo", "jax-ml-jax__jaxlib__gpu__triton_add_kernel.hlo"
    )
    # output 15 is custom-call GetRngSeed: two runs of the original differ, so it is left out
    check = compiler_opt.optimize(str(seeded), target="2xV100", method="m-etf", check=True).numerics
    assert check is not None and check.ok and check.varying_outputs == ("output 15",), check.one_line()
    check = compiler_opt.optimize(str(triton), target="2xV100", method="m-etf", check=True).numerics
    assert check is not None and not check.ran and "triton" in check.one_line().lower()


def test_complex_outputs_are_compared_with_their_imaginary_part():
    from compiler_opt.api.numerics import _compare

    want = [np.array([1 + 2j, 3 - 1j], np.complex64)]
    assert _compare(["f"], want, [want[0].copy()], "numpy").ok
    moved = [np.array([1 + 2.5j, 3 - 1j], np.complex64)]  # the real parts equal: a cast to real would pass it
    check = _compare(["f"], want, moved, "numpy")
    assert not check.ok and check.max_abs_error == pytest.approx(0.5)


def test_a_scheduled_module_that_came_fused_is_checked(shared_testdata):
    # XLA:CPU refuses the fusions (no backend config); as calls they run, and their computations,
    # no longer fusion bodies, need their own schedule sequences in the result (they had none).
    # the second: a Triton fusion whose body bitcasts between row-major shapes (as a call's callee, a reshape)
    paths = _external_hlo(
        shared_testdata,
        "openxla-xla__xla__backends__cpu__benchmarks__hlo__xnn.sequential_dots.optimized.hlo",
        "openxla-xla__xla__backends__gpu__codegen__triton__tests__dot__reshape_of_pad.hlo",
    )
    for path in paths:
        check = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", check=True).numerics
        assert check is not None and check.ok, check.one_line()


def test_a_check_that_cannot_fit_in_memory_is_refused_before_the_work(example_model, monkeypatch):
    from compiler_opt.api import numerics
    from graph_ir.io.hlo_import import import_hlo_text

    module = "HloModule m\n\nENTRY main {\n  p = f32[8,4] parameter(0)\n  ROOT n = f32[8,4] negate(p)\n}\n"
    assert numerics.check_memory_bytes(import_hlo_text(module), "hlo") == 2 * 128 + 3 * 128  # feeds twice, outputs thrice
    free = numerics.available_memory_bytes()
    assert free is None or free > 0
    monkeypatch.setattr(numerics, "available_memory_bytes", lambda: 1024)  # this machine with 1 KiB free
    with pytest.raises(compiler_opt.api.OptimizeError, match="more than the 0.0 GiB available") as info:
        compiler_opt.optimize(str(example_model), target="2xV100", method="m-etf", check=True)
    assert info.value.field == "check"
    assert compiler_opt.optimize(str(example_model), target="2xV100", method="m-etf", check=False).numerics is None


def test_a_stablehlo_model_is_checked_as_written(tmp_path, capsys):
    # Before: every .mlir model failed --check ("cannot write HLO: the graph has StableHLO ops").
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def f(x, w):
        hidden = jnp.tanh(x @ w)
        return jax.nn.softmax(hidden @ w.T, axis=-1), jnp.sum(hidden * hidden)

    path = tmp_path / "f.mlir"
    path.write_text(jax.jit(f).lower(np.ones((8, 16), np.float32), np.ones((16, 16), np.float32)).as_text())
    result = compiler_opt.optimize(str(path), target="2xV100", method="m-etf", check=True)
    assert result.format == "stablehlo" and result.numerics is not None and result.numerics.ok, result.numerics.one_line()
    out = tmp_path / "f.opt.mlir"
    assert main(["optimize", str(path), "-o", str(out), "--method", "m-etf", "--check"]) == 0
    assert "from StableHLO" in capsys.readouterr().out and "stablehlo.dot_general" in out.read_text()


def test_equal_infinities_are_equal_and_unequal_ones_are_not():
    from compiler_opt.api.numerics import _compare

    want = [np.array([-np.inf, np.inf, np.nan, 1.0])]
    assert _compare(["r"], want, [want[0].copy()], "numpy").ok  # a reduction started at -inf: inf - inf is NaN
    assert not _compare(["r"], want, [np.array([np.inf, np.inf, np.nan, 1.0])], "numpy").ok


def test_64_bit_parameters_reach_xla_as_64_bit():
    pytest.importorskip("jax")
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.hlo_import import import_hlo_text
    from graph_ir.io.xla_bridge import run_hlo_module

    module = "HloModule m\n\nENTRY main {\n  p = f64[4] parameter(0)\n  q = u64[4] parameter(1)\n  c = f64[4] convert(q)\n  ROOT s = f64[4] add(p, c)\n}\n"
    proto = export_hlo_proto(import_hlo_text(module))
    out = run_hlo_module(proto, np.full(4, 0.1, np.float64), np.full(4, 2**40, np.uint64))[0]
    assert out.dtype == np.float64 and out[0] == 0.1 + 2**40  # a 32-bit copy would fail or round


def test_bf16_outputs_get_a_few_ulps_and_strings_are_compared_exactly():
    """Before the shared comparator (`graph_ir.compare`) the optimize check compared bf16 outputs
    exactly (ml_dtypes' bfloat16 is no numpy floating type) and raised on string outputs."""
    import ml_dtypes

    from compiler_opt.api.numerics import _compare

    want = [np.array([1.0, 2.0], ml_dtypes.bfloat16)]
    check = _compare(["y"], want, [np.array([1.0078125, 2.0], ml_dtypes.bfloat16)], "numpy")
    assert check.ok and check.rtol == 4 * 2.0 ** -7
    check = _compare(["y"], want, [np.array([1.25, 2.0], ml_dtypes.bfloat16)], "numpy")
    assert not check.ok and "rtol 0.03125" in check.message
    words = [np.array(["a", "b"])]
    assert _compare(["s"], words, [np.array(["a", "b"])], "numpy").ok
    check = _compare(["s"], words, [np.array(["a", "c"])], "numpy")
    assert not check.ok and "output 's' values differ" in check.message
