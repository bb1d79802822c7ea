"""The XLA hook for JAX on a JAX MLP and a transformer block (the workload suite's BERT layer):
results equal, our fusions and schedule are what XLA compiles, the hook clears on exit, and a
failing hook leaves XLA's module alone with one warning."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("tensorflow")  # the HloModuleProto schema ships with TF (graph_ir.io.xla_bridge)

from compiler_opt.integrations import XlaHookError, xla_hook  # noqa: E402
from compiler_opt.integrations.xla_transform import XlaHookWarning, require_hlo_transform_api  # noqa: E402
from graph_ir.io.xla_bridge import hlo_module_proto_class  # noqa: E402
from passes.infra.base import Pass, PassError, PassResult  # noqa: E402
from passes.infra.registry import register_pass, unregister_pass  # noqa: E402


def mlp(x, w1, b1, w2, b2):
    h = jax.nn.gelu(x @ w1 + b1)
    return jax.nn.softmax(h @ w2 + b2, axis=-1)


def _mlp_args(seed: int = 0):
    rng = np.random.default_rng(seed)
    shapes = [(8, 32), (32, 64), (64,), (64, 16), (16,)]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _bert_block():
    from compiler_opt.workloads import bert

    specs = bert.param_specs(layers=1, hidden=32, d_ff=64, vocab=50, seq_len=8)
    leaves, treedef = jax.tree.flatten(specs)
    rng = np.random.default_rng(0)
    params = jax.tree.unflatten(treedef, [(0.1 * rng.standard_normal(l.shape)).astype(l.dtype) for l in leaves])
    tokens = rng.integers(0, 50, (2, 8)).astype(np.int32)
    segments = rng.integers(0, 2, (2, 8)).astype(np.int32)
    mask = np.ones((2, 8), np.int32)
    return (lambda p, t, s, m: bert.encode(p, t, s, m, 4)), (params, tokens, segments, mask)


def _reference(fn, args):
    jax.clear_caches()
    return jax.jit(fn)(*args)


def _entry_sequence(serialized: bytes) -> list[str]:
    module = hlo_module_proto_class().FromString(serialized)
    entry = next(c for c in module.computations if c.id == module.entry_computation_id)
    names = {i.id: i.name for i in entry.instructions}
    return [names[i] for i in module.schedule.sequences[entry.id].instruction_ids]


def _compiled_entry_order(text: str) -> list[str]:
    entry = text[text.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    return re.findall(r"^\s*(?:ROOT )?%?([\w.\-]+) = ", entry, re.M)


def test_mlp_runs_with_our_fusions_and_equal_results():
    args = _mlp_args()
    expected = np.asarray(_reference(mlp, args))
    jax.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlaHookWarning)
        with xla_hook(pipeline="fuse") as hook:
            compiled = jax.jit(mlp).lower(*args).compile()
    np.testing.assert_allclose(np.asarray(compiled(*args)), expected, rtol=1e-5, atol=1e-6)
    assert hook.stats["pre"].changed == 1 and not hook.errors
    # XLA compiled the loop fusions we wrote (they carry our group id; XLA's own were dissolved)
    # and kept its library fusions (each dot in a kCustom fusion) as they were.
    text = compiled.as_text()
    jax.clear_caches()
    xla_text = jax.jit(mlp).lower(*args).compile().as_text()  # outside the block: XLA alone
    ours = re.findall(r'= .*fusion\(.*kind=kLoop.*compiler_opt\.fused_group="\d+"', text)
    assert len(ours) >= 2
    assert 'compiler_opt.fused_group="' not in xla_text
    assert text.count("kind=kCustom") == xla_text.count("kind=kCustom") >= 2


def test_transformer_block_follows_our_schedule_and_stays_equal():
    fn, args = _bert_block()
    expected = np.asarray(_reference(fn, args))
    jax.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlaHookWarning)
        with xla_hook(pipeline="fuse,schedule{strategy=critical-path}", target="host") as hook:
            compiled = jax.jit(fn).lower(*args).compile()
    np.testing.assert_allclose(np.asarray(compiled(*args)), expected, rtol=1e-5, atol=1e-5)
    assert hook.stats["pre"].changed == 1 and hook.stats["post"].changed == 1
    ours = _entry_sequence(hook.last_output["post"])
    xlas = _entry_sequence(hook.last_input["post"])
    assert ours != xlas and sorted(ours) == sorted(xlas)  # a different order of the same instructions
    final = _compiled_entry_order(compiled.as_text())
    assert [n for n in ours if n in set(final)] == [n for n in final if n in set(ours)]
    assert len(set(final) & set(ours)) >= 0.9 * len(ours)


def test_hook_is_cleared_on_exit_even_after_an_error():
    jax_xla = require_hlo_transform_api()
    with pytest.raises(RuntimeError, match="inside the block"):
        with xla_hook(pipeline="fuse") as hook:
            raise RuntimeError("inside the block")
    jax.clear_caches()
    jax.jit(lambda x: x * 3 + 1)(np.ones(4, np.float32))
    assert hook.stats["pre"].modules == 0
    assert not jax_xla.clear_hlo_module_transformation("compiler_opt.pre", jax_xla.PipelineStage.PRE_SCHEDULER, "cpu")


@register_pass
@dataclass(frozen=True)
class _Explode(Pass):
    """A pass that fails, as a buggy third-party pass would."""

    name = "test-explode"

    def call(self, graph) -> PassResult:
        raise ValueError(f"cannot handle {graph.name}")


@pytest.fixture
def exploding_pass():
    yield "test-explode"
    unregister_pass("test-explode")
    register_pass(_Explode)


def test_error_in_the_hook_leaves_xlas_module_with_one_warning(exploding_pass):
    args = _mlp_args(1)
    expected = np.asarray(_reference(mlp, args))
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with xla_hook(pipeline=exploding_pass) as hook:
            got = np.asarray(jax.jit(mlp)(*args))
            jax.jit(lambda x: jax.numpy.tanh(x))(args[0])  # a second module: no second warning
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    ours = [w for w in caught if issubclass(w.category, XlaHookWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "left module 'jit_mlp' to XLA" in message and "pass 'test-explode' failed" in message
    assert len(hook.errors) >= 2 and hook.stats["pre"].changed == 0


def test_strict_hook_fails_the_compile_with_the_reason(exploding_pass):
    jax.clear_caches()
    with xla_hook(pipeline=exploding_pass, strict=True, stages=("pre",)):
        with pytest.raises(Exception, match="test-explode"):
            jax.jit(lambda x: x * 5 - 2)(np.ones(3, np.float32))


def test_missing_api_and_bad_arguments_are_clear(monkeypatch):
    import jax.extend.xla as jax_xla

    monkeypatch.delattr(jax_xla, "register_hlo_module_transformation")
    with pytest.raises(XlaHookError, match=r"no jax.extend.xla.register_hlo_module_transformation \(added in jax/jaxlib 0.10.2\)"):
        with xla_hook():
            pass
    monkeypatch.undo()
    with pytest.raises(XlaHookError, match="stages must be"):
        with xla_hook(stages=("middle",)):
            pass
    with pytest.raises(PassError, match="unknown pass"):
        with xla_hook(pipeline="fusee"):
            pass
    with pytest.raises(XlaHookError, match=r"stages must be .* got \('middle',\)"):
        with xla_hook(stages="middle"):
            pass
    with pytest.raises(XlaHookError, match="strict must be True or False, got 'no'"):
        with xla_hook(strict="no"):
            pass
    with pytest.raises(XlaHookError, match="pipeline must be a pipeline string"):
        with xla_hook(pipeline=["fuse"]):
            pass
    with pytest.raises(XlaHookError, match="name must be a non-empty string"):
        with xla_hook(name=""):
            pass


def _control_flow_and_scatter_cases():
    from jax import lax

    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    image = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    kernel = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return {
        "scan": (lambda x: lax.scan(lambda c, r: (jax.numpy.tanh(c + r) * 0.5, c.sum()), jax.numpy.zeros(16), x), (x,)),
        "cond": (lambda x: lax.cond(x.sum() > 0, lambda y: jax.numpy.exp(y) + 1, lambda y: jax.numpy.cos(y) * 2, x), (x,)),
        # XLA:CPU emits scatter only inside a fusion: the hook must keep that fusion.
        "scatter": (lambda x: jax.numpy.zeros((4, 16)).at[jax.numpy.array([0, 2, 2, 3, 1, 0, 3, 2])].add(jax.numpy.tanh(x)) + 1, (x,)),
        "conv": (lambda a, w: jax.nn.relu(lax.conv(a, w, (1, 1), "SAME") + 0.5).mean((2, 3)), (image, kernel)),
    }


@pytest.mark.parametrize("case", ["scan", "cond", "scatter", "conv"])
def test_loops_conditionals_scatter_and_convolutions_stay_equal(case):
    fn, args = _control_flow_and_scatter_cases()[case]
    expected = _reference(fn, args)
    jax.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlaHookWarning)
        with xla_hook() as hook:
            got = jax.jit(fn)(*args)
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    assert hook.stats["pre"].changed == 1 and hook.stats["post"].changed == 1
