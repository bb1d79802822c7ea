"""The torch.compile backend on a module with convolutions and attention: equal to eager
(inference and training), both executors, options, the eager fallback, entry-point discovery."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import warnings

import pytest

torch = pytest.importorskip("torch")

from compiler_opt.integrations.torch_backend import (  # noqa: E402
    BACKEND_NAME,
    CompilerOptFallbackWarning,
    compiler_opt_backend,
    last_compile_stats,
    register_torch_backend,
)
from passes.infra.base import PassError  # noqa: E402


class ConvAttention(torch.nn.Module):
    """Conv + batch norm + ReLU stem, multi-head self-attention over the pixels, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.nn.functional.gelu(self.conv2(y)) + y
        tokens = y.flatten(2).transpose(1, 2)
        attended, _ = self.attn(tokens, tokens, tokens)
        return self.head(self.norm(attended + tokens).mean(1))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    register_torch_backend()
    torch._dynamo.reset()
    last_compile_stats(reset=True)
    yield
    torch._dynamo.reset()


def _model() -> ConvAttention:
    torch.manual_seed(0)
    return ConvAttention()


def test_inference_equals_eager_and_the_schedule_reorders_the_aten_graph():
    model = _model().eval()
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="compiler_opt")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", CompilerOptFallbackWarning)
        got, expected = compiled(x), model(x)
        x2 = torch.randn(2, 3, 8, 8)
        got2, expected2 = compiled(x2), model(x2)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got2, expected2, rtol=1e-5, atol=1e-6)
    stats = last_compile_stats()
    assert stats.graphs == 1 and not stats.fallbacks
    assert stats.nodes > 30 and stats.fused_groups >= 3
    assert stats.reordered == 1  # the critical-path schedule is not the tracing order


def test_training_step_gradients_equal_eager():
    model = _model().train()
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    compiled = torch.compile(model, backend="compiler_opt")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompilerOptFallbackWarning)
        compiled(x).square().mean().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().mean().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)
    assert last_compile_stats().graphs == 2  # forward and backward aten graphs


@pytest.mark.slow
def test_onnxruntime_executor_equals_eager():
    model = _model().eval()
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    compiled = torch.compile(model, backend="compiler_opt", options={"executor": "onnxruntime", "pipeline": "fuse,schedule"})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", CompilerOptFallbackWarning)
        got = compiled(x)
    torch.testing.assert_close(got, model(x).detach(), rtol=1e-4, atol=1e-5)
    assert last_compile_stats().fused_groups >= 3


def test_dynamic_shapes_compile_once_and_stay_equal():
    def f(x):
        return torch.softmax(torch.tanh(x @ x.T) * 2, dim=-1).sum(0)

    compiled = torch.compile(f, backend="compiler_opt", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompilerOptFallbackWarning)
        for rows in (5, 9):
            x = torch.randn(rows, 3)
            torch.testing.assert_close(compiled(x), f(x))
    assert last_compile_stats().graphs == 1  # symbolic sizes: one graph serves both


