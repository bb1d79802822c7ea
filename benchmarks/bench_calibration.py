"""Calibration: simulated vs measured step time of random fusion/placement/schedule choices.

For each workload (small JAX functions: an MLP, a conv net, an attention block, an LSTM cell,
lowered to HLO and imported), draw random configurations, run each for real on this CPU (every
fused group one XLA executable, dispatched in schedule order, 1 or 2 forced host devices), and
simulate it with the roofline (`cpu` preset and measured host numbers) and with profiled kernel
times. Prints a table of Spearman/Pearson correlations and writes JSON.

    python benchmarks/bench_calibration.py [--configs 40] [--repeats 30] [--json out.json]

`--whole-graphs` runs the whole-graph calibration instead (`compiler_opt.calibration.whole_study`):
the suite's inference graphs at small sizes and HLO test data modules, >= 200 nodes each, under
fusion groupings (none, the default fusion, random `fuse-by-priority` draws) x placements on
2 host devices (one, split, random), each whole step run for real; profiled kernel costs come
from a separate pass on other inputs; beside the simulator, the naive baselines (kernel count,
total FLOPs, total kernel bytes):

    python benchmarks/bench_calibration.py --whole-graphs all [--random-fusions 3] [--repeats 5]

The machinery is `cost_model.profiling.study.calibrate_workload`; this file only picks the
workloads, sets XLA's device count before JAX is imported, and reports.
"""

from __future__ import annotations

import os

# Two host devices for the placement configurations; must happen before jax is imported.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_calibration.json"
WHOLE_RESULTS = Path(__file__).resolve().parent / "results" / "bench_calibration_whole.json"
TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
WHOLE_GRAPHS = ("bert-base", "wavenet-2x18", "dynamic-slice-loop", "mass-matrix-35", "gnmt-2", "resnet-50", "nasnet")


