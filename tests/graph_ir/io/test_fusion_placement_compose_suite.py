"""Fusion then placement, and placement then fusion, on the workload suite and on the HLO files of
the shared test data: the graph verifies, the simulator runs it, it exports, and where XLA on
the CPU can execute the module, the one exported with the fusions materialized computes what the
original computes (seeded random inputs; fusion-first order only, see `_check_all_orders`).

Fusions that get executed come from the `fuse` pass with a random size limit (XLA-legal by
construction); random legal groupings from `FusionGroups` are checked for validity and
simulation only. Placements are random devices or a placement method. Executed modules have
their fused groups outlined and called (`fusion_kinds="call"`: jaxlib compiles through MLIR,
which drops the layouts of pre-made fusions, and XLA:CPU then aborts, see
`graph_ir.io.hlo_export`); the same module with kLoop fusions, as files are written, is read
back by XLA's parser. The CI tier runs two small workloads and two HLO files; `--runslow`
sweeps every workload (both modes, small sizes) and every HLO file that imports, executing
each where XLA on this CPU runs the original. TensorFlow is imported at collection: the
HLO proto schema ships with it, and importing it after onnxruntime ran aborts the process.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jaxlib")
pytest.importorskip("tensorflow", reason="the HLO proto schema ships with the TensorFlow wheel")

import graph_ir  # noqa: E402
from cost_model.decisions import Decisions  # noqa: E402
from cost_model.devices import load_topology  # noqa: E402
from cost_model.simulator import SimulationProblem, simulate  # noqa: E402
from graph_ir.errors import CompilerOptError  # noqa: E402
from graph_ir.types import TensorType  # noqa: E402
from passes import run_pipeline  # noqa: E402
from passes.fusion import Fuse  # noqa: E402
from tests.fusion_helpers import random_legal_fusion  # noqa: E402

TOPOLOGY = "4xV100"
# Normwise relative tolerance for f32 outputs (see `_assert_same`).
RTOL = 1e-4
METHODS = ["random", "m-etf", "m-sct", "critical-path", "metis", "sa"]
# Above this many nodes an HLO file gets random placements only and is not executed: XLA's
# test module written to be slow to compile (16.8k instructions) and m-etf on it take minutes.
LARGE_NODES = 5000
# Nor is a module whose parameters alone exceed this (a whole 2B-parameter model).
EXECUTE_BYTES = 256 << 20

# Sizes that keep one step of each workload well under a second of XLA CPU time.
SMALL_SIZES: dict[str, dict[str, int]] = {
    "rnnlm-2": {"hidden": 16, "vocab": 32, "steps": 3, "batch": 2},
    "rnnlm-4": {"hidden": 16, "vocab": 32, "steps": 3, "batch": 2},
    "rnnlm-8": {"hidden": 16, "vocab": 32, "steps": 2, "batch": 2},
    "gnmt-2": {"hidden": 16, "vocab": 32, "src_len": 3, "tgt_len": 3, "batch": 2},
    "gnmt-4": {"hidden": 16, "vocab": 32, "src_len": 3, "tgt_len": 3, "batch": 2},
    "gnmt-8": {"hidden": 16, "vocab": 32, "src_len": 2, "tgt_len": 2, "batch": 2},
    "transformer-xl": {"layers": 2, "d_model": 16, "heads": 2, "d_ff": 32, "seg_len": 4, "mem_len": 4, "vocab": 32, "batch": 2},
    "resnet-50": {"batch": 1, "image_size": 32, "classes": 10},
    "nasnet": {"cells_per_stage": 1, "filters": 8, "image_size": 16, "classes": 10, "batch": 2},
    "amoebanet": {"cells_per_stage": 1, "filters": 8, "image_size": 16, "classes": 10, "batch": 2},
    "wavenet-2x18": {"residual_channels": 8, "skip_channels": 16, "classes": 16, "length": 64, "batch": 1},
    "wavenet-4x36": {"residual_channels": 8, "skip_channels": 16, "classes": 16, "length": 64, "batch": 1},
    "bert-base": {"layers": 2, "hidden": 16, "heads": 2, "d_ff": 32, "vocab": 32, "seq_len": 8, "masked": 2, "batch": 2},
    "inception-v3": {"batch": 1, "image_size": 75, "classes": 10},
    "densenet-121": {"batch": 1, "image_size": 32},
}


def _random_inputs(graph: graph_ir.Graph, seed: int) -> list[np.ndarray] | None:
    """Seeded inputs for the graph's parameters; integers in {0, 1} (valid token ids and
    indices for every workload); None when a parameter is not a static tensor."""
    rng = np.random.default_rng(seed)
    args = []
    for value in graph.inputs:
        shape = value.shape
        if value.dtype is None or shape is None or not shape.is_static:
            return None
        dtype = value.dtype.numpy
        if dtype == np.bool_:
            args.append(rng.integers(0, 2, tuple(shape)).astype(bool))
        elif np.issubdtype(dtype, np.integer):
            args.append(rng.integers(0, 2, tuple(shape)).astype(dtype))
        else:  # float types, bfloat16 included
            args.append(rng.standard_normal(tuple(shape)).astype(np.float32).astype(dtype))
    return args


def _run(graph: graph_ir.Graph, args: list[np.ndarray]) -> list[np.ndarray]:
    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.xla_bridge import run_hlo_module

    return run_hlo_module(export_hlo_proto(graph, materialize_fusions=True, fusion_kinds="call"), *args)


def _reference(graph: graph_ir.Graph) -> tuple[list[np.ndarray], list[np.ndarray | None]] | None:
    """(inputs, outputs) of the undecided graph on XLA:CPU, or None when XLA cannot run it here
    (a GPU custom call, a host-offload annotation...). The original runs twice: an output that
    differs between its own runs (an RNG seed or state) is None, not compared."""
    args = _random_inputs(graph, 0)
    if args is None:
        return None
    try:
        first, second = _run(graph, args), _run(graph, args)
    except Exception:  # noqa: BLE001 - "cannot be executed here" is the answer
        return None
    return args, [a if np.array_equal(a, b, equal_nan=True) else None for a, b in zip(first, second)]


def _place(graph: graph_ir.Graph, method: str, rng: random.Random) -> None:
    if method == "random":
        for node in graph:
            node.device = f"gpu{rng.randrange(3)}"
    else:
        # A short search: the sweep checks that the placement composes, not its quality.
        budget = ",budget=50" if method == "sa" else ""
        run_pipeline(graph, f"{method}{{devices={TOPOLOGY},seed={rng.randrange(100)}{budget}}}")


def _compose(graph: graph_ir.Graph, method: str, fuse_first: bool, seed: int, *, xla_legal: bool) -> graph_ir.Graph:
    rng = random.Random(seed)
    graph = graph.clone()
    fuse = (lambda: Fuse(max_nodes=rng.choice([2, 4, 8, 32]))(graph)) if xla_legal else (lambda: random_legal_fusion(graph, rng, rng.choice([2, 4, 32])))
    steps = [fuse, lambda: _place(graph, method, rng)]
    for step in steps if fuse_first else steps[::-1]:
        step()
    graph.verify()
    topology = load_topology(TOPOLOGY)
    result = simulate(SimulationProblem.from_graph(graph, topology), Decisions.from_graph(graph, topology))
    # Zero only for a module that computes nothing (XLA's custom_call.hlo returns its parameters).
    assert np.isfinite(result.step_time_s) and result.step_time_s >= 0
    return graph


def _assert_same(got: list[np.ndarray], expected: list[np.ndarray | None], where: str) -> None:
    """Normwise: the largest error at most `RTOL` of the largest magnitude (2e-2 for 16-bit
    outputs). XLA compiles a fused module differently (other conv algorithms, other reduction
    orders): through wavenet's 18 layers that moves outputs of magnitude 100 by 4e-3."""
    assert len(got) == len(expected), where
    for g, e in zip(got, expected):
        if e is None:  # not deterministic in the original either
            continue
        wide = np.complex128 if np.iscomplexobj(e) else np.float64  # FFT outputs stay complex
        g64, e64 = np.asarray(g, wide), np.asarray(e, wide)
        assert g64.shape == e64.shape, where
        tolerance = 2e-2 if np.asarray(e).dtype.itemsize <= 2 else RTOL
        finite = np.isfinite(e64)
        assert np.array_equal(finite, np.isfinite(g64)), f"{where}: non-finite outputs differ"
        if finite.any():
            scale = max(1.0, float(np.max(np.abs(e64[finite]))))
            error = float(np.max(np.abs(g64[finite] - e64[finite])))
            assert error <= tolerance * scale, f"{where}: max error {error:.3g} > {tolerance:g} x {scale:.3g}"


