"""Time per-op kernels and end-to-end ResNet-50 / BERT-base steps on a real GPU (issue 9, item 6).

    python benchmarks/gpu_bench.py --out gpu.json            # on a CUDA machine
    python benchmarks/gpu_bench.py --tiny --out tiny.json    # a CPU smoke test of the script itself

Everything is built locally (torchvision ResNet-50 with weights=None, Hugging Face BERT-base from
a BertConfig): nothing is downloaded. Kernels are timed with CUDA events after warm-up, on random
(not zero) inputs, medians of repeats; end-to-end steps include forward, backward and an SGD
update (training) or a no-grad forward (inference), fp32 and AMP (autocast fp16; channels_last for
ResNet-50 under AMP, as NVIDIA's DeepLearningExamples run it). Each result gives the achieved rate
beside the time so it can be set against the device presets (`cost_model/devices/presets`).
The script prints one JSON document and writes it to --out; it has no dependency on this package,
so it runs on a bare machine with torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import torch

__all__ = ["main"]


def _timer(device: torch.device) -> Callable[[Callable[[], Any], int, int], list[float]]:
    """A function timing `fn` `repeats` times after `warmup` runs; seconds per run."""

    def time_cuda(fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return times

    def time_cpu(fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return times

    return time_cuda if device.type == "cuda" else time_cpu


def _summary(times: list[float], **extra: Any) -> dict[str, Any]:
    return {"median_s": statistics.median(times), "min_s": min(times), "repeats": len(times), **extra}


def kernels(device: torch.device, tiny: bool, timer) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    gen = torch.Generator(device=device).manual_seed(0)

    def rnd(*shape: int, dtype=torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    reps = 5 if tiny else 30
    # Launch overhead: a one-element add, timed as a batch of 1,000 launches (host-bound).
    x1 = rnd(1)
    n_launch = 20 if tiny else 1000

    def many() -> None:
        for _ in range(n_launch):
            x1.add_(1.0)

    t = timer(many, 2, 5)
    rows.append({"op": "launch", "shape": [1], "dtype": "fp32", **_summary([s / n_launch for s in t])})

    # Matmuls: fp32 with TF32 off (torch's default) and on, fp16 and bf16.
    sizes = [(64, 64, 64)] if tiny else [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (32 * 128, 768, 3072)]
    for m, k, n in sizes:
        for dtype_name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True), ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
            a, b = rnd(m, k, dtype=dtype), rnd(k, n, dtype=dtype)
            torch.backends.cuda.matmul.allow_tf32 = tf32
            t = timer(lambda: a @ b, 3, reps)
            flops = 2 * m * n * k
            rows.append({"op": "matmul", "shape": [m, k, n], "dtype": dtype_name, "flops": flops, **_summary(t, tflops=flops / statistics.median(t) / 1e12)})
    torch.backends.cuda.matmul.allow_tf32 = False

    # Convolutions (ResNet-50 layers, batch 32) in fp32 (cuDNN may use TF32: torch's default for
    # convs is allow_tf32=True) and fp16 channels_last.
    convs = [(2, 8, 16, 8, 3, 1)] if tiny else [(32, 64, 56, 64, 3, 1), (32, 256, 56, 64, 1, 1), (32, 128, 28, 128, 3, 1), (32, 3, 224, 64, 7, 2), (32, 1024, 14, 256, 1, 1)]
    for nb, cin, hw, cout, k, stride in convs:
        for dtype_name, dtype, fmt in (("fp32", torch.float32, torch.contiguous_format), ("fp16", torch.float16, torch.channels_last)):
            x = rnd(nb, cin, hw, hw, dtype=dtype).to(memory_format=fmt)
            w = rnd(cout, cin, k, k, dtype=dtype).to(memory_format=fmt)
            fn = lambda: torch.nn.functional.conv2d(x, w, stride=stride, padding=k // 2)  # noqa: E731
            out = fn()
            t = timer(fn, 3, reps)
            flops = 2 * out.numel() * cin * k * k
            rows.append({"op": "conv2d", "shape": [nb, cin, hw, hw, cout, k, stride], "dtype": dtype_name, "flops": flops, **_summary(t, tflops=flops / statistics.median(t) / 1e12)})

    # Memory-bound ops: batch norm (training mode), add, relu, gelu at a few sizes.
    bn_shapes = [(2, 8, 8, 8)] if tiny else [(32, 64, 112, 112), (32, 256, 56, 56), (32, 2048, 7, 7)]
    for shape in bn_shapes:
        for dtype_name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
            x = rnd(*shape, dtype=dtype)
            bn = torch.nn.BatchNorm2d(shape[1]).to(device=device, dtype=dtype)
            t = timer(lambda: bn(x), 3, reps)
            nbytes = 2 * x.numel() * x.element_size()
            rows.append({"op": "batchnorm", "shape": list(shape), "dtype": dtype_name, "bytes": nbytes, **_summary(t, gbps=nbytes / statistics.median(t) / 1e9)})
    numels = [1 << 12] if tiny else [1 << 16, 1 << 20, 1 << 24, 1 << 27]
    for numel in numels:
        for dtype_name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
            a, b = rnd(numel, dtype=dtype), rnd(numel, dtype=dtype)
            size = a.element_size() * numel
            for name, fn, nbytes in (
                ("add", lambda: a + b, 3 * size),
                ("relu", lambda: torch.relu(a), 2 * size),
                ("gelu", lambda: torch.nn.functional.gelu(a), 2 * size),
                ("copy", lambda: a.clone(), 2 * size),
            ):
                t = timer(fn, 3, reps)
                rows.append({"op": name, "shape": [numel], "dtype": dtype_name, "bytes": nbytes, **_summary(t, gbps=nbytes / statistics.median(t) / 1e9)})
    return rows


def _step_rows(model_name: str, model: torch.nn.Module, make_batch, loss_fn, device: torch.device, batches, timer, tiny: bool, channels_last: bool) -> list[dict[str, Any]]:
    rows = []
    reps, warm = (2, 1) if tiny else (15, 5)
    for batch in batches:
        for precision in ("fp32", "amp"):
            m = model
            if precision == "amp" and channels_last:
                m = model.to(memory_format=torch.channels_last)
            inputs = make_batch(batch, precision == "amp" and channels_last)
            opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
            scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp" and device.type == "cuda")
            autocast = torch.autocast(device.type, dtype=torch.float16 if device.type == "cuda" else torch.bfloat16, enabled=precision == "amp")

            def train() -> None:
                opt.zero_grad(set_to_none=True)
                with autocast:
                    loss = loss_fn(m, inputs)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()

            def infer() -> None:
                with torch.no_grad(), autocast:
                    loss_fn(m, inputs, inference=True)

            m.train()
            t = timer(train, warm, reps)
            rows.append({"model": model_name, "mode": "train", "batch": batch, "precision": precision, **_summary(t, items_per_s=batch / statistics.median(t))})
            m.eval()
            t = timer(infer, warm, reps)
            rows.append({"model": model_name, "mode": "inference", "batch": batch, "precision": precision, **_summary(t, items_per_s=batch / statistics.median(t))})
            if channels_last:
                model.to(memory_format=torch.contiguous_format)
    return rows


def end_to_end(device: torch.device, tiny: bool, timer) -> list[dict[str, Any]]:
    torch.backends.cudnn.benchmark = True
    rows: list[dict[str, Any]] = []
    try:
        rows += _resnet(device, tiny, timer)
    except Exception as err:  # keep the other model's numbers when one fails
        rows.append({"model": "resnet-50", "error": repr(err)})
    try:
        rows += _bert(device, tiny, timer)
    except Exception as err:
        rows.append({"model": "bert-base", "error": repr(err)})
    return rows


def _resnet(device: torch.device, tiny: bool, timer) -> list[dict[str, Any]]:
    import torchvision

    rows: list[dict[str, Any]] = []
    gen = torch.Generator(device=device).manual_seed(0)
    image = 32 if tiny else 224
    resnet = torchvision.models.resnet50(weights=None).to(device)

    def image_batch(batch: int, cl: bool):
        x = torch.randn(batch, 3, image, image, generator=gen, device=device)
        y = torch.randint(0, 1000, (batch,), generator=gen, device=device)
        return (x.to(memory_format=torch.channels_last) if cl else x), y

    def resnet_loss(m, inputs, inference: bool = False):
        out = m(inputs[0])
        return out if inference else torch.nn.functional.cross_entropy(out, inputs[1])

    return _step_rows("resnet-50", resnet, image_batch, resnet_loss, device, [2] if tiny else [32, 64], timer, tiny, True)


def _bert(device: torch.device, tiny: bool, timer) -> list[dict[str, Any]]:
    from transformers import BertConfig, BertForMaskedLM

    gen = torch.Generator(device=device).manual_seed(0)

    config = BertConfig() if not tiny else BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    seq = 16 if tiny else 128
    bert = BertForMaskedLM(config).to(device)

    def token_batch(batch: int, cl: bool):
        ids = torch.randint(0, config.vocab_size, (batch, seq), generator=gen, device=device)
        return ids, ids.clone()

    def bert_loss(m, inputs, inference: bool = False):
        if inference:
            return m(input_ids=inputs[0]).logits
        return m(input_ids=inputs[0], labels=inputs[1]).loss

    return _step_rows("bert-base", bert, token_batch, bert_loss, device, [2] if tiny else [32], timer, tiny, False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (a CPU smoke test)")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)
    timer = _timer(device)
    info: dict[str, Any] = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(memory_gib=props.total_memory / 2**30, sms=props.multi_processor_count, cudnn=torch.backends.cudnn.version())
    started = time.time()
    result: dict[str, Any] = {"info": info}
    result["kernels"] = kernels(device, args.tiny, timer)
    result["kernel_seconds"] = time.time() - started
    with open(args.out, "w") as f:  # partial results survive a timeout in the model steps
        json.dump(result, f)
    for row in result["kernels"]:
        rate = f"{row['tflops']:.1f} TFLOP/s" if "tflops" in row else f"{row.get('gbps', 0):.0f} GB/s"
        print(f"{row['op']:9s} {row['dtype']:5s} {str(row['shape']):32s} {row['median_s'] * 1e6:10.1f} us {rate}", flush=True)
    result["steps"] = end_to_end(device, args.tiny, timer)
    result["total_seconds"] = time.time() - started
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for row in result["steps"]:
        if "error" in row:
            print(row["model"], "failed:", row["error"])
            continue
        print(f"{row['model']:10s} {row['mode']:9s} b={row['batch']:3d} {row['precision']:4s} {row['median_s'] * 1e3:9.2f} ms {row['items_per_s']:9.1f}/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
