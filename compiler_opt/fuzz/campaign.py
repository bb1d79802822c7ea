"""A bounded fuzzing campaign: atheris workers in subprocesses, restarted after native failures."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from compiler_opt.fuzz.targets import FORMATS

__all__ = ["CampaignReport", "default_seeds", "iter_bugs", "iter_refusal_examples", "main_table", "run_campaign"]

_ROOT = Path(__file__).resolve().parents[2]  # the checkout: compiler_opt/fuzz/campaign.py
_ARTIFACT_KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")


@dataclass
class CampaignReport:
    seconds: float
    seeds: int
    inputs: int = 0
    formats: dict[str, Any] = field(default_factory=dict)
    bugs: dict[str, Any] = field(default_factory=dict)  # Python-level: signature -> count, sample
    crashes: list[dict[str, str]] = field(default_factory=list)  # native: crash / timeout / OOM
    restarts: int = 0

    @property
    def distinct_errors(self) -> int:
        """Distinct (format, project error class) refusals."""
        return sum(len(per["refused"]) for per in self.formats.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1), "seeds": self.seeds, "inputs": self.inputs,
            "distinct_errors": self.distinct_errors, "bugs": self.bugs, "crashes": self.crashes,
            "restarts": self.restarts, "formats": self.formats,
        }


def default_seeds(testdata: str | os.PathLike[str], *, max_bytes: int = 256 * 1024) -> dict[str, list[Path]]:
    """Real files per format: `testdata` is `../shared/testdata`; ONNX seeds are the models that
    ship in the onnx package's own backend tests."""
    testdata = Path(testdata)
    external = testdata / "external"
    seeds: dict[str, list[Path]] = {
        "hlo": sorted(external.glob("hlo/*.hlo")),
        "stablehlo": sorted(external.glob("stablehlo/*.mlir")),
        "tf_text": sorted(external.glob("tf/*.pbtxt")),
        "tf_binary": sorted(external.glob("tf/*.pb")) + sorted(external.glob("tf/saved_model/*.pb")),
        "placement_json": sorted(testdata.glob("placement/**/*.json")),
    }
    try:
        import onnx

        data = Path(onnx.__file__).parent / "backend" / "test" / "data"
        seeds["onnx"] = sorted(data.glob("simple/*/model.onnx")) + sorted(data.glob("pytorch-operator/*/model.onnx"))
    except ImportError:
        seeds["onnx"] = []
    return {fmt: [p for p in paths if p.stat().st_size <= max_bytes] for fmt, paths in seeds.items()}


def _write_corpus(seeds: dict[str, list[Path]], corpus: Path) -> int:
    index = {f.name: i for i, f in enumerate(FORMATS)}
    count = 0
    for fmt, paths in seeds.items():
        for path in paths:
            (corpus / f"seed-{fmt}-{count}").write_bytes(bytes([index[fmt]]) + path.read_bytes())
            count += 1
    return count


def _merge(report: CampaignReport, stats: dict[str, Any]) -> None:
    report.inputs += stats.get("inputs", 0)
    for fmt, per in stats.get("formats", {}).items():
        total = report.formats.setdefault(fmt, {"inputs": 0, "accepted": 0, "refused": {}, "bugs": 0})
        total["inputs"] += per["inputs"]
        total["accepted"] += per["accepted"]
        total["bugs"] += per["bugs"]
        for name, count in per["refused"].items():
            total["refused"][name] = total["refused"].get(name, 0) + count
        for name, example in per.get("examples", {}).items():
            total.setdefault("examples", {}).setdefault(name, example)
    for key, bug in stats.get("bugs", {}).items():
        total = report.bugs.setdefault(key, {"count": 0, "sample": bug["sample"], "traceback": bug["traceback"]})
        total["count"] += bug["count"]


# Fuzzing time each worker keeps after its imports: on two loaded cores TensorFlow's import alone
# took the whole 30 s of CI's smoke campaign, which then ran one of its 18 seeds.
_MIN_FUZZ_S = 15.0