def _check_all_orders(graph: graph_ir.Graph, methods: list[str], label: str, *, execute: bool, seed: int = 0) -> int:
    """Every method in both orders; returns how many results were executed and compared."""
    from graph_ir.io.hlo_export import export_hlo_text
    from graph_ir.io.xla_bridge import parse_hlo_text

    reference = _reference(graph) if execute and _is_hlo(graph) else None
    executed = 0
    for method in methods:
        for fuse_first in (True, False):
            where = f"{label}: {'fuse, ' + method if fuse_first else method + ', fuse'}"
            _compose(graph, method, fuse_first, seed, xla_legal=False)  # any legal grouping: valid and simulated
            decided = _compose(graph, method, fuse_first, seed, xla_legal=True)
            if _is_hlo(graph):
                parse_hlo_text(export_hlo_text(decided, materialize_fusions=True))
            if reference is not None:
                args, expected = reference
                _assert_same(_run(decided, args), expected, where)
                executed += 1
    return executed


def _workload(name: str, mode: str) -> graph_ir.Graph:
    from compiler_opt.workloads import build_workload

    return build_workload(name, mode, **SMALL_SIZES[name])


def _is_hlo(graph: graph_ir.Graph) -> bool:
    return any(node.domain == "hlo" for node in graph)


# -- CI tier ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["rnnlm-2", "wavenet-2x18"])
def test_fusion_and_placement_compose_on_small_workloads(name):
    graph = _workload(name, "inference")
    assert _is_hlo(graph)
    assert _check_all_orders(graph, ["random", "m-etf"], name, execute=True) == 4


