"""Measured GPU kernels and steps (benchmarks/gpu_bench.py's JSON) against the device preset.

    PYTHONPATH=. python benchmarks/bench_gpu_compare.py benchmarks/results/gpu_h200.json --preset H100

Per kernel: the preset's roofline (max(FLOPs / peak, bytes / bandwidth) + launch overhead) next
to the measured median. Per end-to-end step: the simulator on one GPU of the preset with the
workload at the measured batch (ResNet-50 at 224x224; BERT-base at sequence 128 with the MLM
head on every position, as Hugging Face's BertForMaskedLM computes it), default fusion applied,
at datasheet peaks and at bench_fidelity's fitted efficiencies. AMP simulated as all-f16.
Writes benchmarks/results/gpu_compare.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.bench_fidelity import EFFICIENCY, simulate_pair, with_precision
from compiler_opt.workloads.registry import build_workload
from cost_model.devices import load_topology
from passes.fusion.defaults import apply_default_fusion

_FAMILY = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "fp16"}


def kernel_rows(measured: dict[str, Any], preset: str) -> list[dict[str, Any]]:
    spec = next(d for d in load_topology(f"1x{preset}").devices if d.kind == "gpu")
    rows = []
    for k in measured["kernels"]:
        if k["op"] == "launch":
            predicted = spec.launch_overhead_s
        elif "flops" in k:
            predicted = k["flops"] / spec.peak(_FAMILY[k["dtype"]]) + spec.launch_overhead_s
        else:
            predicted = k["bytes"] / spec.mem_bandwidth + spec.launch_overhead_s
        rows.append({**k, "predicted_s": predicted, "measured_over_predicted": k["median_s"] / predicted})
    return rows


def step_rows(measured: dict[str, Any], preset: str) -> list[dict[str, Any]]:
    rows = []
    for m in measured["steps"]:
        if "error" in m:
            continue
        sizes = {"batch": m["batch"]}
        if m["model"] == "bert-base":
            sizes.update(seq_len=128, masked=128)
        graph = build_workload(m["model"], m["mode"], **sizes)
        fusion = apply_default_fusion(graph)
        with_precision(graph, m["precision"])
        pair = {"device": preset, "precision": m["precision"]}
        raw = simulate_pair(graph, pair, {"fp32": 1.0, "tensor": 1.0, "memory": 1.0})
        fitted = simulate_pair(graph, pair, EFFICIENCY)
        rows.append({**m, "default_fusion": fusion.name, "simulated_peak_s": raw, "simulated_fitted_s": fitted})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", help="gpu_bench.py's JSON")
    parser.add_argument("--preset", default="H100")
    parser.add_argument("--out", default="benchmarks/results/gpu_compare.json")
    args = parser.parse_args(argv)
    measured = json.loads(Path(args.measured).read_text())
    kernels = kernel_rows(measured, args.preset)
    print(f"measured on {measured['info']['device']}, preset {args.preset}")
    print("| op | dtype | shape | measured | preset roofline | measured / preset |")
    print("|---|---|---|---|---|---|")
    for r in kernels:
        print(f"| {r['op']} | {r['dtype']} | {'x'.join(map(str, r['shape']))} | {r['median_s'] * 1e6:.1f} us | {r['predicted_s'] * 1e6:.1f} us | {r['measured_over_predicted']:.2f} |")
    steps = step_rows(measured, args.preset)
    print("\n| model | mode | batch | precision | measured | simulated (datasheet) | simulated (fitted) | measured / fitted |")
    print("|---|---|---|---|---|---|---|---|")
    for r in steps:
        print(f"| {r['model']} | {r['mode']} | {r['batch']} | {r['precision']} | {r['median_s'] * 1e3:.2f} ms | {r['simulated_peak_s'] * 1e3:.2f} ms | {r['simulated_fitted_s'] * 1e3:.2f} ms | {r['median_s'] / r['simulated_fitted_s']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"info": measured["info"], "preset": args.preset, "kernels": kernels, "steps": steps}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
