"""Simulated vs published single-GPU throughput: the simulator's fidelity table (issue 9).

    PYTHONPATH=. python benchmarks/bench_fidelity.py            # all pairs, the fitted constants below
    PYTHONPATH=. python benchmarks/bench_fidelity.py --fit      # refit them on the fit=True pairs first
    PYTHONPATH=. python benchmarks/bench_fidelity.py --raw      # datasheet peaks, no constant
    PYTHONPATH=. python benchmarks/bench_fidelity.py --only bert   # pairs whose key contains "bert"
    PYTHONPATH=. python benchmarks/bench_fidelity.py --fit --hold-out txl-train-v100-amp   # refit without that pair
    PYTHONPATH=. python benchmarks/bench_fidelity.py --only gnmt --breakdown   # device time per kernel class

Each pair is one published measurement (`PAIRS`: source file, table, GPU, batch, precision,
number) simulated the way that run executed: the suite workload at the published sizes (size
overrides only: BERT-large is `bert-base` with 24 x 1024 x 16 heads), its precision applied
(AMP: `cost_model.precision.apply_amp`, fp16 math with fp32 optimizer state and one weight cast per parameter, convs/matmuls at the tensor-core peak; TF32 on A100: f32
convs/matmuls at the TF32 tensor-core peak), the run's framework default fusion (TensorFlow
with XLA: `apply_default_fusion`, `xla-gpu`; PyTorch eager: `passes.fusion.eager`, every call
inlined, elementwise chains and reductions fused as PyTorch's composite kernels are,
matmuls/convs without epilogues, a weight applied over a sequence one batched GEMM (cuDNN's LSTM
input projection, the weight gradient summed over steps); `--pytorch-fusion xla-gpu` gives them
XLA's instead), then the event simulator on one GPU of the
preset with `DeratedRoofline` kernel costs.

Constants (`EFFICIENCY`, `STEP_OVERHEAD_S`, `HOST_PER_KERNEL_S`), fitted by `--fit` on the twelve
V100 pairs (`fit=True`) by Nelder-Mead on the squared log error of throughput, evaluated with the
per-kernel form of the simulator's one-GPU step (checked equal to the simulator for every row);
all ten A100 pairs are held out (TF32 included: it is predicted from the fp16 tensor-core
fractions):
- `EFFICIENCY["fp32"]`, `["tensor"]`: fraction of the datasheet FLOP peak that matmuls (and any
  op but a convolution) reach on CUDA cores (fp32) and on tensor cores (fp16 under AMP; TF32 on
  A100, at the 156 TFLOPS TF32 peak);
- `EFFICIENCY["conv_fp32"]`, `["conv_tensor"]`: the same for convolutions (cuDNN kernels reach a
  smaller share of the tensor-core peak than large GEMMs: RESULTS.md section g);
- `EFFICIENCY["memory"]`: fraction of the datasheet HBM bandwidth a memory-bound kernel reaches;
- `STEP_OVERHEAD_S["tensorflow"]`: host time per step outside the GPU timeline in the TF1
  (session.run) runs, where the published small-batch inference latencies show it (BERT-base
  on A100 at batch 1 takes 4.3 ms for 22 GFLOP);
- `HOST_PER_KERNEL_S["pytorch"]`: host time per kernel that eager PyTorch dispatches from Python
  (`cost_model.host_dispatch`: the GPU runs a kernel no earlier than the host has issued it; a
  recurrence's per-step kernels are launched by one cuDNN call). It is per kernel of our eager
  grouping, which counts fewer kernels than PyTorch has ops (views, autograd bookkeeping and
  the optimizer's per-parameter ops are not kernels here), so it is larger than a measured
  per-op dispatch cost. `--no-host` fits without it.

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

import numpy as np

from compiler_opt.workloads.registry import build_workload
from cost_model.costs.derated import DeratedRoofline, is_conv
from cost_model.decisions import Decisions
from cost_model.precision import apply_amp
from cost_model.devices import load_topology
from cost_model.devices.spec import DTYPE_FAMILIES
from cost_model.devices.topology import Topology
from cost_model.host_dispatch import eager_host_ops, host_bound_step, optimizer_last
from cost_model.simulator import SimulationProblem, simulate
from graph_ir.op_kinds import OpKind
from passes.fusion.defaults import DefaultFusion, apply_default_fusion
from passes.fusion.eager import OPTIMIZER_META, apply_eager_fusion

# Fitted by --fit (RESULTS.md section f). Fractions of the datasheet peaks.
EFFICIENCY = {"fp32": 0.801, "tensor": 0.551, "conv_fp32": 0.752, "conv_tensor": 0.319, "memory": 1.0}
STEP_OVERHEAD_S = {"tensorflow": 0.00424, "pytorch": 0.0}
# Host time per framework-dispatched kernel (cost_model.host_dispatch): PyTorch eager issues every
# kernel from Python; TF1 with XLA runs clusters, charged per step above instead.
HOST_PER_KERNEL_S = {"pytorch": 40.0e-6, "tensorflow": 0.0}
FITTED = ("fp32", "tensor", "conv_fp32", "conv_tensor", "memory", "tensorflow")
# NVIDIA A100 datasheet: TF32 tensor-core peak (dense) 156 TFLOPS; the 80 GB SXM4 part has
# 2,039 GB/s of HBM2e (the a100 preset is the 40 GB part, 1,555 GB/s).
A100_TF32 = 156e12
DEVICES = {"V100": ("V100", None), "A100": ("A100", None), "A100-80GB": ("A100", 2039e9)}

_DLE = "NVIDIA DeepLearningExamples (github.com/NVIDIA/DeepLearningExamples)"
_RN50 = _DLE + ", PyTorch/Classification/ConvNets/resnet50v1.5/README.md (pytorch-21.03 NGC; training batch sizes from configs.yml)"
_BERT = _DLE + ", TensorFlow/LanguageModeling/BERT/README.md (TF 20.06 NGC, --use_xla)"
_GNMT = _DLE + ", PyTorch/Translation/GNMT/README.md (pytorch-20.06 NGC), 'Training throughput', 1 GPU, tok/s = source + target tokens"
_TXL = _DLE + ", PyTorch/LanguageModeling/Transformer-XL/README.md (pytorch-20.06 NGC), 'Training performance', base model, 1 GPU"
# BERT-large and Transformer-XL base as sizes of the suite's models (no fork).
BERT_LARGE = {"layers": 24, "hidden": 1024, "heads": 16, "d_ff": 4096}
# DLE's wt103_base.yaml: 16 layers, d_model 512, 8 heads of 64, d_inner 2048, tgt_len = mem_len = 192.
# Its adaptive softmax (cutoffs 19997/39997/199997) is modelled as its 20,000-way head only.
TXL_BASE = {"layers": 16, "d_model": 512, "heads": 8, "d_ff": 2048, "seg_len": 192, "mem_len": 192, "vocab": 20000}
# GNMT (DLE): 4 layers, 1024 units, 32k BPE; sentences are bucketed up to 50 tokens, modelled as
# 24 source + 24 target tokens per sentence (tok/s barely depends on it: the step scales with length).
GNMT = {"hidden": 1024, "vocab": 32000, "src_len": 24, "tgt_len": 24}


def _pair(key, workload, mode, sizes, device, precision, published, unit, framework, fit, source):
    return dict(key=key, workload=workload, mode=mode, sizes=sizes, device=device, precision=precision,
                published=published, unit=unit, framework=framework, fit=fit, source=source)


PAIRS: list[dict[str, Any]] = [
    _pair("rn50-train-v100-fp32", "resnet-50", "train", {"batch": 112}, "V100", "fp32", 367.0, "img/s", "pytorch", True,
          _RN50 + ", 'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, FP32"),
    _pair("rn50-train-v100-amp", "resnet-50", "train", {"batch": 256}, "V100", "amp", 1200.0, "img/s", "pytorch", True,
          _RN50 + ", 'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, mixed precision"),
    _pair("rn50-infer-v100-fp32", "resnet-50", "inference", {"batch": 32}, "V100", "fp32", 1127.0, "img/s", "pytorch", True,
          _RN50 + ", 'Inference performance: NVIDIA DGX-1 (1x V100 16GB)', FP32, batch 32, throughput avg"),
    _pair("rn50-infer-v100-amp", "resnet-50", "inference", {"batch": 64}, "V100", "amp", 2984.0, "img/s", "pytorch", True,
          _RN50 + ", 'Inference performance: NVIDIA DGX-1 (1x V100 16GB)', mixed precision, batch 64, throughput avg"),
    _pair("rn50-train-a100-tf32", "resnet-50", "train", {"batch": 256}, "A100-80GB", "tf32", 938.0, "img/s", "pytorch", False,
          _RN50 + ", 'Training performance: NVIDIA DGX A100 (8x A100 80GB)', 1 GPU, TF32"),
    _pair("rn50-train-a100-amp", "resnet-50", "train", {"batch": 256}, "A100-80GB", "amp", 2470.0, "img/s", "pytorch", False,
          _RN50 + ", 'Training performance: NVIDIA DGX A100 (8x A100 80GB)', 1 GPU, mixed precision"),
    _pair("bert-base-infer-v100-fp32", "bert-base", "inference", {"batch": 8, "seq_len": 128, "masked": 20}, "V100", "fp32", 422.88, "seq/s",
          "tensorflow", True, _BERT + ", 'Inference performance: NVIDIA DGX-1 (1x V100 16GB)', SQuAD v1.1, base, seq 128, batch 8, fp32"),
    _pair("bert-base-infer-v100-amp", "bert-base", "inference", {"batch": 8, "seq_len": 128, "masked": 20}, "V100", "amp", 962.83, "seq/s",
          "tensorflow", True, _BERT + ", 'Inference performance: NVIDIA DGX-1 (1x V100 16GB)', SQuAD v1.1, base, seq 128, batch 8, fp16"),
    _pair("bert-base-infer-a100-tf32", "bert-base", "inference", {"batch": 8, "seq_len": 128, "masked": 20}, "A100", "tf32", 1201.05, "seq/s",
          "tensorflow", False, _BERT + ", 'Inference performance: NVIDIA DGX A100 (1x A100 40GB)', SQuAD v1.1, base, seq 128, batch 8, tf32"),
    _pair("bert-base-infer-a100-amp", "bert-base", "inference", {"batch": 8, "seq_len": 128, "masked": 20}, "A100", "amp", 1216.43, "seq/s",
          "tensorflow", False, _BERT + ", 'Inference performance: NVIDIA DGX A100 (1x A100 40GB)', SQuAD v1.1, base, seq 128, batch 8, fp16"),
    _pair("bert-large-train-v100-fp32", "bert-base", "train", {**BERT_LARGE, "seq_len": 128, "masked": 20, "batch": 8}, "V100", "fp32", 39.43,
          "seq/s", "tensorflow", True, _BERT + ", 'Pre-training training performance: single-node on DGX-1 16GB' (V100 16GB), 1 GPU, seq 128, batch 8, FP32"),
    _pair("bert-large-train-v100-amp", "bert-base", "train", {**BERT_LARGE, "seq_len": 128, "masked": 20, "batch": 16}, "V100", "amp", 134.34,
          "seq/s", "tensorflow", True, _BERT + ", 'Pre-training training performance: single-node on DGX-1 16GB' (V100 16GB), 1 GPU, seq 128, batch 16, mixed precision"),
    _pair("bert-large-train-a100-tf32", "bert-base", "train", {**BERT_LARGE, "seq_len": 128, "masked": 20, "batch": 64}, "A100", "tf32", 238.10,
          "seq/s", "tensorflow", False, _BERT + ", 'Pre-training training performance: single-node on DGX A100 40GB' (A100 40GB), 1 GPU, seq 128, batch 64, TF32"),
    _pair("bert-large-train-a100-amp", "bert-base", "train", {**BERT_LARGE, "seq_len": 128, "masked": 20, "batch": 64}, "A100", "amp", 356.845,
          "seq/s", "tensorflow", False, _BERT + ", 'Pre-training training performance: single-node on DGX A100 40GB' (A100 40GB), 1 GPU, seq 128, batch 64, mixed precision"),
    _pair("gnmt-train-v100-fp32", "gnmt-4", "train", {**GNMT, "batch": 128}, "V100", "fp32", 21860.0, "tok/s", "pytorch", True,
          _GNMT + ", 'NVIDIA DGX-1 (8x V100 16GB)', batch 128, FP32"),
    _pair("gnmt-train-v100-amp", "gnmt-4", "train", {**GNMT, "batch": 128}, "V100", "amp", 76438.0, "tok/s", "pytorch", True,
          _GNMT + ", 'NVIDIA DGX-1 (8x V100 16GB)', batch 128, mixed precision"),
    _pair("gnmt-train-a100-tf32", "gnmt-4", "train", {**GNMT, "batch": 128}, "A100", "tf32", 83214.0, "tok/s", "pytorch", False,
          _GNMT + ", 'NVIDIA DGX A100 (8x A100 40GB)', batch 128, TF32"),
    _pair("gnmt-train-a100-amp", "gnmt-4", "train", {**GNMT, "batch": 128}, "A100", "amp", 140909.0, "tok/s", "pytorch", False,
          _GNMT + ", 'NVIDIA DGX A100 (8x A100 40GB)', batch 128, mixed precision"),
    _pair("txl-train-v100-fp32", "transformer-xl", "train", {**TXL_BASE, "batch": 16}, "V100", "fp32", 13981.0, "tok/s", "pytorch", True,
          _TXL + ", 'NVIDIA DGX-1 (8x V100 16GB)', batch 16, FP32"),
    _pair("txl-train-v100-amp", "transformer-xl", "train", {**TXL_BASE, "batch": 16}, "V100", "amp", 26639.0, "tok/s", "pytorch", True,
          _TXL + ", 'NVIDIA DGX-1 (8x V100 16GB)', batch 16, mixed precision"),
    # The same table's batch-32 row: not fitted, a check that the per-step host cost and the
    # device time add up as the batch doubles (the host-dispatch model, cost_model/host_dispatch.py).
    _pair("txl-train-v100-amp-b32", "transformer-xl", "train", {**TXL_BASE, "batch": 32}, "V100", "amp", 36692.0, "tok/s", "pytorch", False,
          _TXL + ", 'NVIDIA DGX-1 (8x V100 16GB)', batch 32, mixed precision"),
    _pair("txl-train-a100-tf32", "transformer-xl", "train", {**TXL_BASE, "batch": 32}, "A100", "tf32", 41527.0, "tok/s", "pytorch", False,
          _TXL + ", 'NVIDIA DGX A100 (8x A100 40GB)', batch 32, TF32"),
    _pair("txl-train-a100-amp", "transformer-xl", "train", {**TXL_BASE, "batch": 32}, "A100", "amp", 59961.0, "tok/s", "pytorch", False,
          _TXL + ", 'NVIDIA DGX A100 (8x A100 40GB)', batch 32, mixed precision"),
]


def items_per_step(pair: dict[str, Any]) -> int:
    """Images, sequences or tokens one simulated step processes, in the published unit."""
    sizes = pair["sizes"]
    if pair["unit"] in ("img/s", "seq/s"):
        return int(sizes["batch"])
    if pair["unit"] == "tok/s":
        if "src_len" in sizes:  # seq2seq: source + target tokens, as GNMT's trainer counts them
            return int(sizes["batch"] * (sizes["src_len"] + sizes["tgt_len"]))
        return int(sizes["batch"] * sizes["seg_len"])
    raise ValueError(f"pair {pair['key']}: unknown unit {pair['unit']!r}")


def ratio(simulated: float, published: float) -> float:
    """Simulated over published throughput (> 1: the simulator is too fast)."""
    if simulated <= 0 or published <= 0:
        raise ValueError(f"throughputs must be positive, got {simulated} and {published}")
    return simulated / published


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def with_precision(graph, precision: str) -> None:
    """AMP: `cost_model.precision.apply_amp` (fp16 math, fp32 optimizer state and master weights,
    one fp32->fp16 cast per parameter), in place. fp32/TF32 graphs are left as they are."""
    if precision == "amp":
        apply_amp(graph)


def device_topology(device: str) -> Topology:
    """One GPU of the preset (datasheet peaks; the 80 GB A100 with its own bandwidth)."""
    preset, bandwidth = DEVICES[device]
    base = load_topology(f"1x{preset}")
    if bandwidth is None:
        return base
    devices = [dataclasses.replace(d, mem_bandwidth=bandwidth) if d.kind == "gpu" else d for d in base.devices]
    return Topology(base.name, devices, base.links)


def _gpu_topology(pair: dict[str, Any]) -> Topology:
    """TF32: f32 convs/matmuls run at the A100's TF32 tensor-core peak."""
    topology = device_topology(pair["device"])
    if pair["precision"] != "tf32":
        return topology
    devices = [dataclasses.replace(d, peak_flops={**d.peak_flops, "fp32": A100_TF32}) if d.kind == "gpu" else d for d in topology.devices]
    return Topology(topology.name, devices, topology.links)


