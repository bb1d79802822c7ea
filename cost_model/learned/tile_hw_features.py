"""What a tile configuration does to the machine: cache traffic, vector lanes, strides, threads.

The knob vector (`cost_model.measure.tile.space.config_features`) says which split factors and
flags a schedule uses; a tree or a GNN must then learn from ~250 kernels what they mean for a
kernel of a given shape. These features say it directly, from the schedule, the kernel's access
pattern and this machine's caches (`HostCaches`, read once from sysfs / cpuinfo, typical values
where absent, and themselves part of the vector so the model stays machine-aware):

- for the vector registers (`registers` x lanes x 4 bytes), L1, L2 and L3: the loop-nest position whose working set (bytes every buffer touches inside
  it) first fits the cache, the bytes moved into that cache over the whole kernel (the fitting
  tile's footprint times the trips of the loops outside it, where a buffer keeps its tile across
  the innermost of those loops that do not index it), as log2(traffic / compulsory bytes), log2
  of FLOPs per byte of that traffic, and log2 of the fitting working set over the cache size;
- the innermost non-trivial loop: how many buffers it walks with stride 1, stride 0
  (loop-invariant: a register), or a larger stride, and the output's stride (0 = the reduction
  accumulates in place);
- vectorization: lanes used over the machine's float32 lanes, the remainder lanes
  (vector length mod lanes), whether a vectorize was applied, how many inputs the vectorized
  axis reads with a stride (gathers);
- contiguous bytes per row of the L1 tile (inputs: the shortest; the output), over a cache line;
- parallel: log2 of the parallel extent over the threads, log2 FLOPs per parallel chunk;
- loop overhead: log2 of all loop iterations executed over the iteration points, log2 points;
- unrolling (`pragma_auto_unroll_max_step`: TVM unrolls the innermost loops whose trip product
  is at most the step; the vectorized loop is vector code, not counted): log2 of the unrolled
  trips, of the accumulators the unrolled block keeps (output elements, in vectors when
  vectorized), and of its FLOPs per input element it loads;
- the machine: log2 of L1 / L2 / L3 bytes, lanes, vector registers, threads; and whether the access pattern of
  the kernel kind is known (zeros otherwise: a kind added to `kernels.py` needs a line in
  `access_pattern`).
Split factors are perfect (they divide the extent), so no padding or remainder-iteration waste
exists in this space; the vector remainder is the only remainder.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["HW_FEATURES", "HostCaches", "access_pattern", "hardware_features", "host_caches", "index_spans", "loop_nest", "sysfs_size_bytes", "working_sets"]

logger = logging.getLogger(__name__)

HW_FEATURES = 36
_F32 = 4

# One index of a buffer: sum of coefficient * loop variable (loops = the main block's iter vars).
Index = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class HostCaches:
    """Per-core data cache sizes (bytes), cache line, float32 SIMD lanes, threads the kernels run on.
    The defaults are a typical x86 server core (AVX2)."""

    l1: int = 32 * 1024
    l2: int = 512 * 1024
    l3: int = 32 * 1024 * 1024
    line: int = 64
    lanes: int = 8
    threads: int = 1
    registers: int = 16  # vector registers (32 with AVX-512)

    def to_dict(self) -> dict[str, int]:
        return {"l1": self.l1, "l2": self.l2, "l3": self.l3, "line": self.line, "lanes": self.lanes, "threads": self.threads, "registers": self.registers}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> HostCaches:
        return cls(**{k: int(v) for k, v in raw.items() if k in cls.__dataclass_fields__})


def sysfs_size_bytes(text: str) -> int:
    """Bytes of a sysfs cache size ("48K", "2048K", "30M"); shared with `tile_conflict_features`."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


