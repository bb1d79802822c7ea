"""Simulator speed: problem build and simulate times from 1k to 100k nodes, and simulations/s.

Graphs are random layered CNN-like DAGs with typed values (see `layered_dag`): stages of
convolutions, batch norms, activations, adds and pools over [batch, C, H, W] activations, with
skip connections to the last few layers. Decisions: the graph cut into contiguous chunks over the
GPUs of `--devices` (a pipeline split), random priorities, and, for the "fused" variant, chains of
elementwise ops fused into their producer's kernel.

    python benchmarks/bench_simulator.py            # table + benchmarks/results/bench_simulator.json
    python benchmarks/bench_simulator.py --quick    # smaller sizes, fewer repeats

The simulations/s row uses the real InceptionV3 training-step graph of the workload suite
(`compiler_opt.workloads`, `inception-v3:train`, ~9.5k nodes; `--target` picks another workload,
`--target synthetic` a 9,300-node layered DAG).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from cost_model.decisions import Decisions
from cost_model.devices import load_topology
from cost_model.simulator import SimulationProblem, simulate, throughput_objective
from graph_ir import DType, Graph, LazyTensor, TensorType, Value

F32 = DType.FLOAT32
ELEMENTWISE = {"Relu", "Sigmoid", "Add", "Mul", "BatchNormalization"}
_OPS = ("Conv3", "Conv1", "BatchNormalization", "Relu", "Sigmoid", "Add", "Mul", "MaxPool")
_WEIGHTS = (0.18, 0.14, 0.16, 0.2, 0.05, 0.15, 0.05, 0.07)


def _const(graph: Graph, name: str, shape: tuple[int, ...]) -> Value:
    # Lazy: the simulator needs sizes, not data.
    return graph.add_initializer(Value(name, const=LazyTensor(F32, shape, lambda s=shape: np.zeros(s, np.float32))))


def layered_dag(num_nodes: int, *, seed: int = 0, batch: int = 32, stages: int = 4, max_width: int = 6) -> Graph:
    """A random layered DAG of exactly `num_nodes` typed nodes (topologically ordered)."""
    rng = np.random.default_rng(seed)
    graph = Graph(f"layered{num_nodes}")
    image = graph.add_input(Value("image", TensorType(F32, (batch, 3, 112, 112))))
    made = 0
    layers: list[list[Value]] = [[image]]
    unused: list[Value] = []
    stage = -1
    channels = 32

    def add(op: str, inputs: list[Value], out_shape: tuple[int, ...], **attrs: object) -> Value:
        nonlocal made
        node = graph.add_node(op, inputs, attrs=attrs, name=f"n{made}")
        node.outputs[0].type = TensorType(F32, out_shape)
        made += 1
        unused.append(node.outputs[0])
        return node.outputs[0]

    while made < num_nodes:
        want = min(made * stages // num_nodes, stages - 1)
        if want != stage:  # a strided transition conv starts each stage
            stage = want
            src = layers[-1][0]
            in_c = src.shape[1]
            channels = 32 * 2**stage
            hw = 56 >> stage
            shape = (batch, channels, hw, hw)
            w = _const(graph, f"w{made}", (channels, in_c, 3, 3))
            layers = [[add("Conv", [src, w], shape, strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3])]]
            continue
        shape = layers[-1][0].shape
        layer: list[Value] = []
        for _ in range(int(rng.integers(1, max_width + 1))):
            if made >= num_nodes:
                break
            window = [v for lay in layers[-3:] for v in lay]
            first = next((v for v in unused if v.shape == shape and not v.uses), None)
            if first is None or rng.random() < 0.3:
                first = window[int(rng.integers(len(window)))]
            op = _OPS[int(rng.choice(len(_OPS), p=_WEIGHTS))]
            if op.startswith("Conv"):
                k = 3 if op == "Conv3" else 1
                w = _const(graph, f"w{made}", (shape[1], shape[1], k, k))
                out = add("Conv", [first, w], shape, pads=[k // 2] * 4, kernel_shape=[k, k])
            elif op == "BatchNormalization":
                params = [_const(graph, f"bn{made}_{i}", (shape[1],)) for i in range(4)]
                out = add(op, [first, *params], shape)
            elif op in ("Add", "Mul"):
                out = add(op, [first, window[int(rng.integers(len(window)))]], shape)
            elif op == "MaxPool":
                out = add(op, [first], shape, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            else:
                out = add(op, [first], shape)
            layer.append(out)
        layers.append(layer)
        unused = [v for v in unused[-512:] if not v.uses]
    for node in graph:
        if not node.outputs[0].uses:
            graph.add_output(node.outputs[0])
    return graph


def pipeline_decisions(problem: SimulationProblem, *, seed: int = 0, fuse: bool = False) -> Decisions:
    """Contiguous chunks over the accelerators, random priorities, optional elementwise fusion."""
    rng = np.random.default_rng(seed)
    topo = problem.topology
    gpus = [i for i, d in enumerate(topo.devices) if d.kind != "cpu"] or [0]
    n = problem.num_nodes
    device = np.asarray(gpus, dtype=np.int32)[np.minimum(np.arange(n) * len(gpus) // max(n, 1), len(gpus) - 1)]
    decisions = Decisions(device, np.full(n, -1, dtype=np.int32), rng.random(n))
    if fuse:
        # Fuse each elementwise node into the group of its first input's producer (same device).
        producer_of = {id(v): i for i, node in enumerate(problem.nodes) for v in node.outputs}
        group = decisions.fusion_group
        for i, node in enumerate(problem.nodes):
            if node.op_type in ELEMENTWISE and node.inputs and id(node.inputs[0]) in producer_of:
                p = producer_of[id(node.inputs[0])]
                if device[p] == device[i] and len(node.inputs[0].uses) == 1:
                    group[i] = group[p] = group[p] if group[p] >= 0 else p
    return decisions


def random_decisions(problem: SimulationProblem, *, seed: int = 0) -> Decisions:
    """Every node on a random accelerator: the worst case for transfers (an RL policy's first tries)."""
    rng = np.random.default_rng(seed)
    gpus = np.asarray([i for i, d in enumerate(problem.topology.devices) if d.kind != "cpu"] or [0], dtype=np.int32)
    n = problem.num_nodes
    return Decisions(gpus[rng.integers(0, gpus.size, n)], np.full(n, -1, dtype=np.int32), rng.random(n))


WALL: dict[str, list[float]] = {}


def _median_time(fn, repeats: int, label: str = "") -> float:
    """Median CPU time of `fn` (process time: on a shared machine wall time would also count the
    neighbours' load); wall-clock medians are kept in WALL for the JSON."""
    cpu, wall = [], []
    for _ in range(repeats):
        began, began_wall = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - began)
        wall.append(time.perf_counter() - began_wall)
    if label:
        WALL.setdefault(label, []).append(statistics.median(wall))
    return statistics.median(cpu)