def run_campaign(
    seeds: dict[str, list[Path]],
    seconds: float,
    out_dir: str | os.PathLike[str],
    *,
    per_input_timeout_s: int = 20,
    rss_limit_mb: int = 6144,
    max_len: int = 256 * 1024,
    max_restarts: int = 20,
    extra_env: dict[str, str] | None = None,
) -> CampaignReport:
    """Fuzz for about `seconds` of wall time, worker start-up included (running the seeds once
    may take longer, and each worker fuzzes at least `_MIN_FUZZ_S` after its start-up); results
    and artifacts in `out_dir`."""
    out = Path(out_dir).resolve()  # the workers run in the checkout
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus"
    corpus.mkdir(exist_ok=True)
    artifacts = out / "artifacts"
    artifacts.mkdir(exist_ok=True)
    start = time.monotonic()
    report = CampaignReport(seconds=0.0, seeds=_write_corpus(seeds, corpus))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")])))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.update(extra_env or {})
    seen_artifacts: set[str] = set()
    run = 0
    while run <= max_restarts:
        remaining = seconds - (time.monotonic() - start)
        if remaining < 5:
            break
        stats_path = out / f"stats-{run}.json"
        with tempfile.TemporaryDirectory(prefix="fuzz-work-") as workdir:
            command = [
                sys.executable, "-m", "compiler_opt.fuzz.worker", "--stats", str(stats_path), "--workdir", workdir,
                "--deadline", str(time.time() + remaining), "--min-seconds", str(int(min(remaining, _MIN_FUZZ_S))), "--",
                str(corpus), f"-max_total_time={int(remaining)}", f"-timeout={per_input_timeout_s}",
                f"-rss_limit_mb={rss_limit_mb}", f"-max_len={max_len}", f"-artifact_prefix={artifacts}{os.sep}",
                "-print_final_stats=1", "-close_fd_mask=1",
            ]
            log_path = out / f"worker-{run}.log"
            with open(log_path, "wb") as log:
                try:
                    proc = subprocess.run(command, cwd=_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          timeout=remaining + 180)
                    code = proc.returncode
                except subprocess.TimeoutExpired:
                    code = -1
        if stats_path.is_file():
            _merge(report, json.loads(stats_path.read_text()))
        new = sorted(set(glob.glob(str(artifacts / "*"))) - seen_artifacts)
        seen_artifacts.update(new)
        failures = [a for a in new if Path(a).name.split("-")[0] in _ARTIFACT_KINDS]
        for artifact in failures:
            data = Path(artifact).read_bytes()
            fmt = FORMATS[data[0] % len(FORMATS)].name if data else "?"
            tail = log_path.read_text(errors="replace")[-3000:]
            report.crashes.append({"kind": Path(artifact).name.split("-")[0], "format": fmt, "artifact": artifact, "log": tail})
        if code == 0 or not failures and code != -1:
            if code != 0 and not failures:  # the worker died without an artifact: a crash too
                report.crashes.append({"kind": f"exit {code}", "format": "?", "artifact": "",
                                       "log": log_path.read_text(errors="replace")[-3000:]})
            else:
                break
        run += 1
        report.restarts = run
    report.seconds = time.monotonic() - start
    return report


def main_table(report: CampaignReport) -> str:
    """A plain table of the campaign, one row per format."""
    rows = [("format", "inputs", "accepted", "refused", "error classes", "bugs")]
    for fmt in [f.name for f in FORMATS]:
        per = report.formats.get(fmt, {"inputs": 0, "accepted": 0, "refused": {}, "bugs": 0})
        rows.append((fmt, str(per["inputs"]), str(per["accepted"]), str(sum(per["refused"].values())),
                     str(len(per["refused"])), str(per["bugs"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.append(f"total: {report.inputs} inputs in {report.seconds:.0f} s, {report.distinct_errors} distinct "
                 f"(format, error class) refusals, {len(report.bugs)} distinct Python bugs, "
                 f"{len(report.crashes)} native crashes/timeouts/OOMs, {report.restarts} restarts")
    return "\n".join(lines)


def iter_refusal_examples(report: CampaignReport) -> Iterable[str]:
    """The first refusal of each (format, error class): what a user would read, to judge."""
    for fmt, per in report.formats.items():
        for name, example in sorted(per.get("examples", {}).items()):
            yield f"{fmt} {name}: {example['message'][:300]} (sample {example['sample']})"


def iter_bugs(report: CampaignReport) -> Iterable[str]:
    for key, bug in report.bugs.items():
        yield f"{key} x{bug['count']} (sample {bug['sample']})"