@functools.lru_cache(maxsize=None)
def host_caches(threads: int = 1) -> HostCaches:
    """This machine's caches (Linux sysfs of cpu0) and vector lanes (cpuinfo flags); defaults
    where a file is missing (another OS, a container without sysfs)."""
    sizes: dict[int, int] = {}
    line = HostCaches.line
    try:
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            kind = (index / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            sizes[int((index / "level").read_text())] = sysfs_size_bytes((index / "size").read_text())
            line = int((index / "coherency_line_size").read_text())
    except (OSError, ValueError) as error:
        logger.info("cache sizes not readable from sysfs (%s): typical values used", error)
    lanes = HostCaches.lanes
    try:
        flags = next((line_.split(":", 1)[1].split() for line_ in Path("/proc/cpuinfo").read_text().splitlines() if line_.startswith("flags")), [])
        lanes = 16 if "avx512f" in flags else 8 if "avx" in flags else 4 if flags else lanes
    except OSError:
        pass
    default = HostCaches()
    return HostCaches(sizes.get(1, default.l1), sizes.get(2, default.l2), sizes.get(3, default.l3), line, lanes, max(1, int(threads)),
                      32 if lanes == 16 else 16)


def access_pattern(kind: str, dims: Sequence[int]) -> list[tuple[str, bool, tuple[Index, ...]]] | None:
    """(buffer, is_output, indices) of a tile kernel kind (cost_model.measure.tile.kernels); loops
    are numbered as the main block's iter vars (spatial first, then reduction); padded inputs
    are read through their padded index (the pad is inlined). None for an unknown kind."""
    if kind == "matmul":  # i j k
        return [("A", False, (((0, 1),), ((2, 1),))), ("B", False, (((2, 1),), ((1, 1),))), ("C", True, (((0, 1),), ((1, 1),)))]
    if kind == "batch_matmul":  # q i j k
        return [("A", False, (((0, 1),), ((1, 1),), ((3, 1),))), ("B", False, (((0, 1),), ((3, 1),), ((2, 1),))),
                ("C", True, (((0, 1),), ((1, 1),), ((2, 1),)))]
    if kind in ("reduce", "ew_reduce"):  # i r
        return [("X", False, (((0, 1),), ((1, 1),))), ("Y", True, (((0, 1),),))]
    stride = int(dims[-1]) if dims else 1
    if kind == "conv2d_nhwc":  # b y x o rc ry rx
        return [("X", False, (((0, 1),), ((1, stride), (5, 1)), ((2, stride), (6, 1)), ((4, 1),))),
                ("W", False, (((5, 1),), ((6, 1),), ((4, 1),), ((3, 1),))), ("O", True, (((0, 1),), ((1, 1),), ((2, 1),), ((3, 1),)))]
    if kind == "conv2d_nchw":  # b o y x rc ry rx
        return [("X", False, (((0, 1),), ((4, 1),), ((2, stride), (5, 1)), ((3, stride), (6, 1)))),
                ("W", False, (((1, 1),), ((4, 1),), ((5, 1),), ((6, 1),))), ("O", True, (((0, 1),), ((1, 1),), ((2, 1),), ((3, 1),)))]
    if kind == "depthwise_nhwc":  # b y x c ry rx
        return [("X", False, (((0, 1),), ((1, stride), (4, 1)), ((2, stride), (5, 1)), ((3, 1),))),
                ("W", False, (((4, 1),), ((5, 1),), ((3, 1),))), ("O", True, (((0, 1),), ((1, 1),), ((2, 1),), ((3, 1),)))]
    return None


def index_spans(indices: Sequence[Index], tile: Sequence[int]) -> list[int]:
    """Elements each index spans when every loop l runs over tile[l] consecutive values."""
    return [1 + sum(coef * (tile[loop] - 1) for loop, coef in index) for index in indices]


def loop_nest(config: Any, is_reduce: Sequence[bool]) -> list[tuple[str, int, int]]:
    """(level, loop, factor) outer to inner, as TileSpace.schedule_object orders the loops."""
    from cost_model.measure.tile.space import ORDERS

    levels: dict[str, list[tuple[int, int]]] = {"S0": [], "S1": [], "S2": [], "R0": [], "R1": []}
    for i, (tile, reduce) in enumerate(zip(config.tiles, is_reduce)):
        for level, factor in enumerate(tile):
            levels[("R" if reduce else "S") + str(level)].append((i, int(factor)))
    return [(level, i, f) for level in ORDERS[config.order].split() for i, f in levels[level]]


def working_sets(nest: Sequence[tuple[str, int, int]], pattern: Sequence[tuple[str, bool, tuple[Index, ...]]], loops: int) -> list[list[int]]:
    """Per nest position q (0 = the whole kernel, len(nest) = one iteration point): the bytes of
    each buffer that the loops at positions >= q touch."""
    out = []
    for q in range(len(nest) + 1):
        tile = [1] * loops
        for _, loop, factor in nest[q:]:
            tile[loop] *= factor
        out.append([_F32 * math.prod(index_spans(indices, tile)) for _, _, indices in pattern])
    return out


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1e-30))


