"""Where tile label noise comes from: the same configurations timed again with the same compiled code
and buffers, with new buffers, with a new compile, and under a longer timing protocol (twenty-third
session, RESULTS (i)).

    taskset -c 0 env PYTHONPATH=. python benchmarks/bench_tile_timing_protocol.py --kernels 48 --seed 2312 --neighbour --json out/protocol.json
    PYTHONPATH=. python benchmarks/bench_tile_timing_protocol.py --report out/protocol.json --statistic second

Two passes of `costmodel remeasure` over a dataset disagree by more than the collection's in-pass
retest says (RESULTS (i), twenty-second session: 4.0% vs 3.3% median per configuration, the second
pass's best 4.9-5.4% slower on the first pass's labels). A re-measurement differs from a retest in
three ways: the code is compiled again (loaded at another address), the input / output buffers are
allocated again, and time has passed. This separates them on fresh synthetic kernels. Per kernel,
the collector's 50 configurations are compiled twice (code A, code B) and bound to two buffer sets
(each configuration its own buffers, as the collector does), and timed in passes of interleaved
rounds (every round all configurations once, in a fresh random order; label = min over rounds):

- `A/a`: code A on buffers a; `A/a again`: the same runners once more, after the passes below;
- `A/b`: code A on buffers b (new buffers, same code);
- `B/b`: code B on buffers b (new code, same buffers);
- `long A/a`, `long B/b`: the same runners under the long protocol (samples of >= `--long-sample-ms`,
  `--long-rounds` rounds), the collector's being >= 0.2 ms samples and 5 rounds until this study;
- with `--neighbour`: `long A/a again` (quiet), then `A/a busy` and `long A/a busy` while a
  memory-streaming loop runs on another CPU (`Neighbour`).

Every sample is stored, so `--report FILE --statistic min|second|median` scores any label statistic.

Pairs compared (per configuration |t2 / t1 - 1|; per kernel the slowdown of one pass's best on the
other's labels, both ways, and Kendall tau): timing alone (A/a vs A/a again), buffers (A/a vs A/b),
code (A/b vs B/b), a re-measurement without the hours (A/a vs B/b), the same under the long protocol,
and the busy neighbour's effect.
The shipped tile ranker's scores of every kernel are stored too, so the report also gives its top-1 /
top-5 / tau on these kernels under each labelling (kernels no ranker has seen: a fresh synthetic seed).
Run alone on a pinned idle core (`taskset -c 0`): other load is exactly what this measures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cost_model.measure.harness import STATISTICS, label_of  # noqa: E402
from cost_model.measure.tile.collect import SHORT_PROTOCOL  # noqa: E402
from cost_model.profiling.timing import Measurement  # noqa: E402

SHORT_SAMPLE_S, SHORT_ROUNDS = SHORT_PROTOCOL.sample_s, SHORT_PROTOCOL.repeats  # the collector's protocol until this study
PASSES = ("A/a", "A/b", "B/b", "A/a again", "long A/a", "long B/b")
PAIRS = (
    ("timing alone", "A/a", "A/a again"),
    ("long: timing alone", "long A/a", "long A/a again"),
    ("new buffers", "A/a", "A/b"),
    ("new code", "A/b", "B/b"),
    ("new code + buffers", "A/a", "B/b"),
    ("long: new code + buffers", "long A/a", "long B/b"),
    ("short vs long (same code)", "A/a", "long A/a"),
    ("busy neighbour (short)", "A/a", "A/a busy"),
    ("long: busy neighbour", "long A/a again", "long A/a busy"),
)


def _runner(config, function, args, sample_s: float):
    """A runner of compiled code `function` on buffers `args`, batched as the collector batches."""
    from cost_model.measure.tile.collect import batch_to
    from cost_model.measure.tile.runner import CompiledConfig

    return batch_to(CompiledConfig(config, function, args, 0.0), sample_s)


def _pass(runners: dict[str, object], rounds: int, rng: np.random.Generator) -> dict[str, list[float]]:
    """Per-call seconds of `rounds` interleaved rounds (two warm-up calls each first), per runner: the
    collector's `Harness`, without a cache, extra rounds or retest, drawing its orders from `rng`."""
    from cost_model.measure.harness import Harness, per_call_timer

    harness = Harness(timer=per_call_timer, repeats=rounds, warmup=2, remeasure_top=0, retest_fraction=0.0)
    harness.rng = rng  # one order stream across every pass of the run
    measured = harness.measure("", runners)
    return {name: list(measured.measurements[name].samples) for name in runners}


