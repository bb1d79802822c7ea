"""What a fusion configuration costs on a host that runs every group as one executable call:
counts per configuration, the roofline simulator's step time, and the residual target.

The eighth session's labels showed where a configuration's time goes on this machine: the graphs
run 4-44 kernels of 0.1-1 ms in all, and the roofline simulator's step time is ~97% launch
overhead (kernels x the measured launch) and ranks well (tau 0.92), but its scale is off by a
factor that depends on the graph (0.65-1.03). Per configuration (`config_terms`, one definition
for the dataset and the autotuner's candidates):

- `kernels`: executable calls (fused groups + lone nodes);
- `kernel_inputs`: distinct (kernel, producer node) pairs across kernels (arguments passed
  between calls; graph parameters are not nodes and are the same for every configuration);
- `kernel_outputs`: node outputs that leave their kernel (read by another kernel, or a graph
  output): buffers each call allocates and returns;
- `input_mb`, `output_mb`: their bytes (4 per element; megabytes);
- `fused_groups`: kernels of two or more nodes;
- `layout_kernels`: kernels made only of data-movement ops (constant, reshape, broadcast,
  transpose, slice): a call that does no arithmetic;
- `graph_gflops`: the graph's FLOPs (the same for every configuration: lets a model scale the
  arithmetic the roofline prices at peak);
- `<class>_nodes` (`OP_CLASSES`): the graph's nodes of each op class (reduce, transpose, slice,
  matmul, conv, broadcast/reshape, elementwise; since the tenth session also pool, gather,
  concat/pad), also per graph; `<class>_mb` (`CLASS_MB`, tenth session): the megabytes the
  graph's nodes of each class write, per graph;
- `CONV_TERMS` (eleventh session, from the record's `node_conv_feat`, `conv_features`): grouped
  convolutions (feature_group_count > 1: XLA's CPU runs them on a slow generic loop) counted, the
  MB they write and the multiply-adds (millions) they do. Per graph; 0 on graphs without grouped
  convs, and on files collected before the column existed (read as dense convs: re-featurize
  them with `costmodel merge --refeaturize`). Counts of strided and of dilated convs were tried
  and left out: with one strided dense program (stem) held out, a stride term fitted on the
  strided depthwise one priced it 30-45% off (RESULTS (i), eleventh session);
- `MEASURED_CONV_TERMS` (twelfth session, from the record's `node_conv_time`,
  `cost_model.measure.conv_timing`): the seconds the graph's convs take, each compiled and run
  alone through XLA on the collecting machine, summed over the dense convs and over the grouped
  ones (grouped: feature groups > 1 in `node_conv_feat`; all dense without it). Per graph, like
  the counts: what XLA's shape-dependent conv loops cost, which no count follows. 0 on files
  without the column (`costmodel conv-times DIR` adds it) and for convs not timed (NaN);
  `graph_terms` times a candidate graph's convs once (`conv_timer`), so a model that uses these
  terms needs one measurement per distinct conv of a new graph (~50 ms each, cached per machine);
- `BUFFER_SIZE_TERMS` (sixteenth session, per configuration, from the same arguments and outputs
  as `kernel_inputs` / `kernel_outputs`): what a call's argument or output costs beyond a fixed
  amount as its buffer grows. `LOG_SIZE_TERMS`: the sum over arguments (outputs) of log2 of the
  buffer's elements (a 1-element buffer adds 0), so a fit prices an argument a + b x log2(elements);
  `SIZE_CLASS_TERMS`: the arguments (outputs) whose buffer is over `LARGE_BUFFER_BYTES` (4 KiB, a
  page; fixed before any fit, not tuned). The fifteenth session's worst held-out graphs miss in
  opposite directions at the same argument / output ratio, one with tiny buffers (xent@1, 64 B per
  argument) and one with larger ones (clip_loss@2); these terms let the per-argument cost differ.
  Not in the shipped form (`SHIPPED_TERMS`; RESULTS (i), sixteenth session);
- `CALL_GROWTH_TERMS` (twenty-first session, per configuration): `kernels_pow1_5`, the calls to the
  power 1.5, so a fit can price a call higher the more calls the configuration makes. Held out one
  program at a time, the per-graph levels of the shipped form fell with the graph's call count
  (Spearman -0.32 over 96 graphs: many-call graphs under-predicted, few-call ones over); the sign
  fits a cost per call that grows with how many other executables a step interleaves (their code
  and buffers evicting each other). Not in `SHIPPED_TERMS`: a model names it (`--additive-terms`);
- `roofline_s`: the roofline simulator's step time of the configuration on the host (the
  collector stores it in `meta["roofline_s"]`; `roofline_step_times` computes it for new ones).

The residual target of a learned correction to the simulator: log(runtime / roofline_s)
(`residual_target`), back to seconds with `residual_seconds`.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Sequence

import numpy as np

from cost_model.learned.features import opcode_id
from cost_model.learned.tpugraphs import DatasetError, KernelRecord

__all__ = ["BASE_TERMS", "BUFFER_SIZE_TERMS", "CALL_GROWTH_TERMS", "CLASS_MB", "CONV_TERMS", "LARGE_BUFFER_BYTES", "LOG_SIZE_TERMS", "MEASURED_CONV_TERMS", "OP_CLASSES", "S9_TERMS",
           "S10_TERMS", "S11_TERMS", "SHIPPED_TERMS", "SIZE_CLASS_TERMS", "TERM_NAMES", "config_terms", "graph_terms", "record_groups", "record_terms", "residual_seconds", "residual_target",
           "roofline_step_times"]

# Op classes whose nodes are counted (per graph: the same for every configuration): what an op
# costs inside XLA's loops at these sizes beyond its FLOPs (ninth session: lowered the held-out MAPE).
# The tenth session's programs added three classes no graph of the first fifteen has (pooling
# windows, gathers, pads / concatenations); a graph without them counts 0, so its terms are as before.
OP_CLASSES = {"reduce_nodes": ("reduce",), "transpose_nodes": ("transpose",), "slice_nodes": ("slice",), "matmul_nodes": ("matmul",),
              "conv_nodes": ("conv",), "broadcast_reshape_nodes": ("broadcast", "reshape"), "elementwise_nodes": ("binary", "unary"),
              "pool_nodes": ("pool",), "gather_nodes": ("gather", "scatter", "dynamic_slice", "dynamic_update_slice"),
              "concat_pad_nodes": ("concat", "pad")}
# Megabytes the graph's nodes of each class write (4 bytes per output element, per graph): the
# tenth session's terms, a cost per byte an op class touches beside its per-node cost (held out,
# one program at a time, 5.2% -> 4.7% on the first fifteen programs; RESULTS (i), tenth session).
CLASS_MB = tuple(name.replace("_nodes", "_mb") for name in OP_CLASSES)
# Grouped convolutions (eleventh session; from `conv_features.CONV_FEATURE_NAMES`).
CONV_TERMS = ("grouped_conv_nodes", "grouped_conv_mb", "grouped_conv_mmacs")
# Measured conv seconds (twelfth session; from the record's `node_conv_time`, `conv_timing`).
MEASURED_CONV_TERMS = ("measured_dense_conv_s", "measured_grouped_conv_s")
# Per-argument / per-output cost by buffer size (sixteenth session; per configuration).
LOG_SIZE_TERMS = ("kernel_input_log2_elements", "kernel_output_log2_elements")
SIZE_CLASS_TERMS = ("large_kernel_inputs", "large_kernel_outputs")
BUFFER_SIZE_TERMS = LOG_SIZE_TERMS + SIZE_CLASS_TERMS
# Calls priced superlinearly (twenty-first session; per configuration).
CALL_GROWTH_TERMS = ("kernels_pow1_5",)
LARGE_BUFFER_BYTES = 4096  # a page: the size class boundary of `SIZE_CLASS_TERMS`
BASE_TERMS = ("kernels", "kernel_inputs", "kernel_outputs", "input_mb", "output_mb", "fused_groups", "layout_kernels", "graph_gflops", "roofline_s")
TERM_NAMES = BASE_TERMS[:-1] + tuple(OP_CLASSES) + CLASS_MB + CONV_TERMS + MEASURED_CONV_TERMS + BUFFER_SIZE_TERMS + CALL_GROWTH_TERMS + ("roofline_s",)
# The default form (`AdditiveFusionModel`'s): the twelfth session's terms, without the buffer size and call growth terms.
SHIPPED_TERMS = tuple(t for t in TERM_NAMES if t not in BUFFER_SIZE_TERMS + CALL_GROWTH_TERMS)
# The eleventh session's terms (the shipped model's form until the twelfth session): without the measured convs.
S11_TERMS = tuple(t for t in SHIPPED_TERMS if t not in MEASURED_CONV_TERMS)
# The tenth session's terms (the shipped model's form until the eleventh session): without CONV_TERMS.
S10_TERMS = tuple(t for t in SHIPPED_TERMS if t not in CONV_TERMS + MEASURED_CONV_TERMS)
# The ninth session's terms (the shipped model's until the tenth session): without the three new classes.
S9_TERMS = tuple(t for t in SHIPPED_TERMS if t not in ("pool_nodes", "gather_nodes", "concat_pad_nodes") + CLASS_MB + CONV_TERMS + MEASURED_CONV_TERMS)
logger = logging.getLogger(__name__)
_CONV_OPCODE = opcode_id("conv")
_WARNED: set[str] = set()  # files already warned about (once per process)
_WARNED_UNTIMED: list[str] = []  # the first file whose convs had no measured time (one warning per process)
_LAYOUT_OPS = ("constant", "reshape", "broadcast", "transpose", "slice")
_ELEMENTS = 6  # node_features: log2 of the output's element count
_FLOPS = -1  # node_features: log2 of the node's FLOPs (0: none)


def residual_target(runtime: np.ndarray, roofline_s: np.ndarray) -> np.ndarray:
    """log(runtime / roofline_s): what a model on top of the simulator learns."""
    runtime, roofline_s = np.asarray(runtime, dtype=np.float64), np.asarray(roofline_s, dtype=np.float64)
    if (runtime <= 0).any() or (roofline_s <= 0).any():
        raise ValueError("runtimes and roofline times must be positive")
    return np.log(runtime) - np.log(roofline_s)


def residual_seconds(residual: np.ndarray, roofline_s: np.ndarray) -> np.ndarray:
    """The inverse of `residual_target`: roofline_s x exp(residual)."""
    return np.asarray(roofline_s, dtype=np.float64) * np.exp(np.asarray(residual, dtype=np.float64))


def _conv_terms(node_conv_feat: np.ndarray | None, elements: np.ndarray) -> list[float]:
    """The `CONV_TERMS` of a graph from its (N, K) `conv_features` rows (None: no conv attributes
    known, every term 0)."""
    from cost_model.learned.conv_features import CONV_FEATURE_NAMES

    if node_conv_feat is None:
        return [0.0] * len(CONV_TERMS)
    conv = np.asarray(node_conv_feat, dtype=np.float64)
    if conv.shape != (len(elements), len(CONV_FEATURE_NAMES)):
        raise ValueError(f"node_conv_feat has shape {conv.shape}, want ({len(elements)}, {len(CONV_FEATURE_NAMES)})")
    col = {name: conv[:, i] for i, name in enumerate(CONV_FEATURE_NAMES)}
    grouped = col["feature_groups"] > 1
    return [float(grouped.sum()), 4e-6 * float(elements[grouped].sum()), float(col["mmacs"][grouped].sum())]


def _measured_conv_terms(node_conv_time: np.ndarray | None, node_conv_feat: np.ndarray | None, n: int) -> list[float]:
    """The `MEASURED_CONV_TERMS` of a graph: the (N,) seconds of each conv alone summed over dense
    and over grouped convs (None: not measured, both 0; NaN entries, convs not timed, count 0)."""
    from cost_model.learned.conv_features import CONV_FEATURE_NAMES

    if node_conv_time is None:
        return [0.0] * len(MEASURED_CONV_TERMS)
    seconds = np.asarray(node_conv_time, dtype=np.float64)
    if seconds.shape != (n,):
        raise ValueError(f"node_conv_time has shape {seconds.shape}, want ({n},)")
    seconds = np.where(np.isnan(seconds), 0.0, seconds)
    grouped = np.zeros(n, dtype=bool) if node_conv_feat is None else np.asarray(node_conv_feat)[:, CONV_FEATURE_NAMES.index("feature_groups")] > 1
    return [float(seconds[~grouped].sum()), float(seconds[grouped].sum())]


def _graph_parts(node_feat: np.ndarray, node_opcode: np.ndarray, node_conv_feat: np.ndarray | None = None,
                 node_conv_time: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float, list[float]]:
    """What `config_terms` reads of the graph alone, the same under every grouping: output
    elements per node, the layout-only flags, the graph's GFLOPs, the `OP_CLASSES` node counts
    followed by the `CLASS_MB` megabytes, the `CONV_TERMS` (from `node_conv_feat`) and the
    `MEASURED_CONV_TERMS` (from `node_conv_time`)."""
    from cost_model.learned.features import OPCODES

    elements = np.exp2(np.asarray(node_feat, dtype=np.float64)[:, _ELEMENTS])
    names = [OPCODES[o] if 0 <= o < len(OPCODES) else "" for o in np.asarray(node_opcode).tolist()]
    layout = np.array([name in _LAYOUT_OPS for name in names], dtype=bool)
    log_flops = np.asarray(node_feat, dtype=np.float64)[:, _FLOPS]
    gflops = 1e-9 * np.where(log_flops > 0, np.exp2(log_flops), 0.0).sum()
    classes = [sum(name in ops for name in names) for ops in OP_CLASSES.values()]
    classes += [4e-6 * float(sum(e for e, name in zip(elements, names) if name in ops)) for ops in OP_CLASSES.values()]  # CLASS_MB
    classes += _conv_terms(node_conv_feat, elements)
    classes += _measured_conv_terms(node_conv_time, node_conv_feat, len(elements))
    return elements, layout, float(gflops), classes


def config_terms(
    node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray, groups: np.ndarray, *, graph_parts: tuple | None = None,
    node_conv_feat: np.ndarray | None = None, node_conv_time: np.ndarray | None = None,
) -> np.ndarray:
    """The `TERM_NAMES` but roofline_s of one configuration. `edge_index`: (E, 2)
    rows [consumer, producer] (the TpuGraphs convention); `groups[i]`: node i's group, -1 alone.
    `graph_parts`: `_graph_parts` of the graph, when the caller scores many groupings of it;
    `node_conv_feat`: the graph's `conv_features` rows (None: convs priced as dense);
    `node_conv_time`: each node's conv time alone (None: the measured terms are 0)."""
    n = len(node_feat)
    groups = np.asarray(groups, dtype=np.int64)
    if groups.shape != (n,):
        raise ValueError(f"groups has shape {groups.shape}, the graph has {n} nodes")
    kernel = np.where(groups >= 0, groups, -1 - np.arange(n))
    _, kernel = np.unique(kernel, return_inverse=True)
    count = int(kernel.max()) + 1 if n else 0
    elements, layout, gflops, classes = graph_parts if graph_parts is not None else _graph_parts(node_feat, node_opcode, node_conv_feat, node_conv_time)
    edges = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    crossing = edges[kernel[edges[:, 0]] != kernel[edges[:, 1]]] if edges.size else edges
    pairs = np.unique(np.stack([kernel[crossing[:, 0]], crossing[:, 1]], axis=1), axis=0) if crossing.size else np.zeros((0, 2), dtype=np.int64)
    leaves = np.zeros(n, dtype=bool)
    leaves[crossing[:, 1]] = True
    consumed = np.zeros(n, dtype=bool)
    consumed[edges[:, 1]] = True
    leaves |= ~consumed  # graph outputs
    sizes = np.bincount(kernel, minlength=count)
    arithmetic = np.bincount(kernel, weights=(~layout).astype(np.float64), minlength=count)
    arguments, outputs = elements[pairs[:, 1]], elements[leaves]
    sizes_terms = [np.log2(np.maximum(arguments, 1.0)).sum(), np.log2(np.maximum(outputs, 1.0)).sum(),  # LOG_SIZE_TERMS
                   (4 * arguments > LARGE_BUFFER_BYTES).sum(), (4 * outputs > LARGE_BUFFER_BYTES).sum()]  # SIZE_CLASS_TERMS
    return np.array([count, len(pairs), leaves.sum(), 4e-6 * arguments.sum(), 4e-6 * outputs.sum(),
                     (sizes > 1).sum(), (arithmetic == 0).sum(), gflops, *classes, *sizes_terms, count**1.5], dtype=np.float64)


