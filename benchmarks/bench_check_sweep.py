"""`optimize(check=True)`, or an autotuner, over every real model on this machine: what happens to each.

    python benchmarks/bench_check_sweep.py [--onnx] [--external] [MODEL ...] [--json PATH] [--timeout S]
        [--action check|go|autotune-fusion|autotune-tile]

Corpora: `--onnx`, the models shipped inside the onnx package (`onnx/backend/test/data/*/**.onnx`,
149 with onnx 1.23); `--external`, the HLO / StableHLO / GraphDef files of
`../shared/testdata/external` (190). Each model runs in its own process (a crash or a hang ends that
model only) with `method="auto"`, `budget_s=5` on 4xV100. Outcomes: `equal` (the check ran and the
outputs agree), `not possible` (the backend cannot run the original: a dropped opset, a GPU-only
custom call), `failed` (a difference, or the result does not run), `refused` (an `OptimizeError`
before the work: no static input shapes, more memory than is free), `error:<Kind>` (any other
error; a `CompilerOptError` names file, node and field), `crash`, `timeout`. Prints a table of
counts per corpus and outcome; the JSON holds every model's outcome, message and seconds, and is
rewritten after each model (an interrupted run keeps what it did). The twenty-eighth session's run
found the gaps that session fixed (WORKSPACE.md, "Optimize end to end").

`--action go` runs `optimize(method="go")` (the learned policy's zero-shot answer on every graph, then, since the
fiftieth session, the warm start's seeds and a local search within the 5-s budget; the
check stays on, as the API's default, so a model it cannot feed is `refused`; otherwise `done`). `--action autotune-fusion` / `autotune-tile` run `compiler-opt autotune --task fusion|tile` instead
(the CLI's Python functions, small budgets: fusion 12 candidates and the top 3 measured, tile 8
candidates per kernel and the top 2 measured, a fresh measurement cache per model, the result
written to a temporary file): outcome `done` (tuned, the result verified and written; the fusion
tuner also checks the result's outputs against the unfused graph), `nothing to tune` (no kernel or
group the tuner knows), `refused`, `error:<Kind>`, `crash`, `timeout`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child_outcome import REPO, run_child  # noqa: E402
EXTERNAL = REPO.parent / "shared" / "testdata" / "external"
EXTERNAL_SUFFIXES = (".hlo", ".mlir", ".pb", ".pbtxt")

# One model, in a child: the outcome as one JSON line (the child's other output is ignored).
_CHILD = r"""
import json, sys
from compiler_opt.api import OptimizeError, optimize
try:
    if len(sys.argv) > 2 and sys.argv[2] == "go":
        result = optimize(sys.argv[1], target="4xV100", budget_s=5.0, method="go")
        print("OUTCOME " + json.dumps({"outcome": "done", "message": f"{result.speedup:.3g}x"}))
        sys.exit(0)
    result = optimize(sys.argv[1], target="4xV100", budget_s=5.0, check=True)
    check = result.numerics
    outcome = "equal" if check.ok else ("not possible" if not check.ran else "failed")
    print("OUTCOME " + json.dumps({"outcome": outcome, "message": check.one_line()[:400]}))
except OptimizeError as err:
    print("OUTCOME " + json.dumps({"outcome": "refused", "message": str(err)[:400]}))
except Exception as err:
    print("OUTCOME " + json.dumps({"outcome": "error:" + type(err).__name__, "message": str(err)[:400]}))
"""

# One autotune run, in a child; argv: model, task.
_AUTOTUNE_CHILD = r"""
import json, os, sys, tempfile
from compiler_opt.api import OptimizeError
from compiler_opt.cli.costmodel_lib import autotune_fusion_model, autotune_model
from graph_ir.errors import CompilerOptError
model, task = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "tuned" + os.path.splitext(model)[1])
    cache = os.path.join(tmp, "cache.sqlite")
    try:
        if task == "fusion":
            t = autotune_fusion_model(model, out, budget=12, top_k=3, cache_path=cache)
            message = f"{len(t.candidates)} candidates, {t.outcome.measurements} measured, {t.speedup_over_default:.2f}x over the default"
            outcome = "done" if t.outcome.measurements else "nothing to tune"
        else:
            tunings = autotune_model(model, out, budget=8, top_k=2, cache_path=cache)
            message = f"{len(tunings)} kernels tuned"
            outcome = "done" if tunings else "nothing to tune"
        if not os.path.exists(out):
            outcome, message = "failed", "no output written"
        print("OUTCOME " + json.dumps({"outcome": outcome, "message": message[:400]}))
    except (OptimizeError, CompilerOptError) as err:
        print("OUTCOME " + json.dumps({"outcome": "refused" if isinstance(err, OptimizeError) else "error:" + type(err).__name__, "message": str(err)[:400]}))
    except Exception as err:
        print("OUTCOME " + json.dumps({"outcome": "error:" + type(err).__name__, "message": str(err)[:400]}))
"""
ACTIONS = ("check", "go", "autotune-fusion", "autotune-tile")


def onnx_models() -> list[Path]:
    import onnx

    root = Path(onnx.__file__).parent / "backend" / "test" / "data"
    return sorted(root.rglob("*.onnx"))


def external_models() -> list[Path]:
    if not EXTERNAL.is_dir():
        return []
    return sorted(p for p in EXTERNAL.rglob("*") if p.is_file() and p.suffix in EXTERNAL_SUFFIXES)


def run_one(path: Path, timeout_s: float, action: str = "check") -> dict[str, object]:
    if action in ("check", "go"):
        return run_child(_CHILD, [str(path), action], timeout_s)
    return run_child(_AUTOTUNE_CHILD, [str(path), action.split("-")[1]], timeout_s)


def corpus_of(path: Path) -> str:
    parts = path.parts
    if "external" in parts:
        return "external/" + parts[parts.index("external") + 1]
    return "onnx package" if path.suffix == ".onnx" and "backend" in parts else "given"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="more model files")
    parser.add_argument("--onnx", action="store_true", help="the onnx package's shipped models")
    parser.add_argument("--external", action="store_true", help="../shared/testdata/external")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model (default 300)")
    parser.add_argument("--json", help="write every model's outcome here")
    parser.add_argument("--action", choices=ACTIONS, default="check", help="what runs on each model (default: optimize --check)")
    args = parser.parse_args(argv)
    paths = [Path(m) for m in args.models] + (onnx_models() if args.onnx else []) + (external_models() if args.external else [])
    if not paths:
        parser.error("no models: give files, --onnx or --external")
    rows: dict[str, dict[str, object]] = {}
    for index, path in enumerate(paths, 1):
        row = rows[os.fspath(path)] = {"corpus": corpus_of(path), **run_one(path, args.timeout, args.action)}
        print(f"[{index}/{len(paths)}] {row['outcome']:<14} {row['seconds']:>6} s  {path.name}", file=sys.stderr, flush=True)
        if args.json:
            tmp = Path(args.json + ".tmp")
            tmp.write_text(json.dumps(rows, indent=1))
            tmp.replace(args.json)
    counts = collections.Counter((row["corpus"], row["outcome"]) for row in rows.values())
    corpora = sorted({c for c, _ in counts})
    outcomes = sorted({o for _, o in counts})
    print("| outcome | " + " | ".join(corpora) + " |")
    print("|---|" + "---:|" * len(corpora))
    for outcome in outcomes:
        print(f"| {outcome} | " + " | ".join(str(counts.get((c, outcome), 0)) for c in corpora) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