class Neighbour:
    """A memory-streaming loop (64 MB copies) on a CPU this process does not run on, while in use:
    what a busy second core does to the labels (caches and memory bandwidth are shared)."""

    def __enter__(self) -> "Neighbour":
        import subprocess

        mine = os.sched_getaffinity(0)
        others = sorted(set(range(os.cpu_count() or 1)) - mine)
        if not others:
            raise SystemExit("--neighbour needs a CPU outside this process's affinity (run it under taskset -c 0)")
        code = "import numpy as np\na = np.ones(2**23); b = np.empty_like(a)\nwhile True: np.copyto(b, a)"
        self.process = subprocess.Popen(["taskset", "-c", str(others[0]), sys.executable, "-c", code])
        time.sleep(0.5)  # let it start streaming
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait()


def measure_kernel(spec, *, configs: int, config_seed: int, rng: np.random.Generator, long_sample_s: float,
                   long_rounds: int, ranker=None, neighbour: bool = False) -> dict:
    from cost_model.measure.tile.collect import kernel_configs
    from cost_model.measure.tile.kernels import build_kernel
    from cost_model.measure.tile.runner import check_against, compile_config, inputs_for, reference_output
    from cost_model.measure.tile.space import TileSpace

    space = TileSpace(build_kernel(spec))
    chosen = kernel_configs(space, config_seed, configs)
    arrays = inputs_for(space.kernel)
    reference = reference_output(space, arrays)
    code_a, code_b, texts, kept = {}, {}, [], []
    began = time.perf_counter()
    for config in chosen:
        try:
            run_a = compile_config(space, config, arrays=[a.copy() for a in arrays])
            check_against(run_a, reference)
            run_b = compile_config(space, config, arrays=[a.copy() for a in arrays])
        except Exception as error:  # a config TVM cannot build or that changes the result is dropped, as the collector does
            print(f"  {spec.signature}: dropped {config.text()}: {type(error).__name__}", file=sys.stderr)
            continue
        text = config.text()
        texts.append(text)
        kept.append(config)
        code_a[text], code_b[text] = run_a, run_b
    compile_s = time.perf_counter() - began
    short = {t: {} for t in ("A/a", "A/b", "B/b")}
    longs = {t: {} for t in ("A/a", "B/b")}
    for text in texts:
        fa, fb = code_a[text].function, code_b[text].function
        buf_a, buf_b = code_a[text].args, code_b[text].args
        short["A/a"][text] = _runner(code_a[text].config, fa, buf_a, SHORT_SAMPLE_S)
        short["A/b"][text] = _runner(code_a[text].config, fa, buf_b, SHORT_SAMPLE_S)
        short["B/b"][text] = _runner(code_a[text].config, fb, buf_b, SHORT_SAMPLE_S)
        longs["A/a"][text] = _runner(code_a[text].config, fa, buf_a, long_sample_s)
        longs["B/b"][text] = _runner(code_a[text].config, fb, buf_b, long_sample_s)
    began = time.perf_counter()
    samples = {
        "A/a": _pass(short["A/a"], SHORT_ROUNDS, rng),
        "A/b": _pass(short["A/b"], SHORT_ROUNDS, rng),
        "B/b": _pass(short["B/b"], SHORT_ROUNDS, rng),
        "A/a again": _pass(short["A/a"], SHORT_ROUNDS, rng),
        "long A/a": _pass(longs["A/a"], long_rounds, rng),
        "long B/b": _pass(longs["B/b"], long_rounds, rng),
    }
    if neighbour:
        samples["long A/a again"] = _pass(longs["A/a"], long_rounds, rng)
        with Neighbour():
            samples["A/a busy"] = _pass(short["A/a"], SHORT_ROUNDS, rng)
            samples["long A/a busy"] = _pass(longs["A/a"], long_rounds, rng)
    labels = {name: {t: min(v) for t, v in per.items()} for name, per in samples.items()}
    timing_s = time.perf_counter() - began
    row = {
        "kernel": spec.signature, "kind": spec.kind, "configs": texts,
        "labels": {name: [labels[name][t] for t in texts] for name in labels},
        "samples": {name: [samples[name][t] for t in texts] for name in samples},
        "compile_s": compile_s, "timing_s": timing_s, "load": os.getloadavg()[0],
    }
    if ranker is not None:
        row["scores"] = [float(s) for s in ranker.rank(space, kept)]
    return row


