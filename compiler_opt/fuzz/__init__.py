"""Fuzzing of every importer (ONNX, GraphDef binary and text, HLO text, StableHLO, the profiled
placement JSON) with atheris (libFuzzer for Python).

- `targets`: the formats, one input -> accepted (a verified graph) / refused (a project error,
  `CompilerOptError`) / bug (any other exception, or a graph that fails `verify()`);
- `mutators`: structure-aware mutations per format (dropped/duplicated nodes, swapped edges,
  truncated payloads, absurd dims), mixed with libFuzzer's byte mutations;
- `worker`: the atheris process (`python -m compiler_opt.fuzz.worker`), coverage-guided over our
  importer modules; the first byte of an input picks the format;
- `campaign`: runs workers in subprocesses under libFuzzer's per-input time cap and RSS limit,
  restarts them after a native crash / timeout / OOM (each one a found bug), and sums up.

`benchmarks/fuzz_importers.py` runs a bounded campaign; `tests/compiler_opt/fuzz/` a smoke run.
"""

from __future__ import annotations

from compiler_opt.fuzz.campaign import CampaignReport, default_seeds, run_campaign

__all__ = ["CampaignReport", "default_seeds", "run_campaign"]
