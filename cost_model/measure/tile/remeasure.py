"""Measure the noisiest kernels of a tile dataset again, when the machine is quiet, into the same cache.

    with ProfileCache("out/tile/measurements.sqlite") as cache:
        remeasure_tile_dataset("out/tile", cache=cache, count=80, max_load=2.5)

Why: most of the first data was timed while other jobs kept the load average at 18-28, so some
kernels' labels carry tens of percent of noise (`quality.kernel_noise`). For the `count`
kernels with the highest score, every stored configuration is compiled again, checked against
the unscheduled kernel and timed in one interleaved pass, under the timing protocol the kernel was
collected with (`collect.protocol_of` its machine record: sample length, rounds, label statistic;
`repeats` overrides the rounds), by a harness whose backend is that protocol's + `/remeasure`
(`tvm-llvm/remeasure` for the short protocol; same SQLite file, same machine key; the collection's
rows stay as they were). The kernel's `.npz` is then rewritten: each label becomes the protocol's
statistic over the samples of both passes (the minimum for the short protocol, the second fastest
for the long one: timing noise mostly slows a run), the (collection, re-measurement) labels go to
`meta["remeasure"]["pairs"]` (a full test-retest of that kernel), with the 1-minute load average
before and after and the time.

To keep the collection's folder as it is, copy it first: `copy_dataset(src, dst)` (what `costmodel
remeasure DIR --out NEW` does) copies the `.npz` files, the summaries and the measurement cache,
resolving a symlinked folder (a plain `cp -r` of a symlink copies the link, and the re-measurement then
rewrites the original; the twenty-second session did exactly that and restored the labels from
`meta["remeasure"]["runtime_collect"]`).

Resumable: a kernel whose file already has `meta["remeasure"]` is skipped, and configurations
already in the cache under the re-measurement backend are not timed again. With `max_load`, each
kernel waits (up to `max_wait` seconds) for the 1-minute load average to drop below it, and the
run stops, resumable, when it does not.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cost_model.learned.tpugraphs import KernelRecord, load_dir, save_npz
from cost_model.measure.harness import Harness, label_of, noise_floor
from cost_model.measure.machine import load_average, machine_key
from cost_model.measure.quality import kernel_noise, noisiest
from cost_model.measure.tile.collect import collect_kernel, protocol_of, tile_harness
from cost_model.measure.tile.dataset import spec_of
from cost_model.measure.tile.kernels import KernelSpec
from cost_model.measure.tile.space import TileConfig
from cost_model.profiling.cache import ProfileCache
from cost_model.profiling.timing import Measurement

__all__ = ["REMEASURE_SUFFIX", "copy_dataset", "merge_remeasurement", "remeasure_tile_dataset", "wait_for_quiet"]

logger = logging.getLogger(__name__)

# After the collection protocol's backend: the re-measurement's rows beside the collection's (a dataset timed
# with the short protocol, every one before the twenty-third session, gets `tvm-llvm/remeasure`).
REMEASURE_SUFFIX = "/remeasure"


def wait_for_quiet(max_load: float | None, max_wait: float, *, poll: float = 15.0,
                   load: Callable[[], float] = load_average, sleep: Callable[[float], None] = time.sleep) -> bool:
    """True once the load average is below `max_load` (at once when it is None or unknown);
    False when `max_wait` seconds pass first."""
    if max_load is None:
        return True
    waited = 0.0
    while True:
        value = load()
        if not np.isfinite(value) or value < max_load:
            return True
        if waited >= max_wait:
            return False
        sleep(poll)
        waited += poll


def copy_dataset(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """A real copy of the dataset folder `src` at `dst` (files, not links; a symlinked `src` is
    resolved), written beside `dst` and renamed into place, so an interrupted copy leaves nothing
    half-made. A `dst` that is already a copy of `src` (the same kernel files) is kept as it is, so a
    stopped re-measurement resumes there; any other non-empty `dst` is refused."""
    source, target = Path(src).resolve(), Path(dst)
    if not source.is_dir() or not any(source.glob("*.npz")):
        raise FileNotFoundError(f"{src}: not a dataset folder (no .npz files)")
    if target.exists():
        if target.resolve() == source:
            raise ValueError(f"{dst}: is the dataset folder itself; --out must name another folder")
        names = {f.name for f in target.glob("*.npz")}
        if names and names == {f.name for f in source.glob("*.npz")}:
            return target  # a copy made before: resume in it
        if any(target.iterdir()):
            raise FileExistsError(f"{dst}: exists and is not a copy of {src}; name a new or empty folder")
        target.rmdir()
    staging = target.with_name(target.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(source, staging, symlinks=False)
    staging.rename(target)
    return target


def merge_remeasurement(record: KernelRecord, new: dict[str, Any], *, old_samples: dict[str, tuple[float, ...]] | None = None,
                        info: dict[str, Any] | None = None, statistic: str = "min") -> KernelRecord:
    """`record` with every configuration in `new` (config text -> Measurement) relabelled as `statistic`
    (the timing protocol's) over both passes' samples: for `min`, the minimum of the two passes' labels;
    for another statistic, over the union of the samples when the collection's are known (`old_samples`),
    else the lower of the two labels. The (old label, new pass's label) pairs and `info` go to
    meta["remeasure"]."""
    runtime = np.asarray(record.config_runtime, dtype=np.float64).copy()
    median = np.asarray(record.meta.get("config_runtime_median", runtime), dtype=np.float64).copy()
    pairs = []
    for i, text in enumerate(record.config_text):
        m = new.get(text)
        if m is None:
            continue
        label = label_of(m, statistic)
        pairs.append([float(runtime[i]), float(label)])
        old = tuple((old_samples or {}).get(text, ()))
        samples = old + tuple(m.samples)
        if statistic != "min" and old:
            runtime[i] = label_of(Measurement.from_samples(samples), statistic)
        else:
            runtime[i] = min(runtime[i], label)
        median[i] = float(np.median(samples)) if samples else m.median_s
    meta = dict(record.meta)
    meta["remeasure"] = dict(info or {}) | {"pairs": pairs, "runtime_collect": [float(x) for x in record.config_runtime],
                                            "noise_floor": noise_floor([tuple(p) for p in pairs])}
    meta["config_runtime_median"] = median.tolist()
    meta["runtime_statistic"] = f"{statistic} over the collection's and the re-measurement's samples"
    return replace(record, config_runtime=runtime, config_runtime_normalizers=np.full_like(runtime, runtime.min()), meta=meta)


def remeasure_tile_dataset(
    data_dir: str | os.PathLike[str],
    *,
    cache: ProfileCache,
    count: int | None = None,
    min_score: float = 0.0,
    repeats: int | None = None,
    warmup: int = 1,
    threads: int = 1,
    seed: int = 0,
    max_load: float | None = None,
    max_wait: float = 600.0,
    progress: bool = True,
) -> dict[str, Any]:
    """Re-measure the noisiest kernels of `data_dir` (see the module docstring); returns a summary,
    also written to `data_dir/remeasure.json`."""
    from tqdm import tqdm

    from cost_model.measure.tile.runner import host_target, host_target_text

    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    out = Path(data_dir)
    records = {r.path: r for r in load_dir(out)}
    rows = [kernel_noise(r) for r in records.values()]
    chosen = noisiest(rows, count, min_score=min_score)
    key = machine_key(host_target_text(), threads)
    harnesses: dict[str, Harness] = {}  # one per timing protocol: a kernel is re-timed the way it was collected
    target = host_target()
    log_path = out / "remeasure.json"
    log: dict[str, Any] = json.loads(log_path.read_text(encoding="utf-8")) if log_path.is_file() else {"kernels": {}}
    stopped = ""
    bar = tqdm(total=len(chosen), desc="remeasure", unit="kernel", disable=not progress)
    for row in chosen:
        record = records[row.path]
        if not wait_for_quiet(max_load, max_wait):
            stopped = f"load average {load_average():.1f} stayed above {max_load} for {max_wait:.0f} s"
            logger.warning("remeasure stopped (resumable): %s", stopped)
            break
        meta = record.meta
        spec = spec_of(meta)
        load_before, began = load_average(), time.time()
        protocol = protocol_of(meta.get("machine", {}))
        if protocol.name not in harnesses:
            harnesses[protocol.name] = tile_harness(cache, protocol=protocol, threads=threads, repeats=repeats, backend_suffix=REMEASURE_SUFFIX,
                                                    warmup=warmup, retest_fraction=0.0, seed=seed)
        harness = harnesses[protocol.name]
        result = collect_kernel(spec, harness, configs=0, seed=seed, target=target, sample_s=protocol.sample_s,
                                extra=[TileConfig.from_text(t) for t in record.config_text])
        old = {t: m.samples for t in record.config_text if (m := cache.get(_key(spec, t), protocol.backend, key)) is not None}
        info = {"backend": harness.backend, "timing_protocol": protocol.name, "time": began, "seconds": time.time() - began, "load1_before": load_before,
                "load1_after": load_average(), "score_before": row.score, "failures": len(result.failures)}
        merged = merge_remeasurement(record, result.measured.measurements, old_samples=old, info=info, statistic=protocol.statistic)
        save_npz(merged, record.path)
        after = kernel_noise(merged)
        log["kernels"][Path(record.path).name] = info | {"score_after": after.score, "retest_tau": after.retest_tau,
                                                         "noise_floor": merged.meta["remeasure"]["noise_floor"]}
        log_path.write_text(json.dumps(log, indent=1), encoding="utf-8")
        bar.update(1)
        bar.set_postfix(load=f"{info['load1_after']:.1f}", tau=f"{after.retest_tau:.2f}")
    bar.close()
    pairs = [tuple(p) for r in load_dir(out) for p in r.meta.get("remeasure", {}).get("pairs", [])]
    entries = list(log["kernels"].values())
    summary = {"chosen": len(chosen), "remeasured_total": len(entries), "stopped": stopped,
               "old_vs_new_noise_floor": noise_floor(pairs),
               "retest_tau_mean": float(np.nanmean([e["retest_tau"] for e in entries])) if entries else float("nan"),
               "load1_max": float(np.nanmax([e["load1_after"] for e in entries])) if entries else float("nan")}
    log["summary"] = summary
    log_path.write_text(json.dumps(log, indent=1), encoding="utf-8")
    return summary


def _key(spec: KernelSpec, text: str) -> str:
    from cost_model.measure.harness import config_key

    return config_key(spec.signature, text)