def pass_labels(row: dict, name: str, statistic: str = "min") -> np.ndarray:
    """One pass's label per configuration: the stored minimum, or `statistic` of its samples."""
    if statistic == "min":
        return np.asarray(row["labels"][name])
    if "samples" not in row:
        raise ValueError(f"{row['kernel']}: no samples stored (a run before they were), so only the min statistic")
    return np.asarray([label_of(Measurement.from_samples(x), statistic) for x in row["samples"][name]])


def pair_stats(rows: list[dict], first: str, second: str, statistic: str = "min") -> dict[str, float]:
    """|t2/t1 - 1| per configuration (median, p90); per kernel the slowdown of one pass's best on the
    other's labels (both directions, mean), the share of kernels where that slowdown exceeds 2%, and
    Kendall tau."""
    from cost_model.learned.metrics import kendall_tau, top_k_slowdown

    rel, top1, taus = [], [], []
    for row in rows:
        a, b = pass_labels(row, first, statistic), pass_labels(row, second, statistic)
        rel.extend(np.abs(b / a - 1.0).tolist())
        top1.extend([top_k_slowdown(np.log(b), a, 1), top_k_slowdown(np.log(a), b, 1)])
        taus.append(kendall_tau(np.log(b), a))
    top1 = np.asarray(top1)
    return {"rel_median": float(np.median(rel)), "rel_p90": float(np.quantile(rel, 0.9)), "top1": float(top1.mean()),
            "top1_over_2pct": float((top1 > 0.02).mean()), "kendall": float(np.mean(taus)), "kernels": len(rows)}


def ranker_stats(rows: list[dict], labelling, statistic: str = "min") -> dict[str, float]:
    """The stored ranker scores (lower = faster) on one labelling (a pass name, or a function of a row)."""
    from cost_model.learned.metrics import kendall_tau, top_k_slowdown

    top1, top5, taus = [], [], []
    for row in rows:
        labels = np.asarray(labelling(row) if callable(labelling) else pass_labels(row, labelling, statistic))
        scores = np.asarray(row["scores"])
        top1.append(top_k_slowdown(scores, labels, 1))
        top5.append(top_k_slowdown(scores, labels, 5))
        taus.append(kendall_tau(scores, labels))
    return {"top1": float(np.mean(top1)), "top1_median": float(np.median(top1)), "top5": float(np.mean(top5)),
            "kendall": float(np.mean(taus)), "kernels": len(rows)}


