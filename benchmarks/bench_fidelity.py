"""Simulated vs published single-GPU throughput: the simulator's fidelity table (issue 9).

    PYTHONPATH=. python benchmarks/bench_fidelity.py            # all pairs, fitted efficiencies
    PYTHONPATH=. python benchmarks/bench_fidelity.py --raw      # datasheet peaks (no fitted constant)

Each pair is one published measurement at its batch size and precision (sources in `PAIRS`),
simulated as the framework runs it by default: the workload's graph, its precision applied
(AMP: every f32 tensor made f16, so convs/matmuls run at the tensor-core peak and activations
move half the bytes; TF32 on A100: f32 convs/matmuls at the TF32 tensor-core peak), then
`apply_default_fusion`, then the event simulator on one GPU of the preset.

Fitted constants (two, shared by every pair and device; `--raw` shows the unfitted numbers):
`COMPUTE_EFFICIENCY`, the fraction of the datasheet peak FLOP/s a cuDNN/cuBLAS kernel reaches,
and `MEMORY_EFFICIENCY`, the fraction of datasheet HBM bandwidth a memory-bound kernel reaches.
They were fitted on the V100 pairs marked `fit=True` (a grid over 0.30..1.00 minimising the
squared log error); the A100 pairs and the V100 inference-AMP pair are held out.

Writes benchmarks/results/fidelity.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from compiler_opt.workloads.registry import build_workload
from cost_model.decisions import Decisions
from cost_model.devices import load_topology
from cost_model.devices.topology import Topology
from cost_model.simulator import SimulationProblem, simulate
from graph_ir.dtypes import DType
from graph_ir.types import TensorType
from passes.fusion.defaults import apply_default_fusion

COMPUTE_EFFICIENCY = 0.6
MEMORY_EFFICIENCY = 0.8
# NVIDIA A100 datasheet: TF32 tensor-core peak (dense).
A100_TF32 = 156e12

_DLE_RN50 = "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md (pytorch-21.03 NGC), batch sizes from configs.yml"
PAIRS: list[dict[str, Any]] = [
    dict(workload="resnet-50", mode="train", batch=112, device="V100", precision="fp32", published=367.0, fit=True,
         source=_DLE_RN50 + ": DGX-1 16GB, 1 GPU, FP32 training 367 img/s"),
    dict(workload="resnet-50", mode="train", batch=256, device="V100", precision="amp", published=1200.0, fit=True,
         source=_DLE_RN50 + ": DGX-1 16GB, 1 GPU, mixed-precision training 1200 img/s"),
    dict(workload="resnet-50", mode="inference", batch=32, device="V100", precision="fp32", published=1127.0, fit=True,
         source=_DLE_RN50 + ": DGX-1 1x V100 16GB, FP32 inference, batch 32, 1127 img/s"),
    dict(workload="resnet-50", mode="inference", batch=64, device="V100", precision="amp", published=2984.0, fit=False,
         source=_DLE_RN50 + ": DGX-1 1x V100 16GB, mixed-precision inference, batch 64, 2984 img/s"),
    dict(workload="resnet-50", mode="train", batch=256, device="A100", precision="tf32", published=938.0, fit=False,
         source=_DLE_RN50 + ": DGX A100 80GB, 1 GPU, TF32 training 938 img/s"),
    dict(workload="resnet-50", mode="train", batch=256, device="A100", precision="amp", published=2470.0, fit=False,
         source=_DLE_RN50 + ": DGX A100 80GB, 1 GPU, mixed-precision training 2470 img/s"),
]


def with_precision(graph, precision: str) -> None:
    """AMP: every f32 tensor (values and constants' declared types) becomes f16, in place."""
    if precision != "amp":
        return
    for node in graph.all_nodes():
        for value in node.outputs:
            if isinstance(value.type, TensorType) and value.type.dtype == DType.FLOAT32:
                value.type = TensorType(DType.FLOAT16, value.type.shape)
    for value in graph.inputs:
        if isinstance(value.type, TensorType) and value.type.dtype == DType.FLOAT32:
            value.type = TensorType(DType.FLOAT16, value.type.shape)


def device_topology(device: str, precision: str, *, compute: float, memory: float) -> Topology:
    """One GPU of the preset, its peaks derated by the efficiencies (TF32 raising the f32 peak)."""
    base = load_topology(f"1x{device}")
    devices = []
    for spec in base.devices:
        if spec.kind != "gpu":
            devices.append(spec)
            continue
        peaks = dict(spec.peak_flops)
        if precision == "tf32":
            peaks["fp32"] = A100_TF32
        peaks = {k: v * compute for k, v in peaks.items()}
        devices.append(dataclasses.replace(spec, peak_flops=peaks, mem_bandwidth=spec.mem_bandwidth * memory))
    return Topology(base.name, devices, base.links)


def build(pair: dict[str, Any]):
    graph = build_workload(pair["workload"], pair["mode"], batch=pair["batch"])
    with_precision(graph, pair["precision"])
    fusion = apply_default_fusion(graph)
    return graph, fusion


def simulate_pair(graph, pair: dict[str, Any], *, compute: float, memory: float) -> float:
    topology = device_topology(pair["device"], pair["precision"], compute=compute, memory=memory)
    gpu = next(i for i, d in enumerate(topology.devices) if d.kind == "gpu")
    problem = SimulationProblem.from_graph(graph, topology)
    decisions = Decisions.from_graph(graph, topology, default_device=gpu, nodes=problem.nodes)
    return simulate(problem, decisions).step_time_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", action="store_true", help="datasheet peaks (efficiencies 1.0)")
    parser.add_argument("--fit", action="store_true", help="refit the two efficiencies on the fit=True pairs")
    parser.add_argument("--out", default="benchmarks/results/fidelity.json")
    args = parser.parse_args(argv)
    graphs = []
    for pair in PAIRS:
        began = time.perf_counter()
        graph, fusion = build(pair)
        graphs.append((graph, fusion))
        print(f"built {pair['workload']}:{pair['mode']} b={pair['batch']} {pair['precision']} ({len(graph)} nodes, {fusion.name}: {fusion.groups} groups) in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    compute, memory = (1.0, 1.0) if args.raw else (COMPUTE_EFFICIENCY, MEMORY_EFFICIENCY)
    if args.fit:
        grid = [x / 20 for x in range(6, 21)]
        best = None
        for c in grid:
            for m in grid:
                err = 0.0
                for pair, (graph, _) in zip(PAIRS, graphs):
                    if pair["fit"]:
                        rate = pair["batch"] / simulate_pair(graph, pair, compute=c, memory=m)
                        err += math.log(rate / pair["published"]) ** 2
                if best is None or err < best[0]:
                    best = (err, c, m)
        _, compute, memory = best
        print(f"fitted: compute efficiency {compute:.2f}, memory efficiency {memory:.2f}", flush=True)
    rows = []
    for pair, (graph, fusion) in zip(PAIRS, graphs):
        step = simulate_pair(graph, pair, compute=compute, memory=memory)
        unfused = None
        rate = pair["batch"] / step
        rows.append({**pair, "default_fusion": fusion.name, "simulated_step_s": step, "simulated": rate, "ratio": rate / pair["published"], "unfused_step_s": unfused})
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"\ncompute efficiency {compute:.2f}, memory efficiency {memory:.2f}")
    print("| model | mode | device | precision | batch | published img/s | simulated img/s | sim/pub | fitted on |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['mode']} | {r['device']} | {r['precision']} | {r['batch']} | {r['published']:.0f} | {r['simulated']:.0f} | {r['ratio']:.2f} | {'yes' if r['fit'] else 'held out'} |")
    print(f"geometric mean sim/pub: {geo:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"compute_efficiency": compute, "memory_efficiency": memory, "geomean": geo, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