def test_unsupported_graph_falls_back_to_eager_with_one_warning():
    def f(x):  # float8_e5m2fnuz has no IR element type
        return (x * 2).to(torch.float8_e5m2fnuz).to(torch.float32) + 1

    x = torch.randn(16)
    compiled = torch.compile(f, backend="compiler_opt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(x)
        got_again = compiled(x)
    torch.testing.assert_close(got, f(x))
    torch.testing.assert_close(got_again, f(x))
    ours = [w for w in caught if issubclass(w.category, CompilerOptFallbackWarning)]
    assert len(ours) == 1
    assert "runs eagerly" in str(ours[0].message) and "float8_e5m2fnuz has no IR element type" in str(ours[0].message)


def test_structure_changing_pipeline_falls_back_on_the_fx_executor():
    def f(x):
        return torch.sin(x) + torch.sin(x)  # CSE merges the two sines

    compiled = torch.compile(f, backend="compiler_opt", options={"pipeline": "cse"})
    x = torch.randn(8)
    with pytest.warns(CompilerOptFallbackWarning, match="changed the graph's structure"):
        got = compiled(x)
    torch.testing.assert_close(got, f(x))


def test_bad_options_are_errors_not_fallbacks():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(PassError, match="unknown option"):
        compiler_opt_backend(gm, [torch.randn(2)], options={"pipelin": "fuse"})
    with pytest.raises(PassError, match="executor must be one of"):
        compiler_opt_backend(gm, [torch.randn(2)], options={"executor": "tvm"})
    with pytest.raises(Exception, match="unknown pass 'fusee'"):
        compiler_opt_backend(gm, [torch.randn(2)], options={"pipeline": "fusee"})
    # forty-ninth session: these fell back to eager mode (threads="many": a TypeError) or were read as true (fallback="no")
    for options, message in (({"threads": "many"}, "threads must be an integer >= 0"), ({"threads": -1}, "threads must be an integer >= 0"),
                             ({"fallback": "no"}, "fallback must be True or False"), ({"pipeline": 3}, "pipeline must be a pipeline string")):
        with pytest.raises(PassError, match=message):
            compiler_opt_backend(gm, [torch.randn(2)], options=options)


def test_no_fallback_option_raises_the_reason():
    def f(x):
        return (x * 2).to(torch.float8_e5m2fnuz).to(torch.float32)

    compiled = torch.compile(f, backend="compiler_opt", options={"fallback": False})
    with pytest.raises(Exception, match="float8_e5m2fnuz"):
        compiled(torch.randn(4))


@pytest.mark.slow
def test_entry_point_is_found_by_torch(tmp_path, repo_root):
    """torch finds `compiler_opt` through the pyproject's torch_dynamo_backends entry point, as
    an installed distribution would expose it (no register_backend call)."""
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["torch_dynamo_backends"][BACKEND_NAME]
    info = tmp_path / "compiler_opt_ep-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: compiler-opt-ep\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[torch_dynamo_backends]\n{BACKEND_NAME} = {entry}\n")
    code = (
        "import torch\n"
        "assert 'compiler_opt' in torch._dynamo.list_backends()\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2, backend='compiler_opt')\n"
        "x = torch.randn(5)\n"
        "torch.testing.assert_close(f(x), torch.relu(x) * 2)\n"
        "from compiler_opt.integrations.torch_backend import last_compile_stats\n"
        "assert last_compile_stats().graphs == 1, last_compile_stats()\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(repo_root)]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["fx", "onnxruntime"])
def test_a_llama_decoder_from_transformers_equals_eager(executor):
    """A real architecture nobody here wrote (grouped-query attention, rotary embeddings, RMSNorm,
    SiLU-gated MLP; random weights from a small config, nothing downloaded) through both executors."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      intermediate_size=128, vocab_size=300, use_cache=False, attn_implementation="eager")
    model = transformers.LlamaModel(config).eval()
    tokens = torch.randint(0, 300, (2, 12))
    with torch.no_grad():
        expected = model(tokens).last_hidden_state
        got = torch.compile(model, backend=BACKEND_NAME, options={"executor": executor, "fallback": False})(tokens).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    stats = last_compile_stats()
    assert stats.graphs == 1 and not stats.fallbacks and stats.fused_groups > 0


@pytest.mark.parametrize("executor", ["fx", "onnxruntime"])
def test_an_lstm_reaches_the_backend_with_dynamos_allow_rnn(executor):
    """Dynamo runs nn.LSTM eagerly unless `allow_rnn` is on; with it on, the LSTM's graph comes to us and stays
    equal (inference: AOTAutograd itself fails on an LSTM that needs gradients, with torch's own aot_eager too)."""
    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm, self.head = torch.nn.LSTM(16, 8, num_layers=2, batch_first=True), torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    torch.manual_seed(0)
    model, x = Tagger().eval(), torch.randn(2, 5, 16)
    with torch.no_grad(), torch._dynamo.config.patch(allow_rnn=True):
        expected = model(x)
        got = torch.compile(model, backend=BACKEND_NAME, options={"executor": executor, "fallback": False})(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert last_compile_stats().graphs == 1


@pytest.mark.slow
def test_transformer_fast_path_falls_back_with_a_hint_and_runs_with_it_off():
    """nn.TransformerEncoder in eval mode under no_grad takes torch's fused fast path, one aten op with no ONNX
    translation: the onnxruntime executor falls back naming the fix, and with the fast path off it compiles."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        expected = model(x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(model, backend=BACKEND_NAME, options={"executor": "onnxruntime"})(x)
        torch.testing.assert_close(got, expected)
        ours = [str(w.message) for w in caught if issubclass(w.category, CompilerOptFallbackWarning)]
        assert len(ours) == 1 and "set_fastpath_enabled(False)" in ours[0], ours
        torch._dynamo.reset()
        last_compile_stats(reset=True)
        before = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            got = torch.compile(model, backend=BACKEND_NAME, options={"executor": "onnxruntime", "fallback": False})(x)
        finally:
            torch.backends.mha.set_fastpath_enabled(before)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert last_compile_stats().graphs == 1 and not last_compile_stats().fallbacks
