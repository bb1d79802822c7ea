"""The torch.compile backend over model families nobody here wrote: what happens to each.

    python benchmarks/bench_torch_sweep.py [MODEL ...] [--executors fx,onnxruntime] [--train] [--timeout S] [--json PATH]

Models are `transformers` architectures built from small configs (random weights, nothing
downloaded: `from_config`-style constructors) plus a few `torch.nn` builtins; `--list` names them.
Each (model, executor) runs in its own process (a crash or a hang ends that row only):
eager output, then `torch.compile(model, backend="compiler_opt", options={"executor": E,
"fallback": False})`, called twice (the second call must not recompile), outputs compared with
`torch.testing.assert_close` at rtol 1e-4 / atol 1e-5 (float32; the fx executor runs the same aten
ops, so it should agree to the bit or nearly; a training row that does not is compared with torch's own
`aot_eager` backend, the same lowering without our pipeline, since AOTAutograd's decompositions can move
a training step's floats), and the graph count after each call (outcome `recompiled`
when the second call compiles again). `--executors optimize` instead exports the model to ONNX
(`torch.onnx.export(dynamo=True)`) and runs the main job on the file, `optimize(path, "4xV100",
budget_s=5, check=True)`, whose check runs both graphs in onnxruntime on seeded inputs; `go` the same with
`method="go"` (the learned policy's answer, then the classical seeds and a local search within the budget). `--train` adds one row per model: the fx executor
on a forward + backward pass (loss = sum of the outputs), the parameters' gradients compared.
Outcomes: `equal`, `different` (the values disagree), `eager not deterministic` (two eager calls
with one torch seed disagree), `recompiled`, `not compiled` (dynamo handed the
backend no graph), `error:<Kind>` (the backend raised; with `fallback` off that names what it could
not handle), `torch-error` (it raised and torch's own `aot_eager` backend fails on the same model too), `eager-error` (the model itself does not run), `crash`, `timeout`. Dynamo's
`allow_rnn` is on, so `nn.LSTM` reaches the backend (by default dynamo runs it eagerly). Prints each row (outcome,
seconds, message) as it ends, then a table of counts; the JSON (rewritten after each row) holds every row's outcome,
message, seconds and our backend's share.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child_outcome import run_child  # noqa: E402

# name -> (transformers class names or "nn:<builder>", config kwargs, input kind)
_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
MODELS: dict[str, tuple[str, str, dict, str]] = {
    "bert": ("BertModel", "BertConfig", dict(_SMALL, vocab_size=500), "tokens+mask"),
    "distilbert": ("DistilBertModel", "DistilBertConfig", dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=500), "tokens+mask"),
    "roberta": ("RobertaModel", "RobertaConfig", dict(_SMALL, vocab_size=500), "tokens+mask"),
    "albert": ("AlbertModel", "AlbertConfig", dict(_SMALL, embedding_size=32, vocab_size=500), "tokens+mask"),
    "electra": ("ElectraModel", "ElectraConfig", dict(_SMALL, embedding_size=32, vocab_size=500), "tokens+mask"),
    "gpt2": ("GPT2Model", "GPT2Config", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=500, use_cache=False), "tokens"),
    "gpt-neox": ("GPTNeoXModel", "GPTNeoXConfig", dict(_SMALL, vocab_size=500, use_cache=False), "tokens"),
    "llama": ("LlamaModel", "LlamaConfig", dict(_SMALL, num_key_value_heads=2, vocab_size=500, use_cache=False), "tokens"),
    "mistral": ("MistralModel", "MistralConfig", dict(_SMALL, num_key_value_heads=2, vocab_size=500, use_cache=False), "tokens"),
    "qwen2": ("Qwen2Model", "Qwen2Config", dict(_SMALL, num_key_value_heads=2, vocab_size=500, use_cache=False), "tokens"),
    "phi": ("PhiModel", "PhiConfig", dict(_SMALL, vocab_size=500, use_cache=False), "tokens"),
    "t5-encoder": ("T5EncoderModel", "T5Config", dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=500), "tokens"),
    "bart": ("BartModel", "BartConfig", dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                             decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=500,
                                             use_cache=False), "tokens"),
    "vit": ("ViTModel", "ViTConfig", dict(_SMALL, image_size=32, patch_size=8), "image32"),
    "swin": ("SwinModel", "SwinConfig", dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4), "image32"),
    "convnext": ("ConvNextModel", "ConvNextConfig", dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2), "image32"),
    "resnet": ("ResNetModel", "ResNetConfig", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"), "image32"),
    "mobilevit": ("MobileViTModel", "MobileViTConfig", dict(image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]), "image32"),
    "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2Config", dict(_SMALL, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                                         mask_time_prob=0.0), "audio"),  # SpecAugment draws from numpy's generator
    "nn-transformer": ("nn:transformer", "", {}, "seq64"),
    "nn-lstm": ("nn:lstm", "", {}, "seq64"),
    "nn-conv-bn": ("nn:conv_bn", "", {}, "image32"),
}

_CHILD = r"""
import json, re, sys, time, warnings
import torch
sys.path.insert(0, sys.argv[4])
from bench_torch_sweep import build
name, executor, train = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
torch.manual_seed(0)
torch.set_num_threads(1)
def emit(outcome, message="", **extra):
    message = re.sub(r"\x1b\[[0-9;]*m", "", message)  # torch.onnx colours its errors
    print("OUTCOME " + json.dumps(dict(outcome=outcome, message=message[:600], **extra)), flush=True)
    sys.exit(0)
