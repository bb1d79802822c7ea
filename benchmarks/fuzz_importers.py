"""Fuzz every importer for a bounded time and report inputs, distinct errors, bugs and crashes.

    PYTHONPATH=. python benchmarks/fuzz_importers.py --seconds 300

Seeds: `../shared/testdata` (HLO, StableHLO, GraphDefs, placement JSON) and the ONNX models in
onnx's own backend tests. Writes benchmarks/results/fuzz_importers.json (+ the corpus, worker
logs and any crash artifacts under benchmarks/results/fuzz/).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compiler_opt.fuzz.campaign import default_seeds, iter_bugs, iter_refusal_examples, main_table, run_campaign  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--testdata", default=str(ROOT.parent / "shared" / "testdata"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--timeout", type=int, default=20, help="per-input time cap (s)")
    parser.add_argument("--rss-mb", type=int, default=6144, help="memory cap of a worker (MiB)")
    args = parser.parse_args()
    out = Path(args.out)
    seeds = default_seeds(args.testdata)
    report = run_campaign(seeds, args.seconds, out / "fuzz", per_input_timeout_s=args.timeout, rss_limit_mb=args.rss_mb)
    print(main_table(report))
    for line in iter_refusal_examples(report):
        print("first refusal:", line)
    for line in iter_bugs(report):
        print("bug:", line)
    for crash in report.crashes:
        print(f"native {crash['kind']} ({crash['format']}): {crash['artifact']}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "fuzz_importers.json").write_text(json.dumps(report.to_json(), indent=1))
    return 0 if not report.bugs and not report.crashes else 1


if __name__ == "__main__":
    sys.exit(main())
