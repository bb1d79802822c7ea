"""TVM tile kernels compiled for this CPU and measured for real; the schedule space's rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tvm")

from cost_model.measure.harness import Harness, per_call_timer  # noqa: E402
from cost_model.measure.tile.collect import collect_kernel  # noqa: E402
from cost_model.measure.tile.kernels import KernelSpec, build_kernel  # noqa: E402
from cost_model.measure.tile.runner import compile_config, inputs_for, reference_output  # noqa: E402
from cost_model.measure.tile.space import CONFIG_FEATURES, TileConfig, TileSpace  # noqa: E402
from cost_model.profiling.cache import ProfileCache  # noqa: E402


def test_small_matmul_compiles_runs_and_matches_numpy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    space = TileSpace(build_kernel(KernelSpec("matmul", (32, 48, 16))))
    assert space.extents == (32, 48, 16) and space.is_reduce == (False, False, True)
    arrays = inputs_for(space.kernel, seed=1)
    config = TileConfig(((2, 4, 4), (1, 6, 8), (4, 4)), order=1, vectorize=True, unroll=16, parallel=True)
    run = compile_config(space, config, arrays=[a.copy() for a in arrays])
    run()
    np.testing.assert_allclose(run.output(), arrays[0] @ arrays[1], rtol=1e-4, atol=1e-5)
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=3, warmup=1)
        result = collect_kernel(KernelSpec("matmul", (32, 48, 16)), harness, configs=4, seed=0)
        assert len(result.configs) == 4 and not result.failures
        assert all(0 < m.min_s < 0.05 for m in result.measured.measurements.values())
        again = collect_kernel(KernelSpec("matmul", (32, 48, 16)), harness, configs=4, seed=0)
        assert again.measured.measured == 0  # resumed from the cache: nothing compiled or timed


@pytest.mark.parametrize(
    "spec",
    [KernelSpec("conv2d_nchw", (1, 6, 6, 4, 8, 3, 3, 2)), KernelSpec("depthwise_nhwc", (1, 6, 6, 8, 3, 3, 1)), KernelSpec("ew_reduce", (8, 32))],
)
def test_random_schedules_keep_the_result(spec: KernelSpec) -> None:
    space = TileSpace(build_kernel(spec))
    arrays = inputs_for(space.kernel)
    reference = reference_output(space, arrays)
    for config in space.sample_distinct(np.random.default_rng(0), 2):
        run = compile_config(space, config, arrays=[a.copy() for a in arrays])
        run()
        np.testing.assert_allclose(run.output(), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype, out_dtype", [("bfloat16", ""), ("bfloat16", "float32"), ("float16", ""), ("float64", "")])
def test_other_element_types_compute_what_numpy_does(dtype: str, out_dtype: str) -> None:
    """bf16 / f16 kernels read and write their own type and sum in float32 (XLA:CPU's way); float64
    stays float64. Every schedule keeps the result to a few ulps of the output type, and the float32
    kernels' TIR is what the datasets were measured with (no widening casts)."""
    from cost_model.measure.tile.runner import check_against, numpy_dtype

    spec = KernelSpec("matmul", (24, 16, 40), dtype=dtype, out_dtype=out_dtype)
    space = TileSpace(build_kernel(spec))
    arrays = inputs_for(space.kernel, seed=2)
    assert arrays[0].dtype == numpy_dtype(dtype) and arrays[-1].dtype == numpy_dtype(spec.result_dtype)
    want = arrays[0].astype(np.float64) @ arrays[1].astype(np.float64)
    reference = reference_output(space, arrays)
    assert reference.dtype == numpy_dtype(spec.result_dtype)
    a, b = (x.astype(np.float64) for x in arrays[:2])
    summed = 40 * (2**-52 if dtype == "float64" else 2**-23) * float((np.abs(a) @ np.abs(b)).max())  # the accumulator's rounding over K = 40
    ulp = {"float32": 2**-23, "bfloat16": 2**-7, "float16": 2**-10, "float64": 2**-52}[spec.result_dtype]
    np.testing.assert_allclose(reference.astype(np.float64), want, rtol=ulp, atol=summed)
    for config in space.sample_distinct(np.random.default_rng(0), 3):
        check_against(compile_config(space, config, arrays=arrays), reference)
    assert spec.float32_twin == KernelSpec("matmul", (24, 16, 40)) and spec.signature.endswith(f":{dtype}" + (f"->{out_dtype}" if out_dtype else ""))
    assert "bfloat16" not in str(build_kernel(spec.float32_twin).func) and "float16" not in str(build_kernel(spec.float32_twin).func)


def test_element_type_rules() -> None:
    assert KernelSpec("reduce", (4, 8), dtype="float16", out_dtype="float16") == KernelSpec("reduce", (4, 8), dtype="float16")  # one spelling
    assert KernelSpec("reduce", (4, 8)).signature == "tvm-tile:reduce(4,8):float32"  # the datasets' cache keys are unchanged
    with pytest.raises(ValueError, match="dtype one of float32, float64, bfloat16, float16, got 'int32'"):
        KernelSpec("reduce", (4, 8), dtype="int32")
    with pytest.raises(ValueError, match="out_dtype"):
        KernelSpec("reduce", (4, 8), out_dtype="float8")


def test_space_rules() -> None:
    space = TileSpace(build_kernel(KernelSpec("batch_matmul", (2, 12, 8, 64))))
    rng = np.random.default_rng(0)
    for config in space.sample_distinct(rng, 20):
        space.validate(config)
        assert all(math.prod(t) == e for t, e in zip(config.tiles, space.extents))
        assert config.tiles[-1][-1] <= 64
        assert TileConfig.from_text(config.text()) == config
        assert space.features(config).shape == (CONFIG_FEATURES,)
    with pytest.raises(ValueError, match="does not tile"):
        space.validate(TileConfig(((2, 1, 1), (12, 1, 1), (8, 1, 1), (32, 1))))
    with pytest.raises(ValueError, match="unknown tile kernel kind"):
        KernelSpec("fft", (4,))


def test_a_compile_probe_drops_configurations_past_its_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`collect_kernel(probe=)`: each configuration is compiled first in a child process; past the probe's
    timeout it is dropped as a failure (the first call also starts the child and imports TVM, so 0.01 s
    always runs past), within it the kernel is measured as without a probe."""
    from cost_model.measure.tile.compile_probe import CompileProbe

    spec = KernelSpec("matmul", (16, 32, 16))
    with ProfileCache(tmp_path / "c.sqlite") as cache:
        harness = Harness(cache=cache, backend="tvm-llvm", machine="test", timer=per_call_timer, repeats=2, warmup=1)
        with CompileProbe(0.01) as impatient:
            dropped = collect_kernel(spec, harness, configs=2, seed=0, probe=impatient)
        assert not dropped.configs and len(dropped.failures) == 2
        assert all("ran past 0.01 s and was abandoned" in reason for reason in dropped.failures.values())
        with CompileProbe(120.0) as patient:
            kept = collect_kernel(spec, harness, configs=2, seed=0, probe=patient)
            text = kept.configs[0].text()
            assert "main" in patient.asm(spec.kind, spec.dims, text)  # the child stays up between calls
            half = patient.asm(spec.kind, spec.dims, text, "float16")  # the typed kernel, not its float32 twin
            assert "main" in half and half != patient.asm(spec.kind, spec.dims, text)
        assert len(kept.configs) == 2 and not kept.failures
        assert set(kept.asm) == {c.text() for c in kept.configs} and all("main" in a for a in kept.asm.values())  # the probe's assembly, kept
    with pytest.raises(ValueError, match="positive"):
        CompileProbe(0)


def test_a_compile_probe_runs_on_its_cpus_and_answers_one_call_at_a_time() -> None:
    """`cpus`: the child compiles there (beside a collector timing on another CPU); `submit` / `result`
    split one call, and a second submit before the first result is refused (answers would cross)."""
    import os

    from cost_model.measure.tile.compile_probe import CompileProbe

    text = '{"tiles":[[1,4,4],[2,4,4],[4,4]],"order":0,"vectorize":1,"unroll":0,"parallel":0}'
    cpu = max(os.sched_getaffinity(0))
    with CompileProbe(120.0, cpus=[cpu]) as probe:
        probe.submit("matmul", (16, 32, 16), text)
        with pytest.raises(RuntimeError, match="result"):
            probe.submit("matmul", (16, 32, 16), text)
        assert "main" in probe.result()
        status = open(f"/proc/{probe._process.pid}/status", encoding="utf-8").read()  # noqa: SLF001
        assert f"Cpus_allowed_list:\t{cpu}\n" in status
        with pytest.raises(RuntimeError, match="nothing was submitted"):
            probe.result()
        assert probe.asm("matmul", (16, 32, 16), text) == probe.asm("matmul", (16, 32, 16), text)  # one machine code
    with pytest.raises(ValueError, match="CPU numbers of this machine"):
        CompileProbe(10.0, cpus=[10_000])


def test_collect_refuses_a_compile_timeout_that_is_not_positive(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from compiler_opt.cli.main import main

    out = tmp_path / "tiles"
    for timeout in ("0", "nan", "inf"):  # NaN ran before the forty-ninth session: every compile timed out, 0 files, exit 0
        assert main(["costmodel", "collect", "--task", "tile", "--out", str(out), "--synthetic", "2", "--compile-timeout", timeout]) == 2
        assert "--compile-timeout" in capsys.readouterr().err and not out.exists()


def test_a_compile_probe_works_from_a_script_without_a_main_guard(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The child is a fresh interpreter, not a multiprocessing spawn, so it never re-runs the caller's script."""
    import subprocess
    import sys

    script = tmp_path / "tune.py"
    script.write_text("from cost_model.measure.tile.compile_probe import CompileProbe\n"
                      "probe = CompileProbe(120.0)\n"
                      "print(len(probe.asm('matmul', (16, 32, 16), '{\"tiles\":[[1,4,4],[2,4,4],[4,4]],\"order\":0,\"vectorize\":1,\"unroll\":0,\"parallel\":0}')) > 0)\n"
                      "probe.close()\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


def test_the_stage_graph_records_each_stage_element_type() -> None:
    from cost_model.learned.features import DTYPE_COLUMNS, node_features
    from cost_model.measure.tile.dataset import kernel_graph

    def types(spec: KernelSpec) -> list[str]:
        onehot = kernel_graph(build_kernel(spec))[0][:, DTYPE_COLUMNS]
        return [("float32", "bfloat16", "float16", "other")[int(np.argmax(row))] for row in onehot]

    assert types(KernelSpec("matmul", (8, 8, 8))) == ["float32"] * 3
    assert types(KernelSpec("matmul", (8, 8, 8), dtype="bfloat16", out_dtype="float32")) == ["bfloat16", "bfloat16", "float32"]
    # the elementwise producers work on widened values; the result is rounded back to the input type
    assert types(KernelSpec("ew_reduce", (4, 8), dtype="float16")) == ["float16", "float32", "float32", "float16"]
    assert types(KernelSpec("conv2d_nchw", (1, 6, 6, 2, 3, 3, 3, 1), dtype="bfloat16")) == ["bfloat16"] * 4
    assert types(KernelSpec("reduce", (4, 8), dtype="float64")) == ["other", "other"]
    # float32 kernels keep the node features every dataset before the thirty-second session was written with
    kernel = build_kernel(KernelSpec("conv2d_nhwc", (1, 6, 6, 2, 3, 3, 3, 2)))
    main = len(kernel.stages) - 1
    untyped = np.stack([node_features(st.shape, layout=st.layout, reduce_extents=st.reduce_extents, flops=kernel.spec.flops if i == main else 0.0)
                        for i, st in enumerate(kernel.stages)])
    np.testing.assert_array_equal(kernel_graph(kernel)[0], untyped)


def test_compile_cpus_are_read_from_text_or_numbers() -> None:
    import os

    from cost_model.measure.tile.compile_probe import parse_cpus

    last = (os.cpu_count() or 1) - 1
    assert parse_cpus(f"{last},0, {last}") == sorted({0, last}) and parse_cpus([0]) == [0]
    for bad in ("", "x", "-1", str(last + 1), []):
        with pytest.raises(ValueError, match=f"0-{last}"):
            parse_cpus(bad)