try:
    model, inputs = build(name)
    if train:
        model.train()
    def outputs(m):
        out = m(*inputs)
        leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if not train:
            return [t.detach() for t in leaves]
        m.zero_grad(set_to_none=True)
        sum(t.float().sum() for t in leaves).backward()
        return [t.detach() for t in leaves] + [p.grad.detach().clone() for p in m.parameters() if p.grad is not None]
    with torch.set_grad_enabled(train):
        torch.manual_seed(1); expected = outputs(model)
        torch.manual_seed(1); repeat = outputs(model)
except Exception as err:
    emit("eager-error", f"{type(err).__name__}: {err}")
def close(a, b):
    try:
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        return None
    except AssertionError as err:
        return str(err).splitlines()[0] + " | " + " ".join(str(err).split())[:300]
if any(close(a, b) for a, b in zip(repeat, expected)):  # e.g. randomness outside torch's generator
    emit("eager not deterministic", "two eager calls with the same torch seed disagree")
if executor in ("optimize", "go"):  # the main job on the model's ONNX export: optimize(check=True), outputs checked by onnxruntime
    import os, tempfile
    try:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(model, inputs, path, dynamo=True, optimize=False)
            start = time.perf_counter()
            from compiler_opt.api import OptimizeError, optimize
            try:
                result = optimize(path, target="4xV100", budget_s=5.0, check=True, method="go" if executor == "go" else "auto")
            except OptimizeError as err:
                emit("refused", str(err))
            took = time.perf_counter() - start
    except SystemExit:
        raise
    except Exception as err:
        emit("error:" + type(err).__name__, " ".join(str(err).split())[:600])
    check = result.numerics
    outcome = "equal" if check.ok else ("not possible" if not check.ran else "different")
    emit(outcome, f"{result.speedup:.3g}x simulated; " + check.one_line()[:400], optimize_s=took)
try:
    from compiler_opt.integrations.torch_backend import last_compile_stats
    import torch._dynamo
    torch._dynamo.reset()
    torch._dynamo.config.allow_rnn = True  # else dynamo runs nn.LSTM / nn.GRU eagerly and never calls a backend
    last_compile_stats(reset=True)
    compiled = torch.compile(model, backend="compiler_opt", options={"executor": executor, "fallback": False})
    start = time.perf_counter()
    with torch.set_grad_enabled(train), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(1); got = outputs(compiled)
        first = time.perf_counter() - start
        graphs_first = last_compile_stats().graphs
        torch.manual_seed(1); again = outputs(compiled)
    stats = last_compile_stats()
except Exception as err:  # dynamo's wrapper puts our reason on the lines after "backend='compiler_opt' raised:"
    reason = " ".join(line for line in str(err).splitlines()[:3] if line.strip())
    try:  # the same capture through torch's own aot_eager backend: does torch's lowering fail without us?
        torch._dynamo.reset()
        with torch.set_grad_enabled(train), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs(torch.compile(model, backend="aot_eager"))
    except Exception as torch_err:
        emit("torch-error", f"torch's aot_eager fails too ({type(torch_err).__name__}); ours: {type(err).__name__}: {reason}")
    emit("error:" + type(err).__name__, reason)
if len(got) != len(expected):
    emit("different", f"{len(got)} outputs against eager's {len(expected)}")
worst = 0.0
reference = "eager"
if train and any(close(a, b) for a, b in zip(got, expected)):
    # AOTAutograd's own decompositions can move a training step's floats off eager's; torch's aot_eager backend
    # (the same lowering, nothing of ours) is then the reference that isolates what our pipeline did
    gap = max(float((a.float() - b.float()).abs().max()) for a, b in zip(got, expected))
    torch._dynamo.reset()
    with torch.set_grad_enabled(train):
        torch.manual_seed(1); expected = outputs(torch.compile(model, backend="aot_eager"))
    reference = f"aot_eager (eager {gap:.2g} away)"