def report(data: dict, statistic: str = "min") -> str:
    rows = data["rows"]
    have = set.intersection(*(set(r["labels"]) for r in rows)) if rows else set()
    lines = [f"{len(rows)} kernels (synthetic seed {data['seed']}), {sum(len(r['configs']) for r in rows)} configurations; "
             f"long protocol: >= {data['long_sample_ms']} ms samples, {data['long_rounds']} rounds; label = {statistic} of a pass's samples",
             "", "| pair | |t2/t1 - 1| median | p90 | top-1 slowdown (both ways) | kernels > 2% | Kendall tau |", "|---|---|---|---|---|---|"]
    for name, first, second in PAIRS:
        if first not in have or second not in have:
            continue
        s = pair_stats(rows, first, second, statistic)
        lines.append(f"| {name} ({first} vs {second}) | {100 * s['rel_median']:.2f}% | {100 * s['rel_p90']:.1f}% | {100 * s['top1']:.2f}% | "
                     f"{100 * s['top1_over_2pct']:.0f}% | {s['kendall']:.3f} |")
    if rows and "scores" in rows[0]:
        lines += ["", "The shipped tile ranker on these kernels:", "",
                  "| labels | top-1 (mean) | top-1 (median) | top-5 | Kendall tau |", "|---|---|---|---|---|"]
        labellings = [(name, name) for name in PASSES] + [
            ("min of A/a, B/b", lambda r: np.minimum(pass_labels(r, "A/a", statistic), pass_labels(r, "B/b", statistic))),
            ("min of long A/a, long B/b", lambda r: np.minimum(pass_labels(r, "long A/a", statistic), pass_labels(r, "long B/b", statistic)))]
        for name, labelling in labellings:
            s = ranker_stats(rows, labelling, statistic)
            lines.append(f"| {name} | {100 * s['top1']:.2f}% | {100 * s['top1_median']:.2f}% | {100 * s['top5']:.2f}% | {s['kendall']:.3f} |")
    kinds = sorted({r["kind"] for r in rows})
    lines += ["", "Per kind, new code + buffers (A/a vs B/b) and long (long A/a vs long B/b): top-1 both ways", ""]
    for kind in kinds:
        sub = [r for r in rows if r["kind"] == kind]
        short, long_ = pair_stats(sub, "A/a", "B/b", statistic), pair_stats(sub, "long A/a", "long B/b", statistic)
        lines.append(f"- {kind} ({len(sub)}): {100 * short['top1']:.2f}% -> {100 * long_['top1']:.2f}%, "
                     f"|t2/t1 - 1| median {100 * short['rel_median']:.2f}% -> {100 * long_['rel_median']:.2f}%")
    lines.append("")
    lines.append(f"compile {sum(r['compile_s'] for r in rows):.0f} s, timing {sum(r['timing_s'] for r in rows):.0f} s, "
                 f"load average median {np.median([r['load'] for r in rows]):.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=48)
    parser.add_argument("--seed", type=int, default=2311, help="synthetic kernel seed (a fresh one: kernels no ranker was fitted on)")
    parser.add_argument("--configs", type=int, default=50)
    parser.add_argument("--config-seed", type=int, default=0, help="the collection seed the configurations are drawn with")
    parser.add_argument("--long-sample-ms", type=float, default=2.0)
    parser.add_argument("--long-rounds", type=int, default=15)
    parser.add_argument("--no-ranker", action="store_true", help="skip the shipped ranker's scores")
    parser.add_argument("--json", metavar="FILE", help="write every label here (resumes: kernels already in it are skipped)")
    parser.add_argument("--neighbour", action="store_true",
                        help="also time A/a (both protocols) while a memory-streaming loop runs on another CPU, beside a quiet long A/a again")
    parser.add_argument("--statistic", choices=STATISTICS, default="min",
                        help="the label of a pass: min (what the harness stores), second lowest or median of its samples")
    parser.add_argument("--report", metavar="FILE", help="only print the tables of a written JSON")
    args = parser.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.report).read_text()), args.statistic))
        return 0
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    from cost_model.measure.tile.synthetic import synthetic_kernels

    specs = synthetic_kernels(args.kernels, seed=args.seed)
    data = {"seed": args.seed, "long_sample_ms": args.long_sample_ms, "long_rounds": args.long_rounds, "rows": []}
    if args.json and Path(args.json).exists():
        data = json.loads(Path(args.json).read_text())
    done = {r["kernel"] for r in data["rows"]}
    ranker = None
    if not args.no_ranker:
        from cost_model.learned.predictor import load_tile_ranker

        ranker = load_tile_ranker("gbdt-ens")
    rng = np.random.default_rng(args.seed)
    from tqdm import tqdm

    for spec in tqdm([s for s in specs if s.signature not in done], desc="kernels", disable=None):
        data["rows"].append(measure_kernel(spec, configs=args.configs, config_seed=args.config_seed, rng=rng,
                                           long_sample_s=args.long_sample_ms / 1e3, long_rounds=args.long_rounds, ranker=ranker,
                                           neighbour=args.neighbour))
        if args.json:
            tmp = Path(args.json).with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(args.json)
    print(report(data, args.statistic))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
