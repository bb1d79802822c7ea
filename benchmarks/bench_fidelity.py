"""Simulated vs published single-GPU throughput: the simulator's fidelity table (issue 9).

    PYTHONPATH=. python benchmarks/bench_fidelity.py            # all pairs, fitted efficiencies
    PYTHONPATH=. python benchmarks/bench_fidelity.py --raw      # datasheet peaks (no fitted constant)

Each pair is one published measurement at its batch size and precision (sources in `PAIRS`),
simulated as the framework runs it by default: the workload's graph, its precision applied
(AMP: every f32 tensor made f16, so convs/matmuls run at the tensor-core peak and activations
move half the bytes; TF32 on A100: f32 convs/matmuls at the TF32 tensor-core peak), then
`apply_default_fusion`, then the event simulator on one GPU of the preset.

Fitted constants (three, shared by every pair and device; `--raw` shows the unfitted numbers):
`EFFICIENCY["fp32"]`, the fraction of the datasheet fp32 peak a cuDNN/cuBLAS kernel reaches;
`EFFICIENCY["tensor"]`, the same for tensor-core math (fp16 under AMP, TF32 on A100); and
`EFFICIENCY["memory"]`, the fraction of datasheet HBM bandwidth a memory-bound kernel reaches.
They were fitted (`--fit`) on the three V100 pairs marked `fit=True`: a grid in steps of 0.05
minimising the squared log error of throughput, each grid point priced by summing per-kernel
rooflines (one GPU runs kernels one after another) scaled to the simulator's own step time at
datasheet peaks; the table then reports the simulator's step times at the fitted constants. The
V100 AMP-inference pair and both A100 pairs are held out.

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

EFFICIENCY = {"fp32": 0.7, "tensor": 1.0, "memory": 1.0}  # fitted by --fit (RESULTS.md section e)
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


def device_topology(device: str, precision: str, efficiency: dict[str, float]) -> Topology:
    """One GPU of the preset, its peaks derated by the efficiencies (TF32 raising the f32 peak to
    the tensor-core rate)."""
    base = load_topology(f"1x{device}")
    devices = []
    for spec in base.devices:
        if spec.kind != "gpu":
            devices.append(spec)
            continue
        peaks = {k: v * efficiency["tensor" if k in ("fp16", "int8") else "fp32"] for k, v in spec.peak_flops.items()}
        if precision == "tf32":
            peaks["fp32"] = A100_TF32 * efficiency["tensor"]
        devices.append(dataclasses.replace(spec, peak_flops=peaks, mem_bandwidth=spec.mem_bandwidth * efficiency["memory"]))
    return Topology(base.name, devices, base.links)


def kernel_terms(graph) -> list[tuple[float, float, float]]:
    """Per kernel (fused group or lone node): fp32 FLOPs, fp16 FLOPs, bytes moved."""
    from cost_model.decisions import node_order
    from cost_model.flops import node_bytes, node_flops
    from cost_model.roofline import group_boundary_bytes, node_dtype_family

    groups: dict[int, list] = {}
    kernels = []
    for node in node_order(graph):
        if node.fusion_group is None:
            kernels.append([node])
        else:
            groups.setdefault(node.fusion_group, []).append(node)
    terms = []
    for members in kernels + list(groups.values()):
        f32 = sum(node_flops(n) for n in members if node_dtype_family(n) != "fp16")
        f16 = sum(node_flops(n) for n in members if node_dtype_family(n) == "fp16")
        nbytes = group_boundary_bytes(members) if len(members) > 1 else node_bytes(members[0])
        terms.append((float(f32), float(f16), float(nbytes)))
    return terms


def analytic_step(terms, pair: dict[str, Any], efficiency: dict[str, float]) -> float:
    """The sum of per-kernel rooflines at the derated peaks (no launch overheads)."""
    base = _base_rates(pair["device"], pair["precision"])
    p32 = base[0] * efficiency["tensor" if pair["precision"] == "tf32" else "fp32"]
    p16, bw = base[1] * efficiency["tensor"], base[2] * efficiency["memory"]
    return sum(max(f32 / p32 + f16 / p16, b / bw) for f32, f16, b in terms)


_RATES: dict[tuple[str, str], tuple[float, float, float]] = {}


def _base_rates(device: str, precision: str) -> tuple[float, float, float]:
    key = (device, precision)
    if key not in _RATES:
        ones = {"fp32": 1.0, "tensor": 1.0, "memory": 1.0}
        spec = next(d for d in device_topology(device, precision, ones).devices if d.kind == "gpu")
        _RATES[key] = (spec.peak("fp32"), spec.peak("fp16"), spec.mem_bandwidth)
    return _RATES[key]


def build(pair: dict[str, Any]):
    graph = build_workload(pair["workload"], pair["mode"], batch=pair["batch"])
    fusion = apply_default_fusion(graph)
    with_precision(graph, pair["precision"])  # after fusion: inlined call bodies get converted too
    return graph, fusion


def simulate_pair(graph, pair: dict[str, Any], efficiency: dict[str, float]) -> float:
    topology = device_topology(pair["device"], pair["precision"], efficiency)
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
    efficiency = {"fp32": 1.0, "tensor": 1.0, "memory": 1.0} if args.raw else dict(EFFICIENCY)
    if args.fit:
        ones = {"fp32": 1.0, "tensor": 1.0, "memory": 1.0}
        fitting = []
        for pair, (graph, _) in zip(PAIRS, graphs):
            if pair["fit"]:
                terms = kernel_terms(graph)
                # Launch overheads and scheduling are in the simulator, not in the sum: scale.
                scale = simulate_pair(graph, pair, ones) / analytic_step(terms, pair, ones)
                fitting.append((pair, terms, scale))
        grid = [x / 20 for x in range(2, 21)]
        best = None
        for c32 in grid:
            for ctc in grid:
                for mem in grid[4:]:
                    eff = {"fp32": c32, "tensor": ctc, "memory": mem}
                    err = sum(math.log(p["batch"] / (analytic_step(t, p, eff) * k) / p["published"]) ** 2 for p, t, k in fitting)
                    if best is None or err < best[0]:
                        best = (err, eff)
        efficiency = best[1]
        print(f"fitted efficiencies: {efficiency}", flush=True)
    rows = []
    for pair, (graph, fusion) in zip(PAIRS, graphs):
        step = simulate_pair(graph, pair, efficiency)
        rate = pair["batch"] / step
        rows.append({**pair, "default_fusion": fusion.name, "simulated_step_s": step, "simulated": rate, "ratio": rate / pair["published"]})
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"\nefficiencies (fraction of datasheet peak): {efficiency}")
    print("| model | mode | device | precision | batch | published img/s | simulated img/s | sim/pub | fitted on |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['mode']} | {r['device']} | {r['precision']} | {r['batch']} | {r['published']:.0f} | {r['simulated']:.0f} | {r['ratio']:.2f} | {'yes' if r['fit'] else 'held out'} |")
    print(f"geometric mean sim/pub: {geo:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"efficiency": efficiency, "geomean": geo, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