for a, b in zip(got + again, expected + expected):
    problem = close(a, b)
    if problem:
        emit("different", f"against {reference}: {problem}")
    worst = max(worst, float((a.float() - b.float()).abs().max()) if a.numel() else 0.0)
if graphs_first == 0:
    emit("not compiled", "dynamo handed the backend no graph (it ran the model eagerly)")
if stats.graphs != graphs_first:
    emit("recompiled", f"the second call compiled {stats.graphs - graphs_first} more graph(s)")
emit("equal", f"max abs diff {worst:.2g} against {reference}; {stats.graphs} graph(s), {stats.nodes} nodes, {stats.fused_groups} fused groups",
     first_call_s=first, ours_s=stats.seconds, graphs=stats.graphs)
"""


def build(name: str):  # -> (module in eval mode, example inputs)
    """One sweep model at its small size, seeded; eval mode (a `--train` row switches to train mode)."""
    import torch

    cls_name, config_name, kwargs, kind = MODELS[name]
    torch.manual_seed(0)
    inputs = {
        "tokens": lambda: (torch.randint(0, 500, (2, 16)),),
        "tokens+mask": lambda: (torch.randint(0, 500, (2, 16)), torch.ones(2, 16, dtype=torch.long)),
        "image32": lambda: (torch.randn(2, 3, 32, 32),),
        "audio": lambda: (torch.randn(2, 400),),
        "seq64": lambda: (torch.randn(2, 12, 64),),
    }[kind]()
    if cls_name.startswith("nn:"):
        return _nn_model(cls_name[3:]).eval(), inputs
    import transformers

    config = getattr(transformers, config_name)(**kwargs, attn_implementation="eager")
    # dropout off so train-mode rows are deterministic on both sides
    for attr in dir(config):
        if "dropout" in attr and isinstance(getattr(config, attr, None), float):
            setattr(config, attr, 0.0)
    return getattr(transformers, cls_name)(config).eval(), inputs


def _nn_model(name: str):
    import torch
    from torch import nn

    if name == "transformer":
        return nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False)
    if name == "lstm":
        class Lstm(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lstm, self.head = nn.LSTM(64, 32, num_layers=2, batch_first=True), nn.Linear(32, 10)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.head(self.lstm(x)[0])
        return Lstm()
    if name == "conv_bn":
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, stride=2, groups=2), nn.BatchNorm2d(32), nn.GELU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    raise KeyError(name)


def run_one(name: str, executor: str, train: bool, timeout: float) -> dict:
    return run_child(_CHILD, [name, executor, "1" if train else "0", str(Path(__file__).parent)], timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"model names (default: all {len(MODELS)})")
    parser.add_argument("--executors", default="fx,onnxruntime",
                        help="comma list: the backend's executors (fx, onnxruntime), optimize (the model's ONNX export through optimize(check=True)) "
                             "and/or go (the same with method='go': the policy's answer, then seeds and a local search within the budget)")
    parser.add_argument("--train", action="store_true", help="also a forward + backward row per model on the fx executor")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per row (default 300)")
    parser.add_argument("--json", help="write every row here (rewritten after each)")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f"{name}: {spec[0]}" for name, spec in MODELS.items()))
        return 0
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    executors = [e for e in args.executors.split(",") if e]
    if not executors or set(executors) - {"fx", "onnxruntime", "optimize", "go"}:
        parser.error(f"--executors takes fx, onnxruntime, optimize and/or go, got {args.executors!r}")
    plan = [(m, e, False) for m in (args.models or list(MODELS)) for e in executors]
    if args.train:
        plan += [(m, "fx", True) for m in (args.models or list(MODELS))]
    rows: list[dict] = []
    for name, executor, train in plan:
        row = {"model": name, "executor": executor + (" train" if train else ""), **run_one(name, executor, train, args.timeout)}
        rows.append(row)
        print(f"{name:15s} {row['executor']:12s} {row['outcome']:22s} {row['seconds']:6.1f}s  {row['message'][:110]}", flush=True)
        if args.json:
            tmp = Path(args.json + ".tmp")
            tmp.write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1), encoding="utf-8")
            tmp.replace(args.json)
    counts = collections.Counter((r["executor"], r["outcome"].split(":")[0] if r["outcome"].startswith("error") else r["outcome"]) for r in rows)
    print("\n| executor | outcome | rows |\n|---|---|---:|")
    for (executor, outcome), n in sorted(counts.items()):
        print(f"| {executor} | {outcome} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