def record_groups(record: KernelRecord) -> list[np.ndarray]:
    """Every configuration's groups (its `config_text`: the group id of each node, JSON)."""
    if len(record.config_text) != record.num_configs:
        raise DatasetError("a fusion record needs config_text (the group of every node per configuration; files of "
                           "`costmodel collect --task fusion` have it)", file=record.path)
    try:
        return [np.asarray(json.loads(text), dtype=np.int64) for text in record.config_text]
    except (ValueError, TypeError) as error:
        raise DatasetError(f"config_text is not a JSON list of group ids: {error}", file=record.path) from error


def record_terms(record: KernelRecord) -> np.ndarray:
    """(C, len(TERM_NAMES)) of a fusion dataset file (roofline_s from `meta["roofline_s"]`)."""
    roofline = record.meta.get("roofline_s")
    if roofline is None or len(roofline) != record.num_configs:
        raise DatasetError("meta.roofline_s (the simulator's step time per configuration) is missing or has the wrong length", file=record.path)
    if record.node_conv_feat is None and (np.asarray(record.node_opcode) == _CONV_OPCODE).any() and record.path not in _WARNED:
        _WARNED.add(record.path)
        logger.warning("%s: conv nodes but no node_conv_feat (collected before the eleventh session): priced as dense convs; "
                       "`costmodel merge --refeaturize` adds the column", record.path or record.name)
    has_conv = (np.asarray(record.node_opcode) == _CONV_OPCODE).any()
    untimed = has_conv and (record.node_conv_time is None or np.isnan(record.node_conv_time).any())
    if untimed and not _WARNED_UNTIMED:
        _WARNED_UNTIMED.append(record.path)
        logger.warning("%s (and maybe more files): conv nodes without a measured time alone (node_conv_time): the measured conv terms "
                       "count them 0; `costmodel conv-times DIR` adds the column", record.path or record.name)
    parts = _graph_parts(record.node_feat, record.node_opcode, record.node_conv_feat, record.node_conv_time)
    rows = [config_terms(record.node_feat, record.node_opcode, record.edge_index, g, graph_parts=parts) for g in record_groups(record)]
    return np.concatenate([np.stack(rows), np.asarray(roofline, dtype=np.float64)[:, None]], axis=1)