def _fractions(pair: dict[str, Any], efficiency: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(matmul and other ops, convolutions): fraction of each FLOP family's peak. TF32 runs f32
    math on the tensor cores, so it takes the tensor-core fractions (at the TF32 peak)."""
    tf32 = pair["precision"] == "tf32"
    general = {"fp32": efficiency["tensor" if tf32 else "fp32"], "fp16": efficiency["tensor"]}
    conv = {"fp32": efficiency["conv_tensor" if tf32 else "conv_fp32"], "fp16": efficiency["conv_tensor"]}
    return general, conv


def derating(pair: dict[str, Any], efficiency: dict[str, float]) -> DeratedRoofline:
    general, conv = _fractions(pair, efficiency)
    return DeratedRoofline(general, memory=efficiency["memory"], conv=conv)


def eager_fusion(graph) -> DefaultFusion:
    """PyTorch eager on a JAX graph (`passes.fusion.eager`): library calls (matmul, conv) take no
    epilogue; elementwise chains and reductions fuse as one composite op's kernel would (batch
    norm, softmax, layer norm, GELU, LSTM gates are single kernels in PyTorch); a weight applied
    over a sequence is one GEMM (cuDNN's LSTM input projection, nn.Linear on [T, B, H])."""
    return apply_eager_fusion(graph)


def build(pair: dict[str, Any], pytorch_fusion: str = "eager"):
    graph = build_workload(pair["workload"], pair["mode"], **pair["sizes"])
    if pair["framework"] == "pytorch" and pytorch_fusion == "eager":
        fusion = eager_fusion(graph)
    else:
        fusion = apply_default_fusion(graph)
    with_precision(graph, pair["precision"])  # after fusion: inlined call bodies get converted too
    return graph, fusion


def problem_for(graph, pair: dict[str, Any]) -> tuple[SimulationProblem, Decisions]:
    topology = _gpu_topology(pair)
    gpu = next(i for i, d in enumerate(topology.devices) if d.kind == "gpu")
    problem = SimulationProblem.from_graph(graph, topology)
    return problem, Decisions.from_graph(graph, topology, default_device=gpu, nodes=problem.nodes)


def simulate_step(
    problem: SimulationProblem, decisions: Decisions, pair: dict[str, Any], efficiency: dict[str, float], overhead: dict[str, float],
    host: dict[str, float] | None = None, terms: dict[str, np.ndarray] | None = None,
) -> float:
    """Simulated seconds per step: the GPU timeline at the derated peaks, bounded below by the
    host issuing its kernels (`host` seconds per dispatched kernel, `terms` from `kernel_terms`),
    plus the framework's per-step host overhead."""
    problem.use_kernel_costs(derating(pair, efficiency))
    result = simulate(problem, decisions)
    step = result.step_time_s
    t_host = (host or {}).get(pair["framework"], 0.0)
    if t_host > 0.0:
        if terms is None:
            raise ValueError("a host time per kernel needs the kernel terms (issue order, host ops)")
        k = result.tasks.num_kernels
        durations = (result.task_end[:k] - result.task_start[:k])[terms["order"]]
        step = host_bound_step(durations, terms["host_ops"][terms["order"]], t_host, int(terms["sync_at"][0]))
    return step + overhead.get(pair["framework"], 0.0)


def issue_order(problem: SimulationProblem, decisions: Decisions) -> np.ndarray:
    """Kernel indices in the order the one GPU starts them. On one device the list schedule's
    order depends only on which kernels have finished, not on their durations: any cost source
    gives the same order."""
    result = simulate(problem, decisions)
    k = result.tasks.num_kernels
    return np.argsort(result.task_start[:k], kind="stable")


def kernel_terms(problem: SimulationProblem, decisions: Decisions) -> dict[str, np.ndarray]:
    """Per kernel on the one GPU: FLOP time per family at datasheet peaks, bytes / bandwidth, launch."""
    from cost_model.simulator.tasks import kernel_bytes, kernels

    device = np.asarray(decisions.device, dtype=np.int64)
    kernel_of_node, first, size = kernels(problem, device, np.asarray(decisions.fusion_group))
    k = int(first.size)
    ktype = problem.device_type_of[device[first]]
    node_flop_time = problem.flop_time[np.arange(problem.num_nodes), problem.device_type_of[device]]
    conv = is_conv(problem)
    terms = {}
    for i, family in enumerate(DTYPE_FAMILIES):
        for name, mask in ((family, ~conv), (f"conv_{family}", conv)):
            weights = np.where((problem.family == i) & mask, node_flop_time, 0.0)
            terms[name] = np.bincount(kernel_of_node, weights=weights, minlength=k)
    kbytes = kernel_bytes(problem, kernel_of_node, first, size)
    terms["memory"] = kbytes / problem.type_bandwidth[ktype]
    terms["launch"] = problem.type_launch[ktype]
    works = (kbytes > 0) | (sum(terms[f] + terms[f"conv_{f}"] for f in DTYPE_FAMILIES) > 0)
    terms["host_ops"] = eager_host_ops(problem, kernel_of_node, first, works)
    optimizer = np.zeros(k, dtype=bool)
    optimizer[kernel_of_node[[i for i, n in enumerate(problem.nodes) if n.meta.get(OPTIMIZER_META)]]] = True
    optimizer &= works
    terms["order"], sync = optimizer_last(issue_order(problem, decisions), optimizer)
    terms["kind"] = _kernel_classes(problem, kernel_of_node, k, works, optimizer)
    terms["sync_at"] = np.array([sync if optimizer.any() else 0])
    return terms


KERNEL_CLASSES = ("conv", "batched GEMM", "GEMM", "optimizer", "reduction", "elementwise/data", "no-op")


def _kernel_classes(problem: SimulationProblem, kernel_of_node: np.ndarray, k: int, works: np.ndarray, optimizer: np.ndarray) -> np.ndarray:
    """Index into KERNEL_CLASSES per kernel (for --breakdown)."""
    convs = np.bincount(kernel_of_node, weights=is_conv(problem).astype(float), minlength=k)
    matmul = np.array([n.kind == OpKind.MATMUL for n in problem.nodes], dtype=float)
    gemms = np.bincount(kernel_of_node, weights=matmul, minlength=k)
    reduce = np.array([n.kind in (OpKind.REDUCE, OpKind.ARG_REDUCE, OpKind.SOFTMAX, OpKind.NORM) for n in problem.nodes], dtype=float)
    reductions = np.bincount(kernel_of_node, weights=reduce, minlength=k)
    kind = np.full(k, 5, dtype=np.int64)
    kind[reductions > 0] = 4
    kind[optimizer] = 3
    kind[gemms == 1] = 2
    kind[gemms > 1] = 1
    kind[convs > 0] = 0
    kind[~works] = 6
    return kind


def breakdown(terms: dict[str, np.ndarray], pair: dict[str, Any], efficiency: dict[str, float]) -> list[tuple[str, int, float, float, float]]:
    """Per kernel class: (class, kernels, compute-bound s, memory-bound s, launch s) at the given
    fractions: where the simulated device time of a pair goes."""
    general, conv = _fractions(pair, efficiency)
    compute = sum(terms[f] / general[f] + terms[f"conv_{f}"] / conv[f] for f in ("fp32", "fp16"))
    compute = compute + sum(terms[f] + terms[f"conv_{f}"] for f in DTYPE_FAMILIES if f not in ("fp32", "fp16"))
    memory = terms["memory"] / efficiency["memory"]
    bound = compute >= memory
    rows = []
    for index, name in enumerate(KERNEL_CLASSES):
        mask = terms["kind"] == index
        if mask.any():
            rows.append((name, int(mask.sum()), float(compute[mask & bound].sum()), float(memory[mask & ~bound].sum()), float(terms["launch"][mask].sum())))
    return rows


def analytic_step(
    terms: dict[str, np.ndarray], pair: dict[str, Any], efficiency: dict[str, float], overhead: dict[str, float], host: dict[str, float] | None = None
) -> float:
    """The same step as `simulate_step` for one GPU running its kernels one after another."""
    general, conv = _fractions(pair, efficiency)
    compute = sum(terms[f] / general[f] + terms[f"conv_{f}"] / conv[f] for f in ("fp32", "fp16"))
    compute = compute + sum(terms[f] + terms[f"conv_{f}"] for f in DTYPE_FAMILIES if f not in ("fp32", "fp16"))
    kernels = np.maximum(compute, terms["memory"] / efficiency["memory"]) + terms["launch"]
    t_host = (host or {}).get(pair["framework"], 0.0)
    if t_host > 0.0:
        order = terms["order"]
        return host_bound_step(kernels[order], terms["host_ops"][order], t_host, int(terms["sync_at"][0])) + overhead.get(pair["framework"], 0.0)
    return float(kernels.sum()) + overhead.get(pair["framework"], 0.0)


def fit_constants(
    fitting: list[tuple[dict[str, Any], dict[str, np.ndarray]]], host: bool = True
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Nelder-Mead on the squared log error of throughput over the fitting pairs: the five
    fractions, TF's per-step overhead and (with `host`) PyTorch's host time per kernel, in us."""
    from scipy.optimize import minimize

    def unpack(x: np.ndarray) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        fractions = np.clip(np.exp(x[:5]), 0.02, 1.0)
        efficiency = dict(zip(FITTED[:5], map(float, fractions)))
        per_kernel = float(np.clip(x[6], 0.0, 500.0)) * 1e-6 if host else 0.0
        return efficiency, {"tensorflow": float(np.clip(x[5], 0.0, 0.05)), "pytorch": 0.0}, {"pytorch": per_kernel, "tensorflow": 0.0}

    def loss(x: np.ndarray) -> float:
        efficiency, overhead, per_kernel = unpack(x)
        return sum(math.log(items_per_step(p) / analytic_step(t, p, efficiency, overhead, per_kernel) / p["published"]) ** 2 for p, t in fitting)

    starts = [np.array([*map(math.log, fractions), overhead, us])
              for *fractions, overhead, us in ((0.7, 0.3, 0.7, 0.3, 0.9, 0.002, 20.0), (0.9, 0.6, 0.6, 0.2, 0.7, 0.004, 60.0),
                                               (0.5, 0.2, 0.5, 0.4, 1.0, 0.0, 5.0), (0.7, 0.45, 0.7, 0.3, 1.0, 0.002, 90.0))]
    best = min((minimize(loss, s, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-8, "maxiter": 6000}) for s in starts), key=lambda r: r.fun)
    return unpack(best.x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", action="store_true", help="datasheet peaks, no host overhead")
    parser.add_argument("--fit", action="store_true", help="refit the constants on the fit=True pairs")
    parser.add_argument("--only", default="", help="run the pairs whose key contains this text")
    parser.add_argument("--pytorch-fusion", choices=("xla-gpu", "eager"), default="eager",
                        help="fusion for the PyTorch rows: eager (default: no library epilogues) or XLA's")
    parser.add_argument("--breakdown", action="store_true", help="print where each pair's simulated device time goes, per kernel class")
    parser.add_argument("--no-host", action="store_true", help="with --fit: no host time per kernel (device time only)")
    parser.add_argument("--hold-out", default="", help="comma-separated pair keys to leave out of --fit (a sensitivity run)")
    parser.add_argument("--out", default="benchmarks/results/fidelity.json")
    args = parser.parse_args(argv)
    held = {k for k in args.hold_out.split(",") if k}
    unknown = held - {p["key"] for p in PAIRS}
    if unknown:
        parser.error(f"--hold-out: unknown pair keys {sorted(unknown)}")
    pairs = [{**p, "fit": p["fit"] and p["key"] not in held} for p in PAIRS if args.only in p["key"]]
    built = []
    for pair in pairs:
        began = time.perf_counter()
        graph, fusion = build(pair, args.pytorch_fusion)
        problem, decisions = problem_for(graph, pair)
        built.append((graph, fusion, problem, decisions, kernel_terms(problem, decisions)))
        print(f"built {pair['key']} ({len(graph)} nodes, {fusion.name}: {fusion.groups} groups) in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    efficiency, overhead, host = dict(EFFICIENCY), dict(STEP_OVERHEAD_S), dict(HOST_PER_KERNEL_S)
    if args.raw:
        efficiency, overhead, host = {k: 1.0 for k in efficiency}, {k: 0.0 for k in overhead}, {k: 0.0 for k in host}
    elif args.fit:
        efficiency, overhead, host = fit_constants([(p, b[4]) for p, b in zip(pairs, built) if p["fit"]], host=not args.no_host)
        print(f"fitted: {efficiency} step overhead {overhead} host per kernel {host}", flush=True)
    rows = []
    for pair, (graph, fusion, problem, decisions, terms) in zip(pairs, built):
        step = simulate_step(problem, decisions, pair, efficiency, overhead, host, terms)
        check = analytic_step(terms, pair, efficiency, overhead, host)
        if not math.isclose(step, check, rel_tol=1e-6):
            raise RuntimeError(f"{pair['key']}: simulator {step} s but the per-kernel sum {check} s (the fit would be wrong)")
        rate = items_per_step(pair) / step
        raw = items_per_step(pair) / simulate_step(problem, decisions, pair, {k: 1.0 for k in efficiency}, {})
        device_only = simulate_step(problem, decisions, pair, efficiency, {})
        rows.append({**pair, "default_fusion": fusion.name, "nodes": len(graph), "kernels": int(terms["launch"].size),
                     "host_ops": int(terms["host_ops"].sum()), "device_step_s": device_only, "host_bound": step - overhead.get(pair["framework"], 0.0) > device_only * 1.01,
                     "simulated_step_s": step, "simulated": rate, "ratio": ratio(rate, pair["published"]),
                     "ratio_datasheet": ratio(raw, pair["published"])})
    if args.breakdown:
        for pair, (_, _, _, _, terms) in zip(pairs, built):
            print(f"\n{pair['key']}: kernel class | kernels | compute-bound ms | memory-bound ms | launch ms")
            for name, count, compute_s, memory_s, launch_s in breakdown(terms, pair, efficiency):
                print(f"  {name:17s} | {count:6d} | {compute_s * 1e3:9.2f} | {memory_s * 1e3:9.2f} | {launch_s * 1e3:7.2f}")
    print(f"\nefficiency (fraction of datasheet peak): {efficiency}; host overhead per step: {overhead}; host per dispatched kernel: {host}")
    print("| pair | model | mode | device | precision | sizes | published | simulated | sim/pub | at datasheet peaks | kernels (host ops) | host-bound | fitted on |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sizes = ", ".join(f"{k}={v}" for k, v in r["sizes"].items() if k in ("batch", "seq_len", "src_len", "seg_len"))
        flag = "" if 0.75 <= r["ratio"] <= 1.33 else " **out**"
        print(f"| {r['key']} | {r['workload']} | {r['mode']} | {r['device']} | {r['precision']} | {sizes} | {r['published']:.0f} {r['unit']} | {r['simulated']:.0f} | {r['ratio']:.2f}{flag} | {r['ratio_datasheet']:.2f} | {r['kernels']} ({r['host_ops']}) | {'yes' if r['host_bound'] else 'no'} | {'yes' if r['fit'] else 'held out'} |")
    summary = {"all": geomean([r["ratio"] for r in rows])}
    for name, chosen in (("fitted", [r for r in rows if r["fit"]]), ("held out", [r for r in rows if not r["fit"]])):
        if chosen:
            summary[name] = geomean([r["ratio"] for r in chosen])
    inside = sum(0.75 <= r["ratio"] <= 1.33 for r in rows)
    print("geometric mean sim/pub: " + ", ".join(f"{k} {v:.3f}" for k, v in summary.items()) + f"; within 0.75-1.33: {inside} of {len(rows)}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"efficiency": efficiency, "step_overhead_s": overhead, "host_per_kernel_s": host, "geomean": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