def _target_graph(spec: str) -> tuple[Graph, str]:
    """The graph of the simulations/s row: a suite workload, or the synthetic stand-in."""
    if spec == "synthetic":
        return layered_dag(9300, seed=9300), "synthetic layered DAG"
    from compiler_opt.workloads import build_workload
    from compiler_opt.workloads.registry import parse_workload_spec, workload_spec_label, workload_spec_sizes

    parsed = parse_workload_spec(spec)
    if parsed is None:
        raise SystemExit(f"--target {spec!r}: not a workload name (see `compiler-opt workloads`) nor 'synthetic'")
    workload, mode = parsed
    return build_workload(workload.name, mode=mode, **workload_spec_sizes(spec)), workload_spec_label(spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="4xV100")
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="sizes 1k-10k, 3 repeats")
    parser.add_argument(
        "--target", default="inception-v3:train", help="workload for the simulations/s row (or 'synthetic')"
    )
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "bench_simulator.json")
    args = parser.parse_args(argv)
    sizes = [1000, 3000, 10000] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeats = 3 if args.quick else args.repeats
    topology = load_topology(args.devices)
    print(
        f"simulator benchmark on {args.devices} ({topology.num_devices} devices), python {platform.python_version()}, "
        "one process; times are medians of CPU (process) time"
    )
    print("decisions: 'sim' = contiguous pipeline split over the GPUs, 'fused' = same plus elementwise fusion,")
    print("'random' = every node on a random GPU (thousands of transfers); 'thru' = throughput_objective")
    print(
        f"{'nodes':>8} {'build s':>9} {'sim ms':>9} {'fused ms':>9} {'random ms':>10} {'thru ms':>9} "
        f"{'sims/s':>8} {'step ms':>9} {'xfers':>7} {'rnd xfers':>9}"
    )
    rows = []
    for size in sizes:
        graph = layered_dag(size, seed=size)
        build = _median_time(lambda: SimulationProblem.from_graph(graph, topology), max(1, repeats // 2))
        problem = SimulationProblem.from_graph(graph, topology)
        plain = pipeline_decisions(problem, seed=1)
        fused = pipeline_decisions(problem, seed=1, fuse=True)
        scattered = random_decisions(problem, seed=1)
        sim = _median_time(lambda: simulate(problem, plain), repeats, "simulate")
        sim_fused = _median_time(lambda: simulate(problem, fused), repeats)
        sim_random = _median_time(lambda: simulate(problem, scattered), repeats, "simulate_random")
        thru = _median_time(lambda: throughput_objective(problem, plain), repeats)
        result = simulate(problem, plain)
        row = {
            "nodes": size,
            "build_s": build,
            "simulate_s": sim,
            "simulate_fused_s": sim_fused,
            "simulate_random_s": sim_random,
            "throughput_objective_s": thru,
            "sims_per_s": 1.0 / sim,
            "step_time_s": result.step_time_s,
            "transfers": int(result.tasks.xfer_value.size),
            "random_transfers": int(simulate(problem, scattered).tasks.xfer_value.size),
        }
        rows.append(row)
        print(
            f"{size:>8} {build:>9.3f} {sim * 1e3:>9.2f} {sim_fused * 1e3:>9.2f} {sim_random * 1e3:>10.2f} "
            f"{thru * 1e3:>9.2f} {1 / sim:>8.1f} {result.step_time_s * 1e3:>9.3f} {row['transfers']:>7} "
            f"{row['random_transfers']:>9}"
        )
    exponent = exponent_random = None
    if len(rows) >= 2:
        x = np.log([r["nodes"] for r in rows])
        exponent = float(np.polyfit(x, np.log([r["simulate_s"] for r in rows]), 1)[0])
        exponent_random = float(np.polyfit(x, np.log([r["simulate_random_s"] for r in rows]), 1)[0])
        print(f"fitted exponent of simulate time vs nodes: {exponent:.3f} pipeline, {exponent_random:.3f} random (goal <= 1.2)")
    graph, target_name = _target_graph(args.target)
    problem = SimulationProblem.from_graph(graph, topology)
    plain = pipeline_decisions(problem, seed=1)
    target = _median_time(lambda: simulate(problem, plain), max(repeats, 5), "simulate_target")
    # Fused too: what every search evaluates (RESULTS.md (n): a cost only fused decisions pay went
    # unseen while this row timed unfused ones alone).
    fused = pipeline_decisions(problem, seed=1, fuse=True)
    target_fused = _median_time(lambda: simulate(problem, fused), max(repeats, 5), "simulate_target_fused")
    scattered = random_decisions(problem, seed=1)
    target_random = _median_time(lambda: simulate(problem, scattered), max(repeats, 5), "simulate_target_random")
    print(
        f"{target_name} ({problem.num_nodes} nodes): {1 / target:.1f} simulations/s with a pipeline split, "
        f"{1 / target_fused:.1f}/s with it fused, {1 / target_random:.1f}/s with random placement (goal >= 50)"
    )
    payload = {
        "devices": args.devices,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "rows": rows,
        "fitted_exponent": exponent,
        "fitted_exponent_random": exponent_random,
        "target": target_name,
        "target_nodes": problem.num_nodes,
        "sims_per_s_target": 1 / target,
        "sims_per_s_target_fused": 1 / target_fused,
        "sims_per_s_target_random": 1 / target_random,
        "wall_medians_s": WALL,
        "timing": "median process (CPU) time per call; wall_medians_s has wall-clock medians",
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
