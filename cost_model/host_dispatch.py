"""Host-side launch serialization of an eager framework: when the CPU, not the GPU, sets the pace.

PyTorch in eager mode issues every kernel from a Python thread: each op costs host time (Python,
the dispatcher, autograd bookkeeping, the CUDA launch call) before the GPU can start it. The
launch is asynchronous, so the host runs ahead while kernels are long and the GPU waits on the
host while they are short. On one GPU stream with kernels issued in order, kernel k (duration
d_k) is issued at H_k = t_host * (host ops up to and including k) and runs from
max(H_k, end of kernel k-1):

    end_K = max over j of (H_j + sum_{k >= j} d_k)       (and at least sum d_k)

`host_bound_step` evaluates that closed form with numpy; with a sync point (the training loop
reads the loss or AMP's overflow flag on the host after the backward pass, as DeepLearningExamples'
PyTorch trainers do) the optimizer's kernels are issued only once the GPU has drained, so that
phase adds its own bound (`optimizer_last` puts them last). `eager_host_ops` says which kernels of an
eager-fused graph (`passes.fusion.eager`) the framework dispatches itself: every kernel that does
work, except the per-step GEMMs of a recurrence and the pointwise kernels next to them, which
cuDNN's RNN call launches from C++ (one host op per call instead). The simulator's kernels
times stay device time; this is the host bound on top of them, used by
`benchmarks/bench_fidelity.py` for the PyTorch rows (per-kernel host time fitted there).

Evidence that the bound matters (NVIDIA DeepLearningExamples, Transformer-XL base, PyTorch 20.06,
1x V100 AMP): 3,072 tokens per step take 115 ms at batch 16 and 6,144 take 167 ms at batch 32,
i.e. ~63 ms of every step do not scale with the batch; the A100 (2-3x the V100's math) runs
batch 32 in 102 ms.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from graph_ir.op_kinds import OpKind

if TYPE_CHECKING:
    from cost_model.simulator.problem import SimulationProblem

__all__ = ["eager_host_ops", "host_bound_step", "optimizer_last"]

logger = logging.getLogger(__name__)

_RECURRENT_META = "eager_recurrent_gemm"  # passes.fusion.eager.RECURRENT_META (no import: layering)
_HEAVY = (OpKind.MATMUL, OpKind.CONV, OpKind.CONV_TRANSPOSE)


def _root(value):
    """The value a chain of views and casts starts from (a weight behind its transposes)."""
    while value.producer is not None and value.producer.kind in (OpKind.TRANSPOSE, OpKind.RESHAPE, OpKind.CAST) and value.producer.inputs:
        value = value.producer.inputs[0]
    return value


def _call_key(node, kernel: int) -> tuple:
    for slot, value in enumerate(node.inputs):
        if value is None:
            continue
        root = _root(value)
        if root.producer is None:
            dims = node.attr("dot_dimension_numbers")
            return (id(root), slot, value is not root, str(dims), node.outputs[0].type.shape)
    return (kernel,)


def host_bound_step(durations: np.ndarray, host_ops: np.ndarray, t_host: float, sync_at: int | None = None) -> float:
    """Seconds from the first issue to the end of the last kernel: `durations` and `host_ops`
    (host ops issued for each kernel, 0 for one a library launches) in issue order. `sync_at`:
    the host waits for the GPU to finish kernels [0, sync_at) before issuing the rest (a
    `loss.item()` or AMP overflow check between the backward pass and the optimizer)."""
    if sync_at is not None and 0 < sync_at < len(durations):
        return (host_bound_step(durations[:sync_at], host_ops[:sync_at], t_host)
                + host_bound_step(durations[sync_at:], host_ops[sync_at:], t_host))
    durations = np.asarray(durations, dtype=np.float64)
    host_ops = np.asarray(host_ops, dtype=np.float64)
    if durations.shape != host_ops.shape:
        raise ValueError(f"durations {durations.shape} and host_ops {host_ops.shape} differ")
    if t_host < 0:
        raise ValueError(f"host time per op must be >= 0, got {t_host}")
    if durations.size == 0:
        return 0.0
    issued = np.cumsum(host_ops) * t_host
    remaining = np.cumsum(durations[::-1])[::-1]  # sum_{k >= j} d_k
    return float(max(remaining[0], np.max(issued + remaining)))


def optimizer_last(order: np.ndarray, optimizer: np.ndarray) -> tuple[np.ndarray, int]:
    """The issue order with the optimizer's kernels (bool per kernel) moved after all others,
    each part in its given order, and the index of the first optimizer kernel (the sync point).
    Valid on one stream: optimizer kernels feed only the step's results."""
    order = np.asarray(order)
    late = np.asarray(optimizer, dtype=bool)[order]
    return np.concatenate([order[~late], order[late]]), int((~late).sum())


def eager_host_ops(problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_first: np.ndarray, works: np.ndarray) -> np.ndarray:
    """Host ops per kernel (int array, kernel index order): 1 for each kernel that does work
    (`works`), 0 for a recurrence's per-step GEMMs and the non-library kernels that read or feed
    them directly (cuDNN's RNN call launches those), plus one op per recurrence weight and
    direction, charged to its first kernel."""
    num_kernels = int(kernel_first.shape[0])
    ops = np.asarray(works, dtype=np.int64).copy()
    recurrent = np.zeros(num_kernels, dtype=bool)
    heavy = np.zeros(num_kernels, dtype=bool)
    calls: dict[tuple[int, bool], int] = {}
    for i, node in enumerate(problem.nodes):
        k = int(kernel_of_node[i])
        if node.kind in _HEAVY:
            heavy[k] = True
        if node.meta.get(_RECURRENT_META):
            recurrent[k] = True
            # One library call per weight and pass: the forward (h @ W) and backward (dh = dg @ W^T)
            # products read the weight differently (operand slot, a transpose, contraction dims).
            calls.setdefault(_call_key(node, k), k)
    if not recurrent.any():
        return ops
    src, dst = problem.node_edges()
    ks, kd = kernel_of_node[src], kernel_of_node[dst]
    cross = ks != kd
    neighbours = np.zeros(num_kernels, dtype=bool)
    neighbours[kd[cross & recurrent[ks]]] = True  # reads a recurrent GEMM (gate math)
    neighbours[ks[cross & recurrent[kd]]] = True  # feeds one (gate gradients)
    internal = recurrent | (neighbours & ~heavy)
    ops[internal] = 0
    for k in calls.values():
        ops[k] += 1
    return ops
