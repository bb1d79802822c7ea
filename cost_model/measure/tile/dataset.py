"""The tile dataset: kernels from the workload suite and HLO files, measured with `collect_kernel`,
one TpuGraphs-schema `.npz` per kernel (see cost_model.learned.tpugraphs).

    specs = suite_kernels(hlo_dir="../shared/testdata/external/hlo")   # compiler_opt.costmodel.suite
    collect_tile_dataset(specs, "data/tile", cache=ProfileCache("data/tile.sqlite"), configs=50)

A kernel's file is (re)written after it is measured; a rerun skips kernels whose file already
holds all their configurations, and measures the rest from the cache.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.learned.features import node_features, opcode_id
from cost_model.learned.tile_hw_features import host_caches
from cost_model.learned.tpugraphs import KernelRecord, load_npz, save_npz
from cost_model.measure.harness import label_of, noise_floor
from cost_model.measure.machine import load_average, machine_record
from cost_model.measure.tile.compile_probe import CompileProbe
from cost_model.measure.tile.collect import TILE_PROTOCOL, KernelResult, TimingProtocol, collect_kernel, protocol_of, tile_harness
from cost_model.measure.tile.kernels import KernelSpec, TileKernel
from cost_model.profiling.cache import ProfileCache
from graph_ir.io.atomic import atomic_path

__all__ = ["collect_tile_dataset", "kernel_graph", "kernel_record", "program_of", "protocol_mismatch", "write_spec_list", "read_spec_list"]

logger = logging.getLogger(__name__)


def program_of(spec: KernelSpec) -> str:
    """The program a kernel came from (workload name without mode, or HLO file stem)."""
    return spec.source.split("/")[0].removesuffix(".hlo") or "unknown"


def write_spec_list(specs: Sequence[KernelSpec], path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:  # a listing cut short would make a resumed collection measure other kernels
        tmp.write_text(json.dumps([{"kind": s.kind, "dims": list(s.dims), "source": s.source} | _types(s) for s in specs], indent=1), encoding="utf-8")


def read_spec_list(path: str | os.PathLike[str]) -> list[KernelSpec]:
    return [spec_of(d) for d in json.loads(Path(path).read_text(encoding="utf-8"))]


def _types(spec: KernelSpec) -> dict[str, str]:
    """A kernel's element types for a listing or a record's meta; none for float32 (every dataset before them)."""
    return {} if spec == spec.float32_twin else {"dtype": spec.dtype, "out_dtype": spec.out_dtype}


def spec_of(meta: dict[str, Any]) -> KernelSpec:
    """The kernel a listing entry or a record's meta names (float32 when it names no element type)."""
    return KernelSpec(meta["kind"], tuple(int(d) for d in meta["dims"]), meta.get("source", ""), dtype=meta.get("dtype", "float32"),
                      out_dtype=meta.get("out_dtype", ""))


def kernel_graph(kernel: TileKernel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node_feat, node_opcode, edge_index [consumer, producer]) of a kernel's stage graph."""
    main = len(kernel.stages) - 1
    feats = np.stack([node_features(st.shape, layout=st.layout, dtype=st.dtype, reduce_extents=st.reduce_extents,
                                    flops=kernel.spec.flops if i == main else 0.0) for i, st in enumerate(kernel.stages)])
    opcodes = np.array([opcode_id(st.op) for st in kernel.stages], dtype=np.int64)
    edges = np.array([[i, j] for i, st in enumerate(kernel.stages) for j in st.inputs], dtype=np.int64).reshape(-1, 2)
    return feats, opcodes, edges


def kernel_record(result: KernelResult, machine: dict[str, Any], seed: int, extra_meta: dict[str, Any] | None = None) -> KernelRecord:
    """The TpuGraphs-schema record of one measured kernel (`extra_meta` joins its meta)."""
    spec = result.spec
    feats, opcodes, edges = kernel_graph(result.space.kernel)
    texts = [c.text() for c in result.configs]
    statistic = result.measured.statistic  # the harness's (the timing protocol's) label
    runtime = np.array([label_of(result.measured.measurements[t], statistic) for t in texts])
    median = np.array([result.measured.measurements[t].median_s for t in texts])
    meta = {"kernel": spec.signature, "kind": spec.kind, "dims": list(spec.dims), "source": spec.source, "program": program_of(spec),
            "flops": spec.flops, "machine": machine, "seed": seed, "runtime_statistic": statistic,
            "config_runtime_median": median.tolist(), "retest": [list(p) for p in result.measured.retest.values()],
            "failures": len(result.failures), "is_reduce": list(result.space.is_reduce), "extents": list(result.space.extents)} | _types(spec) | (extra_meta or {})
    return KernelRecord(feats, opcodes, edges, runtime, np.full_like(runtime, runtime.min()),
                        config_feat=np.stack([result.space.features(c) for c in result.configs]), config_text=texts, meta=meta)


def _file_for(out: Path, spec: KernelSpec) -> Path:
    import hashlib

    return out / f"{program_of(spec)}:{spec.kind}:{hashlib.sha256(spec.signature.encode()).hexdigest()[:12]}.npz"