def hardware_features(config: Any, is_reduce: Sequence[bool], extents: Sequence[int], kind: str, dims: Sequence[int],
                      host: HostCaches | None = None) -> np.ndarray:
    """The (HW_FEATURES,) vector of the module docstring for one configuration of a kernel."""
    from cost_model.measure.tile.kernels import KernelSpec
    from cost_model.measure.tile.space import ORDERS

    host = host or host_caches()
    out = np.zeros(HW_FEATURES, dtype=np.float32)
    out[-7:] = [_log2(host.l1), _log2(host.l2), _log2(host.l3), host.lanes, host.registers, host.threads, 0.0]
    pattern = access_pattern(kind, dims)
    if pattern is None:
        return out
    out[-1] = 1.0
    loops = len(extents)
    flops = float(KernelSpec(kind, tuple(int(d) for d in dims)).flops)
    nest = loop_nest(config, is_reduce)
    sets = working_sets(nest, pattern, loops)
    compulsory = float(sum(sets[0]))
    indexed_by = [{loop for index in indices for loop, _ in index} for _, _, indices in pattern]
    f = 0
    for cache in (host.registers * host.lanes * _F32, host.l1, host.l2, host.l3):
        q = next(i for i in range(len(sets)) if sum(sets[i]) <= cache or i == len(sets) - 1)
        traffic = 0.0
        for b, footprint in enumerate(sets[q]):
            trips = 1
            reusing = True  # the innermost outer loops that do not index b leave its tile in the cache
            for _, loop, factor in reversed(nest[:q]):
                reusing = reusing and loop not in indexed_by[b]
                if not reusing:
                    trips *= factor
            traffic += footprint * trips
        out[f : f + 3] = [_log2(traffic / compulsory), _log2(flops / traffic), _log2(sum(sets[q]) / cache)]
        f += 3
    # innermost non-trivial loop: stride of every buffer along it (row-major element strides)
    inner = ([n for n in nest if n[2] > 1] or nest)[-1][1]
    full = [index_spans(indices, list(extents)) for _, _, indices in pattern]
    strides = []
    for (_, _, indices), shape in zip(pattern, full):
        row = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
        strides.append(sum(coef * row[d] for d, index in enumerate(indices) for loop, coef in index if loop == inner))
    out_stride = next(s for s, (_, is_out, _) in zip(strides, pattern) if is_out)
    out[f : f + 4] = [sum(s == 1 for s in strides), sum(s == 0 for s in strides), sum(s > 1 for s in strides), _log2(out_stride + 1)]
    f += 4
    # vectorization (TileSpace.schedule_object: the innermost loop when it is the last spatial loop's S2)
    last_spatial = max(i for i, r in enumerate(is_reduce) if not r)
    vec = int(config.tiles[last_spatial][-1]) if (config.vectorize and ORDERS[config.order].endswith("S2")) else 1
    applied = vec > 1
    gathers = 0
    if applied:
        for (_, is_out, indices), shape in zip(pattern, full):
            row = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
            step = sum(coef * row[d] for d, index in enumerate(indices) for loop, coef in index if loop == last_spatial)
            gathers += int(not is_out and step > 1)
    out[f : f + 4] = [vec / host.lanes if applied else 0.0, (vec % host.lanes) / host.lanes if applied else 0.0, float(applied), gathers]
    f += 4
    # contiguous bytes per row of the L1 tile, over a cache line
    q1 = next(i for i in range(len(sets)) if sum(sets[i]) <= host.l1 or i == len(sets) - 1)
    tile = [1] * loops
    for _, loop, factor in nest[q1:]:
        tile[loop] *= factor
    runs = [_F32 * index_spans(indices[-1:], tile)[0] for _, _, indices in pattern]
    out[f : f + 2] = [_log2(min(r for r, (_, is_out, _) in zip(runs, pattern) if not is_out) / host.line),
                      _log2(next(r for r, (_, is_out, _) in zip(runs, pattern) if is_out) / host.line)]
    f += 2
    # parallel extent (the fused S0 loops) over the threads
    chunks = math.prod(t[0] for t, r in zip(config.tiles, is_reduce) if not r) if config.parallel else 1
    out[f : f + 2] = [_log2(chunks / host.threads), _log2(flops / chunks)]
    f += 2
    # loop overhead: iterations of every loop of the nest, over the iteration points
    points = math.prod(int(e) for e in extents)
    iterations, trips = 0, 1
    for _, _, factor in nest:
        trips *= factor
        iterations += trips
    out[f : f + 2] = [_log2(iterations / points), _log2(points)]
    f += 2
    # the unrolled block (innermost loops with trip product <= the unroll step; the vector loop aside)
    body = nest[:-1] if applied else nest
    unrolled, product = 0, 1
    while config.unroll > 0 and unrolled < len(body) and product * body[-1 - unrolled][2] <= config.unroll:
        product *= body[-1 - unrolled][2]
        unrolled += 1
    block = [1] * loops
    for _, loop, factor in body[len(body) - unrolled :] + (nest[-1:] if applied else []):
        block[loop] *= factor
    elements = [math.prod(index_spans(indices, block)) for _, _, indices in pattern]
    accumulators = next(e for e, (_, is_out, _) in zip(elements, pattern) if is_out)
    inputs = sum(e for e, (_, is_out, _) in zip(elements, pattern) if not is_out)
    out[f : f + 3] = [_log2(product), _log2(math.ceil(accumulators / host.lanes) if applied else accumulators),
                      _log2(flops / points * math.prod(block) / inputs)]
    return out