def workloads(scale: float = 1.0) -> dict[str, tuple]:
    """name -> (fn, args) with seeded random inputs; `scale` shrinks every size (tests use 0.25)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)

    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * 0.1

    def s(n: int) -> int:
        return max(4, int(n * scale))

    def mlp(x, w1, b1, w2, b2, w3):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        h = jnp.tanh(h @ w2 + b2) * 1.5 + h[:, : w2.shape[1]]
        return jnp.sum(jax.nn.sigmoid(h @ w3), axis=1)

    def convnet(x, k1, k2, w):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn)
        h = jnp.maximum(h * 0.5 + 0.1, 0.0)
        h = jax.lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=dn)
        h = jnp.tanh(h) + jnp.mean(h, axis=(1, 2), keepdims=True)
        return jnp.mean(h, axis=(1, 2)) @ w

    def attention(x, wq, wk, wv, wo):
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = (q @ k.T) / np.float32(np.sqrt(q.shape[1]))
        scores = scores - jnp.max(scores, axis=1, keepdims=True)
        p = jnp.exp(scores)
        p = p / jnp.sum(p, axis=1, keepdims=True)
        h = x + (p @ v) @ wo
        mu = jnp.mean(h, axis=1, keepdims=True)
        var = jnp.mean((h - mu) ** 2, axis=1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5)

    def lstm(x, h, c, wx, wh, b):
        z = x @ wx + h @ wh + b
        n = h.shape[1]
        i, f, g, o = (z[:, j * n : (j + 1) * n] for j in range(4))
        c2 = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h2 = jax.nn.sigmoid(o) * jnp.tanh(c2)
        return h2 + c2

    b, d, hdim = s(256), s(512), s(256)
    seq, model = s(256), s(128)
    lb, li, lh = s(128), s(256), s(256)
    return {
        "mlp": (mlp, (arr(b, d), arr(d, d), arr(d), arr(d, hdim), arr(hdim), arr(hdim, hdim))),
        "convnet": (convnet, (arr(4, s(64), s(64), 8), arr(3, 3, 8, 16), arr(3, 3, 16, 32), arr(32, 10))),
        "attention": (attention, (arr(seq, model), arr(model, model), arr(model, model), arr(model, model), arr(model, model))),
        "lstm": (lstm, (arr(lb, li), arr(lb, lh), arr(lb, lh), arr(li, 4 * lh), arr(lh, 4 * lh), arr(4 * lh))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=40, help="random configurations per workload")
    parser.add_argument("--repeats", type=int, default=30, help="interleaved timing rounds (min of N)")
    parser.add_argument("--multi-device", type=float, default=0.3, help="share of configurations on 2 devices")
    parser.add_argument("--workloads", default="mlp,convnet,attention,lstm")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", action="store_true", help="reuse the persistent profile cache (default: fresh, in memory)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--whole-graphs", default="", help=f"whole-graph mode: 'all' or names from {','.join(WHOLE_GRAPHS)}")
    parser.add_argument("--random-fusions", type=int, default=3, help="whole-graph mode: fuse-by-priority draws per graph")
    parser.add_argument("--testdata", type=Path, default=TESTDATA, help="whole-graph mode: the shared test data folder")
    parser.add_argument("--report", type=Path, default=None, help="whole-graph mode: re-print the table of a finished run's JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    if args.whole_graphs or args.report is not None:
        return whole_graphs_main(args, argv)

    from cost_model.profiling import ProfileCache, Profiler, XlaBackend, measure_host_device
    from cost_model.profiling.calibration import correlations, hlo_workload
    from cost_model.profiling.study import COST_SOURCES, calibrate_workload

    host = measure_host_device(use_cache=args.cache)
    print(
        f"host: {host.peak('fp32') / 1e9:.0f} GFLOP/s fp32, {host.mem_bandwidth / 1e9:.1f} GB/s, "
        f"{host.launch_overhead_s * 1e6:.1f} us launch (cpu preset: 3200 GFLOP/s, 140.8 GB/s, 2 us)"
    )
    profiler = Profiler(XlaBackend(), cache=None if args.cache else ProfileCache(":memory:"), repeats=args.repeats)
    table = workloads(args.scale)
    results = []
    for index, name in enumerate(args.workloads.split(",")):
        fn, fn_args = table[name]
        began = time.perf_counter()
        result = calibrate_workload(
            hlo_workload(name, fn, *fn_args),
            profiler,
            num_configs=args.configs,
            repeats=args.repeats,
            multi_device_share=args.multi_device,
            seed=args.seed + index,
            host=host,
        )
        result.seconds["total"] = time.perf_counter() - began
        results.append(result)

    header = f"{'workload':<10} {'nodes':>5} {'cfgs':>4} {'step ms (min..max)':>19}  " + "  ".join(f"{s:>22}" for s in COST_SOURCES)
    print(header)
    print(f"{'':<10} {'':>5} {'':>4} {'':>19}  " + "  ".join(f"{'spearman / pearson':>22}" for _ in COST_SOURCES))
    pooled: dict[str, list[np.ndarray]] = {s: [] for s in COST_SOURCES}
    measured_all = []
    for r in results:
        m = r.measured()
        measured_all.append(m / np.median(m))  # per-workload normalised, so pooling ranks within workloads
        cells = []
        for source in COST_SOURCES:
            sim = r.simulated(source)
            pooled[source].append(sim / np.median(sim))
            c = r.correlation[source]
            cells.append(f"{c['spearman']:>10.3f} / {c['pearson']:<9.3f}")
        print(f"{r.workload:<10} {r.num_nodes:>5} {len(r.configs):>4} {m.min() * 1e3:>8.3f}..{m.max() * 1e3:<8.3f}  " + "  ".join(cells))
    overall = {s: correlations(np.concatenate(pooled[s]), np.concatenate(measured_all)) for s in COST_SOURCES}
    from scipy import stats  # the library's numpy correlations must agree with scipy.stats

    for s in COST_SOURCES:
        x, y = np.concatenate(pooled[s]), np.concatenate(measured_all)
        assert abs(stats.spearmanr(x, y)[0] - overall[s]["spearman"]) < 1e-9
        assert abs(stats.pearsonr(x, y)[0] - overall[s]["pearson"]) < 1e-9
    mean = {s: {k: float(np.mean([r.correlation[s][k] for r in results])) for k in ("spearman", "pearson")} for s in COST_SOURCES}
    total = sum(len(r.configs) for r in results)
    print(f"{'pooled':<10} {'':>5} {total:>4} {'(normalised)':>19}  " + "  ".join(f"{overall[s]['spearman']:>10.3f} / {overall[s]['pearson']:<9.3f}" for s in COST_SOURCES))
    print(f"{'mean':<10} {'':>5} {'':>4} {'':>19}  " + "  ".join(f"{mean[s]['spearman']:>10.3f} / {mean[s]['pearson']:<9.3f}" for s in COST_SOURCES))

    payload = {
        "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
        "host": {"fp32_flops": host.peak("fp32"), "mem_bandwidth": host.mem_bandwidth, "launch_overhead_s": host.launch_overhead_s},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "pooled": overall,
        "mean": mean,
        "workloads": [
            {"name": r.workload, "nodes": r.num_nodes, "correlation": r.correlation, "seconds": r.seconds, "configs": r.configs}
            for r in results
        ],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


def _cell(c: dict[str, float]) -> str:
    return f"{c['spearman']:.2f} / {c['pearson']:.2f}" if c["spearman"] == c["spearman"] else "n/a"


# The predictors the printed table shows (the JSON has every SIM_SOURCES entry): the roofline,
# the profiled CPU-time table, each on independent and on shared devices, and the profiled
# wall-time table on shared devices; then the naive baselines.
SHOWN = ("roofline", "roofline-shared", "profiled@cpu", "profiled-shared@cpu", "profiled-shared@wall")
SHORT = {"roofline": "roofline", "roofline-shared": "roofline-sh", "profiled@cpu": "prof-cpu", "profiled-shared@cpu": "prof-cpu-sh",
         "profiled-shared@wall": "prof-wall-sh", "kernels": "kernels", "flops": "FLOPs", "bytes": "bytes"}


def whole_graphs_main(args: argparse.Namespace, argv: list[str] | None) -> int:
    from cost_model.profiling import measure_host_device
    from cost_model.profiling.host import host_topology
    from compiler_opt.calibration.whole_graph import SUITE_SIZES, suite_graph, testdata_graph
    from compiler_opt.calibration.whole_study import TARGETS, WholeGraphStudy, run_study

    if args.report is not None:  # re-print a finished run's table from its JSON, measuring nothing
        payload = json.loads(args.report.read_text(encoding="utf-8"))
        report([WholeGraphStudy.from_json(g) for g in payload["graphs"]], payload)
        return 0
    names = list(WHOLE_GRAPHS) if args.whole_graphs == "all" else args.whole_graphs.split(",")
    json_path = args.json if args.json != RESULTS else WHOLE_RESULTS
    host = measure_host_device(use_cache=args.cache)
    # independent devices; the study derives the shared-executor twin and scores both
    topology = host_topology(2, device=host, use_cache=args.cache, shared_executor=False)
    link = topology.links[0]
    print(
        f"host: {host.peak('fp32') / 1e9:.0f} GFLOP/s fp32, {host.mem_bandwidth / 1e9:.1f} GB/s, {host.launch_overhead_s * 1e6:.1f} us launch; "
        f"host-to-host copy {link.latency_s * 1e6:.0f} us + {link.bandwidth / 1e9:.2f} GB/s"
    )
    studies = []
    payload: dict = {
        "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
        "host": {"fp32_flops": host.peak("fp32"), "mem_bandwidth": host.mem_bandwidth, "launch_overhead_s": host.launch_overhead_s,
                 "link_latency_s": link.latency_s, "link_bandwidth": link.bandwidth},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "sizes": {n: SUITE_SIZES[n] for n in names if n in SUITE_SIZES},
        "targets": {t: list(v) for t, v in TARGETS.items()},
        "repeats": 2 * args.repeats,
        "graphs": [],
    }
    for index, name in enumerate(names):
        began = time.perf_counter()
        try:
            whole = suite_graph(name) if name in SUITE_SIZES else testdata_graph(name, args.testdata)
            study = run_study(whole, topology, num_random=args.random_fusions, repeats=args.repeats, profile_repeats=args.repeats,
                              seed=args.seed + 100 * index)
        except Exception as error:  # one graph XLA cannot run in pieces does not end the run; it is reported
            print(f"{name:<19} failed: {type(error).__name__}: {error}", flush=True)
            payload.setdefault("failed", {})[name] = f"{type(error).__name__}: {error}"
            continue
        study.seconds["total"] = time.perf_counter() - began
        studies.append(study)
        m = study.measured() * 1e3
        print(f"{name}: {study.num_nodes} nodes, {len(study.configs)} configurations, wall median {m.min():.1f}..{m.max():.1f} ms, "
              f"{study.seconds['total']:.0f} s ({study.seconds['executables_compiled']:.0f} executables compiled)", flush=True)
        payload["graphs"].append(study.to_json())
        pool(studies, payload)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    report(studies, payload)
    json_path.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print(f"wrote {json_path}")
    return 0


def pool(studies: list, payload: dict) -> None:
    """Pooled correlations (normalised per graph, and raw) and pooled test-retest, into payload."""
    from compiler_opt.calibration.whole_study import BASELINES, SIM_SOURCES, TARGETS, pooled_correlations

    columns = SIM_SOURCES + BASELINES
    payload["pooled"] = {t: {c: pooled_correlations(studies, c, target=t) for c in columns} for t in TARGETS}
    payload["pooled_raw"] = {t: {c: pooled_correlations(studies, c, target=t, normalise=False) for c in columns} for t in TARGETS}
    payload["pooled_retest"] = {t: pooled_retest(studies, t) for t in TARGETS}


def report(studies: list, payload: dict) -> None:
    from scipy import stats  # the library's numpy correlations must agree with scipy.stats

    from compiler_opt.calibration.whole_study import BASELINES, TARGETS

    pool(studies, payload)
    columns = SHOWN + BASELINES
    for study in studies:
        for c in columns:
            x, y = study.predictor(c), study.measured()
            if np.ptp(x) > 0:
                assert abs(stats.spearmanr(x, y)[0] - study.correlation["wall"][c]["spearman"]) < 1e-9
    total = sum(len(s.configs) for s in studies)
    runs = len(studies[0].configs[0]["samples_s"]["wall"]) if studies else 0
    for target, (clock, statistic) in TARGETS.items():
        print(f"\nscored by {clock} time, {statistic} of {runs} runs (Spearman / Pearson)")
        print(f"{'graph':<19} {'nodes':>5} {'cfgs':>4} {'retest':>13}  " + "  ".join(f"{SHORT[c]:>13}" for c in columns))
        for study in studies:
            print(f"{study.name:<19} {study.num_nodes:>5} {len(study.configs):>4} {_cell(study.retest[target]):>13}  "
                  + "  ".join(f"{_cell(study.correlation[target][c]):>13}" for c in columns))
        print(f"{'pooled (per graph)':<19} {'':>5} {total:>4} {_cell(payload['pooled_retest'][target]):>13}  "
              + "  ".join(f"{_cell(payload['pooled'][target][c]):>13}" for c in columns))
        print(f"{'pooled (raw)':<19} {'':>5} {total:>4} {'':>13}  " + "  ".join(f"{_cell(payload['pooled_raw'][target][c]):>13}" for c in columns))


def pooled_retest(studies: list, target: str) -> dict[str, float]:
    """Rounds A against rounds B, normalised per graph and pooled: the noise ceiling."""
    from cost_model.profiling.calibration import correlations

    a = np.concatenate([np.array([c["measured_a_s"][target] for c in s.configs]) / np.median(s.measured(target)) for s in studies])
    b = np.concatenate([np.array([c["measured_b_s"][target] for c in s.configs]) / np.median(s.measured(target)) for s in studies])
    return correlations(a, b)


if __name__ == "__main__":
    sys.exit(main())