def protocol_mismatch(out_dir: str | os.PathLike[str], protocol: TimingProtocol) -> str | None:
    """Why `out_dir` cannot be resumed under `protocol` (a kernel file of it was timed under another
    one: the two measure different things and must not share a dataset), or None."""
    first = next(iter(sorted(Path(out_dir).glob("*.npz"))), None)  # a folder is collected under one protocol: one file tells
    if first is None:
        return None
    found = protocol_of(load_npz(first).meta.get("machine", {}))
    if found.name == protocol.name:
        return None
    return (f"{first}: timed with the {found.name} tile timing protocol, and this collection uses the {protocol.name} one; "
            f"resume it with --timing-protocol {found.name}, or collect into a new folder")


def collect_tile_dataset(
    specs: Sequence[KernelSpec],
    out_dir: str | os.PathLike[str],
    *,
    cache: ProfileCache,
    configs: int = 50,
    seed: int = 0,
    repeats: int | None = None,
    warmup: int = 1,
    threads: int = 1,
    progress: bool = True,
    protocol: TimingProtocol | None = None,
    compile_timeout: float | None = None,
    compile_cpus: Sequence[int] | None = None,
    code_cache: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Measure every kernel of `specs` (in a seeded random order, so a partial run covers every
    kind and program), write its `.npz`, and return a summary with the noise floor. Timed under
    `protocol` (default `TILE_PROTOCOL`; `repeats` overrides its rounds), recorded in the machine record.
    `compile_timeout` (seconds): every configuration is compiled first in a child process
    (`CompileProbe`) and dropped when that runs past it (about twice the compile work; off by default);
    the child compiles on `compile_cpus` (default: this process's), one configuration ahead of this
    process, and with `code_cache` its assembly becomes each kernel's compiled-code feature file
    (`tile_code_features.write_code_cache`), so no fill compiles the kernel a third time."""
    if code_cache is not None and compile_timeout is None:
        raise ValueError("a code cache is written from the compile probe's assembly: give compile_timeout too")
    from tqdm import tqdm

    from cost_model.measure.tile.runner import host_target, host_target_text

    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target_text = host_target_text()
    protocol = protocol or TILE_PROTOCOL
    mismatch = protocol_mismatch(out, protocol)
    if mismatch:
        raise ValueError(mismatch)
    repeats = protocol.repeats if repeats is None else repeats
    machine = machine_record(target=target_text, repeats=repeats, warmup=warmup, statistic=protocol.statistic, threads=threads,
                             timing_protocol=protocol.name, sample_s=protocol.sample_s, remeasure_top=protocol.remeasure_top,
                             retest_fillers=protocol.retest_fillers)
    machine["caches"] = host_caches(threads).to_dict()  # what the hardware features of its configurations are computed against
    harness = tile_harness(cache, protocol=protocol, threads=threads, repeats=repeats, warmup=warmup, seed=seed)
    order = np.random.default_rng(seed).permutation(len(specs)).tolist()
    target = host_target()
    bar = tqdm(total=len(specs), desc="tile kernels", unit="kernel", disable=not progress)
    probe = None if compile_timeout is None else CompileProbe(compile_timeout, cpus=compile_cpus)
    try:
        done, failures, retest = _collect_in_order(specs, order, out, configs, seed, harness, target, protocol, machine, probe, bar, code_cache)
    finally:
        if probe is not None:
            probe.close()
    bar.close()
    summary = {"kernels": done, "configs_per_kernel": configs, "seed": seed, "failures": failures,
               "noise_floor": noise_floor(retest), "machine": machine}
    with atomic_path(out / "dataset.json") as tmp:  # never a half-written summary beside the files
        tmp.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


def _collect_in_order(specs: Sequence[KernelSpec], order: list[int], out: Path, configs: int, seed: int, harness: Any, target: Any,
                      protocol: TimingProtocol, machine: dict[str, Any], probe: Any, bar: Any,
                      code_cache: str | os.PathLike[str] | None = None) -> tuple[int, int, list[tuple[float, float]]]:
    """`collect_tile_dataset`'s loop: each kernel of `order` timed (or read back) and written; (done, failures, retest pairs)."""
    retest: list[tuple[float, float]] = []
    done = failures = 0
    for index in order:
        spec = specs[index]
        path = _file_for(out, spec)
        if path.is_file():
            record = load_npz(path)
            if record.num_configs >= configs * 0.9:
                retest += [tuple(p) for p in record.meta.get("retest", [])]
                done += 1
                bar.update(1)
                continue
        load_before = load_average()
        try:
            result = collect_kernel(spec, harness, configs=configs, seed=seed, target=target, sample_s=protocol.sample_s, probe=probe)
        except Exception as error:  # a kernel TVM cannot build is skipped and counted, the run goes on
            logger.warning("%s: kernel skipped: %s", spec.signature, error)
            failures += 1
            bar.update(1)
            continue
        if len(result.configs) >= 2:
            # the load average says how busy the shared machine was while these labels were timed
            record = kernel_record(result, machine, seed, {"load1": [load_before, load_average()]})
            save_npz(record, path)
            if code_cache is not None and all(t in result.asm for t in record.config_text):  # none read back from the measurement cache
                from cost_model.learned.tile_code_features import write_code_cache

                write_code_cache(code_cache, replace(record, path=str(path)), [result.asm[t] for t in record.config_text])
            retest += list(result.measured.retest.values())
            done += 1
        failures += len(result.failures)
        bar.update(1)
        bar.set_postfix(noise=f"{noise_floor(retest)['median']:.3f}")
    return done, failures, retest