HLO_CI = [
    "openxla-xla__xla__backends__cpu__benchmarks__hlo__mha_block_1x12x128x64_bf16.hlo",
    "openxla-xla__xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo",
]


@pytest.mark.parametrize("name", HLO_CI)
def test_fusion_and_placement_compose_on_hlo_testdata(shared_testdata, name):
    path = shared_testdata / "external" / "hlo" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in the shared test data")
    graph = graph_ir.load(str(path))
    _check_all_orders(graph, ["random", "m-etf"], name, execute=False)


# -- slow tier: the full sweep ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["inference", "train"])
@pytest.mark.parametrize("name", sorted(SMALL_SIZES))
def test_fusion_and_placement_compose_on_every_workload(name, mode):
    from compiler_opt.workloads import get_workload

    if mode not in get_workload(name).modes:
        pytest.skip(f"{name} has no {mode} mode")
    graph = _workload(name, mode)
    executed = _check_all_orders(graph, METHODS, f"{name}/{mode}", execute=True)
    if _is_hlo(graph):
        assert executed == 2 * len(METHODS), f"{name}/{mode}: XLA could not run the original"


def _hlo_files() -> list[Path]:
    folder = Path(__file__).resolve().parents[3].parent / "shared" / "testdata" / "external" / "hlo"
    return sorted(folder.glob("*.hlo")) if folder.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("path", _hlo_files(), ids=lambda p: p.name[-60:])
def test_fusion_and_placement_compose_on_every_hlo_file(path):
    try:
        graph = graph_ir.load(str(path))
    except CompilerOptError as err:
        pytest.skip(f"the importer refuses it: {str(err)[:120]}")
    input_bytes = sum(v.type.nbytes() or 0 for v in graph.inputs if isinstance(v.type, TensorType))
    if sum(1 for _ in graph.all_nodes()) > LARGE_NODES:  # large_loop_slow_compile_time: 16.8k nodes
        _check_all_orders(graph, ["random"], path.name, execute=False)
    else:  # gemma4_2b's 2B bf16 parameters: executing it 14 times here ran out of memory
        _check_all_orders(graph, ["random", "m-etf", "critical-path"], path.name, execute=input_bytes <= EXECUTE_BYTES)