def roofline_step_times(graph: Any, groups: Sequence[np.ndarray], *, problem: Any = None) -> np.ndarray:
    """The roofline simulator's step time of `graph` (all on one host device, as the fusion
    collector simulates it) under each grouping. One device runs its kernels one after another
    with nothing to transfer, so the step time is the sum of the kernels' durations."""
    from cost_model.simulator import SimulationProblem
    from cost_model.simulator.tasks import kernel_durations

    if problem is None:
        from cost_model.profiling.host import host_topology

        problem = SimulationProblem.from_graph(graph, host_topology(1))
    device = np.zeros(problem.num_nodes, dtype=np.int64)
    return np.array([float(kernel_durations(problem, device, np.asarray(g, dtype=np.int64))[3].sum()) for g in groups])


def graph_terms(nodes: Sequence[Any], groups: Sequence[np.ndarray], *, graph: Any = None, conv_timer: Any = None) -> np.ndarray:
    """(C, len(TERM_NAMES)) for candidate groupings of a graph (`nodes` in `node_order`): the
    features a model trained on `record_terms` reads, with the roofline computed here.
    `conv_timer` (a `conv_timing.ConvTimer`): the graph's convs are timed alone once (not per
    candidate) for the `MEASURED_CONV_TERMS`; None leaves those terms 0."""
    from cost_model.learned.conv_features import fusion_conv_features
    from cost_model.learned.fusion_features import fusion_graph_arrays

    graph = graph if graph is not None else nodes[0].graph
    feats, opcodes, edges = fusion_graph_arrays(nodes)
    conv_time = conv_timer.node_times(nodes) if conv_timer is not None else None
    parts = _graph_parts(feats, opcodes, fusion_conv_features(nodes), conv_time)
    rows = np.stack([config_terms(feats, opcodes, edges, g, graph_parts=parts) for g in groups]) if len(groups) else np.zeros((0, len(TERM_NAMES) - 1))
    return np.concatenate([rows, roofline_step_times(graph, groups)[:, None]], axis=1)
