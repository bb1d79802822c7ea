"""The atheris process: `python -m compiler_opt.fuzz.worker --stats S.json --workdir D -- <libFuzzer args>`.

The first byte of an input picks the format (`targets.FORMATS`), the rest is the file. Coverage
feedback comes from our importer modules (instrumented on import). Counts go to the stats file
every few seconds and whenever a new bug signature appears; a bug's input is saved beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import sys
import time
from typing import Any

__all__ = ["main"]


class _Stats:
    def __init__(self, path: str) -> None:
        self.path = path
        self.data: dict[str, Any] = {"inputs": 0, "formats": {}, "bugs": {}}
        self.last_write = 0.0

    def record(self, fmt: str, outcome: Any, payload: bytes) -> None:
        self.data["inputs"] += 1
        per = self.data["formats"].setdefault(fmt, {"inputs": 0, "accepted": 0, "refused": {}, "bugs": 0})
        per["inputs"] += 1
        new_bug = False
        if outcome.kind == "accepted":
            per["accepted"] += 1
        elif outcome.kind == "refused":
            per["refused"][outcome.detail] = per["refused"].get(outcome.detail, 0) + 1
            if outcome.detail not in per.setdefault("examples", {}):  # the first of each class, for a reader to judge the message
                per["examples"][outcome.detail] = {"message": outcome.report, "sample": self._keep(payload, f"refused-{fmt}")}
                new_bug = True  # written at once, like a bug
        else:
            per["bugs"] += 1
            key = f"{fmt}: {outcome.detail}"
            bug = self.data["bugs"].get(key)
            if bug is None:
                new_bug = True
                sample = self._keep(payload, f"bug-{fmt}")
                bug = self.data["bugs"][key] = {"count": 0, "format": fmt, "sample": sample, "traceback": outcome.report}
            bug["count"] += 1
        now = time.monotonic()
        if new_bug or now - self.last_write > 2.0:
            self.write()
            self.last_write = now

    def _keep(self, payload: bytes, prefix: str) -> str:
        digest = hashlib.sha1(payload).hexdigest()[:12]
        sample = os.path.join(os.path.dirname(self.path), f"{prefix}-{digest}.bin")
        with open(sample, "wb") as handle:
            handle.write(payload)
        return sample

    def write(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(self.data, handle)
        os.replace(tmp, self.path)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="compiler_opt.fuzz.worker")
    parser.add_argument("--stats", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--deadline", type=float, help="wall-clock end (time.time()); start-up counts against it")
    parser.add_argument("--min-seconds", type=int, default=1,
                        help="fuzzing time left after start-up, at least (a loaded machine can spend the whole budget importing)")
    args = parser.parse_args(argv[:split])
    libfuzzer_args = argv[split + 1:]

    import atheris

    logging.disable(logging.CRITICAL)  # TF-refusal warnings per accepted graph: noise here
    from graph_ir.io._native_log import import_tensorflow

    import_tensorflow()  # before instrumentation: TensorFlow's Python is not ours to cover
    import jaxlib.mlir.ir  # noqa: F401
    import onnx  # noqa: F401

    with atheris.instrument_imports(include=["graph_ir.io", "cost_model.profiled"]):
        import cost_model.profiled  # noqa: F401
        from graph_ir.io import hlo_import, onnx_import, stablehlo_import, tf_import  # noqa: F401
        from compiler_opt.fuzz import mutators, targets

    stats = _Stats(args.stats)
    stats.write()
    formats = targets.FORMATS

    def test_one_input(data: bytes) -> None:
        if len(data) < 2:
            return
        fmt = formats[data[0] % len(formats)]
        payload = data[1:]
        stats.record(fmt.name, targets.run_one(fmt, payload, args.workdir), payload)

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        head = data[:1] or bytes([rng.randrange(len(formats))])
        payload = data[1:]
        if payload and rng.random() < 0.5:
            out = mutators.mutate(formats[head[0] % len(formats)].name, payload, rng)
        else:
            out = atheris.Mutate(payload, max(1, max_size - 1))
        return head + out[: max(0, max_size - 1)]

    if args.deadline is not None:  # the imports above took part of the budget
        seconds = max(args.min_seconds, int(args.deadline - time.time()))
        libfuzzer_args = [a for a in libfuzzer_args if not a.startswith("-max_total_time=")] + [f"-max_total_time={seconds}"]
    atheris.Setup([sys.argv[0], *libfuzzer_args], test_one_input, custom_mutator=custom_mutator)
    try:
        atheris.Fuzz()
    finally:
        stats.write()


if __name__ == "__main__":
    main()
