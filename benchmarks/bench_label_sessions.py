"""Two collections of the same tile dataset, hours apart: how far their labels agree.

    PYTHONPATH=. python benchmarks/bench_label_sessions.py out/tile out/tile_s6

Both folders hold `costmodel collect --task tile` datasets made with the same seed (so the same
kernels and the same configurations, matched by kernel file name and knob text). Per
configuration: |new/old - 1|; per kernel: Kendall tau between the two label vectors, and the
slowdown of one collection's best configuration as timed by the other (what a perfect model of
one collection would lose on the other). Broken down by the old collection's load average when
the kernel was timed (`meta["load1"]`, where stored) and by configuration runtime. Each
dataset's own in-pass retest noise floor (`dataset.json`) is printed beside it. Writes
benchmarks/results/bench_label_sessions.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_label_sessions.json"


def _band(values: list[float] | np.ndarray) -> dict[str, float]:
    values = np.asarray(values, dtype=np.float64)
    if not values.size:
        return {"n": 0}
    return {"n": int(values.size), "median": float(np.median(values)), "mean": float(np.mean(values)), "p90": float(np.quantile(values, 0.9))}


def _load(folder: str) -> dict[str, object]:
    from cost_model.learned.tpugraphs import load_dir

    return {Path(r.path).name: r for r in load_dir(folder) if not r.layout_form}


def _load_before(record: object) -> float | None:
    load = record.meta.get("load1")  # type: ignore[attr-defined]
    if isinstance(load, (list, tuple)) and load:
        return float(max(load))
    if isinstance(load, dict) and load:
        return float(max(v for v in load.values() if isinstance(v, (int, float))))
    return float(load) if isinstance(load, (int, float)) else None


def compare(old_dir: str, new_dir: str) -> dict[str, object]:
    from scipy.stats import kendalltau

    old, new = _load(old_dir), _load(new_dir)
    shared = sorted(set(old) & set(new))
    ratios, taus, cross_top1, rows = [], [], [], []
    by_load: dict[str, list[float]] = {}
    by_runtime: dict[str, list[float]] = {}
    for name in shared:
        a, b = old[name], new[name]
        index = {text: i for i, text in enumerate(b.config_text)}
        pairs = [(a.config_runtime[i], b.config_runtime[index[t]]) for i, t in enumerate(a.config_text) if t in index]
        if len(pairs) < 3:
            continue
        x, y = np.array(pairs, dtype=np.float64).T
        err = np.abs(y / x - 1)
        ratios.extend(err.tolist())
        tau = float(kendalltau(x, y).statistic)
        taus.append(tau)
        # the old collection's best configuration, timed by the new one, against the new best
        slow = float(y[np.argmin(x)] / y.min() - 1)
        cross_top1.append(slow)
        load = _load_before(a)
        band = "unknown" if load is None else "<2" if load < 2 else "2-8" if load < 8 else ">=8"
        by_load.setdefault(band, []).extend(err.tolist())
        for runtime, e in zip(x, err):
            key = "<0.1 ms" if runtime < 1e-4 else "0.1-1 ms" if runtime < 1e-3 else "1-10 ms" if runtime < 1e-2 else ">=10 ms"
            by_runtime.setdefault(key, []).append(float(e))
        rows.append({"kernel": name, "configs": len(pairs), "tau": tau, "median_err": float(np.median(err)), "old_best_slowdown": slow, "old_load": load})
    info = {}
    for label, folder in (("old", old_dir), ("new", new_dir)):
        path = Path(folder) / "dataset.json"
        info[label] = json.loads(path.read_text()).get("noise_floor") if path.exists() else None
    return {
        "old": old_dir, "new": new_dir, "kernels": len(rows), "configs": len(ratios),
        "abs_ratio_error": _band(ratios), "tau": _band(taus), "old_best_slowdown": _band(cross_top1),
        "by_old_load": {k: _band(v) for k, v in sorted(by_load.items())},
        "by_runtime": {k: _band(v) for k, v in sorted(by_runtime.items())},
        "noise_floor": info, "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the earlier tile dataset folder")
    parser.add_argument("new", help="the later collection of the same kernels and seed")
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = compare(args.old, args.new)
    if not result["kernels"]:
        print(f"no kernel with matching configurations in {args.old} and {args.new}", file=sys.stderr)
        return 1
    fmt = lambda b: f"n={b['n']} median {b.get('median', float('nan')):.3f} mean {b.get('mean', float('nan')):.3f} p90 {b.get('p90', float('nan')):.3f}"  # noqa: E731
    print(f"{result['kernels']} kernels, {result['configs']} configurations in both")
    print(f"|new/old - 1| per configuration: {fmt(result['abs_ratio_error'])}")
    print(f"Kendall tau per kernel:          {fmt(result['tau'])}")
    print(f"old best timed by new, slowdown: {fmt(result['old_best_slowdown'])}")
    for key, band in result["by_old_load"].items():
        print(f"  old load {key:>7}: {fmt(band)}")
    for key, band in result["by_runtime"].items():
        print(f"  runtime {key:>8}: {fmt(band)}")
    print(f"in-pass retest noise floor: old {result['noise_floor']['old']}, new {result['noise_floor']['new']}")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
