"""The schedule space of a tile kernel, and one point of it (`TileConfig`, the knob vector).

The space is MetaSchedule's CPU design space for a block with reductions, written out as knobs:
- multi-level tiling: every spatial loop split into 3 levels (S0, S1, S2), every reduction loop
  into 2 (R0, R1), by perfect factors (MetaSchedule's `sample_perfect_tile`, innermost factor at
  most `max_innermost`);
- the loop order, one of `ORDERS`: "S0 S1 R0 S2 R1" is MetaSchedule's CPU "SSRSRS" structure
  with one spatial level fewer; the others are the orders a hand schedule would try (reduction outside the inner
  spatial tile, or innermost);
- vectorize the innermost loop when it is spatial (ParallelizeVectorizeUnroll's vectorize);
- unroll: `pragma_auto_unroll_max_step` on the outer loop, from MetaSchedule's CPU list
  (0, 16, 64, 512);
- parallel: the S0 loops fused and parallelized.
Producers (padding, the elementwise chain before a reduction) are inlined, as MetaSchedule's
AutoInline rule does. Not covered: cache-write / rfactor / compute-location sampling.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from cost_model.learned.tile_hw_features import HW_FEATURES, HostCaches, hardware_features
from cost_model.measure.tile.kernels import TileKernel

__all__ = ["ORDERS", "UNROLL_STEPS", "MAX_LOOPS", "TileConfig", "TileSpace", "config_features", "CONFIG_FEATURES", "refresh_config_features"]

ORDERS = ("S0 S1 R0 S2 R1", "S0 R0 S1 R1 S2", "S0 S1 R0 R1 S2", "S0 S1 S2 R0 R1")
UNROLL_STEPS = (0, 16, 64, 512)
MAX_LOOPS = 7  # conv2d: 4 spatial + 3 reduction
_LOOP_FEATURES = 3  # per loop slot: log2 extent, reduction flag, innermost (contiguous) spatial loop flag
_NEST_FEATURES = 12
_KNOB_FEATURES = MAX_LOOPS * 3 + len(ORDERS) + 7 + MAX_LOOPS * _LOOP_FEATURES + _NEST_FEATURES
CONFIG_FEATURES = _KNOB_FEATURES + HW_FEATURES  # + what the nest does to this machine (cost_model.learned.tile_hw_features)


@dataclass(frozen=True)
class TileConfig:
    """Split factors per loop (outer to inner; product = extent), order index, and the flags."""

    tiles: tuple[tuple[int, ...], ...]
    order: int = 0
    vectorize: bool = True
    unroll: int = 0
    parallel: bool = False

    def text(self) -> str:
        """Canonical text (cache key part and what `node.tile` stores)."""
        return json.dumps({"tiles": [list(t) for t in self.tiles], "order": self.order, "vectorize": int(self.vectorize),
                           "unroll": self.unroll, "parallel": int(self.parallel)}, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> TileConfig:
        raw = json.loads(text)
        return cls(tuple(tuple(int(f) for f in t) for t in raw["tiles"]), int(raw["order"]), bool(raw["vectorize"]), int(raw["unroll"]), bool(raw["parallel"]))

    def flat(self) -> tuple[int, ...]:
        """All knobs as one integer tuple (for `node.tile`)."""
        return tuple(f for t in self.tiles for f in t) + (self.order, int(self.vectorize), self.unroll, int(self.parallel))


def _perfect_tile(rng: np.random.Generator, extent: int, parts: int, max_innermost: int) -> tuple[int, ...]:
    # Assign each prime factor to a random level; retry while the innermost exceeds its cap.
    primes = []
    n, p = extent, 2
    while p * p <= n:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    if n > 1:
        primes.append(n)
    for _ in range(32):
        factors = [1] * parts
        for prime in primes:
            factors[int(rng.integers(parts))] *= prime
        if factors[-1] <= max_innermost:
            return tuple(factors)
    factors = [1] * parts
    factors[0] = extent
    return tuple(factors)


class TileSpace:
    """The loops of a kernel's main block and the knobs over them."""

    def __init__(self, kernel: TileKernel, *, max_innermost: int = 64) -> None:
        from tvm.s_tir import Schedule

        self.kernel = kernel
        self.max_innermost = max_innermost
        sch = Schedule(kernel.func)
        block = sch.get(sch.get_sblock(kernel.main_block))
        self.extents = tuple(int(iv.dom.extent) for iv in block.iter_vars)
        self.is_reduce = tuple(int(iv.iter_type) != 0 for iv in block.iter_vars)
        if len(self.extents) > MAX_LOOPS:
            raise ValueError(f"{kernel.spec.signature}: {len(self.extents)} loops, at most {MAX_LOOPS} supported")

    def levels(self, loop: int) -> int:
        return 2 if self.is_reduce[loop] else 3

    def sample(self, rng: np.random.Generator) -> TileConfig:
        tiles = tuple(_perfect_tile(rng, e, self.levels(i), self.max_innermost) for i, e in enumerate(self.extents))
        return TileConfig(tiles, int(rng.integers(len(ORDERS))), bool(rng.integers(2)), int(rng.choice(UNROLL_STEPS)), bool(rng.integers(2)))

    def sample_distinct(self, rng: np.random.Generator, count: int, *, tries: int = 20) -> list[TileConfig]:
        seen: dict[str, TileConfig] = {}
        for _ in range(count * tries):
            if len(seen) >= count:
                break
            config = self.sample(rng)
            seen.setdefault(config.text(), config)
        return list(seen.values())

    def validate(self, config: TileConfig) -> None:
        if len(config.tiles) != len(self.extents):
            raise ValueError(f"{self.kernel.spec.signature}: config has {len(config.tiles)} loops, kernel has {len(self.extents)}")
        for i, (tile, extent) in enumerate(zip(config.tiles, self.extents)):
            if len(tile) != self.levels(i) or math.prod(tile) != extent:
                raise ValueError(f"{self.kernel.spec.signature}: loop {i} split {tile} does not tile extent {extent} in {self.levels(i)} levels")
        if not 0 <= config.order < len(ORDERS) or config.unroll < 0:
            raise ValueError(f"{self.kernel.spec.signature}: bad order {config.order} or unroll {config.unroll}")

    def schedule(self, config: TileConfig) -> Any:
        """The scheduled IRModule of `config`."""
        return self.schedule_object(config).mod

    def schedule_object(self, config: TileConfig) -> Any:
        """The `tvm.s_tir.Schedule` of `config` (MetaSchedule's feature extractor reads these)."""
        from tvm.s_tir import Schedule

        self.validate(config)
        sch = Schedule(self.kernel.func)
        for name in self.kernel.inline_blocks:
            sch.compute_inline(sch.get_sblock(name))
        block = sch.get_sblock(self.kernel.main_block)
        loops = sch.get_loops(block)
        levels: dict[str, list[Any]] = {"S0": [], "S1": [], "S2": [], "R0": [], "R1": []}
        for i, loop in enumerate(loops):
            parts = sch.split(loop, list(config.tiles[i]))
            prefix = "R" if self.is_reduce[i] else "S"
            for level, part in enumerate(parts):
                levels[f"{prefix}{level}"].append(part)
        order = [loop for level in ORDERS[config.order].split() for loop in levels[level]]
        sch.reorder(*order)
        innermost_spatial = ORDERS[config.order].split()[-1] == "S2"
        if config.vectorize and innermost_spatial and config.tiles[self._last_spatial()][-1] > 1:
            sch.vectorize(levels["S2"][-1])
        outer = levels["S0"]
        if config.parallel and outer:
            fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
            sch.parallel(fused)
            outer = [fused]
        if config.unroll > 0:
            sch.annotate(outer[0] if outer else order[0], "pragma_auto_unroll_max_step", config.unroll)
            sch.annotate(outer[0] if outer else order[0], "pragma_unroll_explicit", 1)
        return sch

    def _last_spatial(self) -> int:
        return max(i for i, r in enumerate(self.is_reduce) if not r)

    def features(self, config: TileConfig, host: HostCaches | None = None) -> np.ndarray:
        return config_features(config, self.is_reduce, self.extents, kind=self.kernel.spec.kind, dims=self.kernel.spec.dims, host=host)


def config_features(config: TileConfig, is_reduce: Sequence[bool], extents: Sequence[int] | None = None, *, kind: str = "",
                    dims: Sequence[int] = (), host: HostCaches | None = None) -> np.ndarray:
    """The knob vector as floats: log2 of every split factor (3 slots per loop, 7 loops), the
    order one-hot, vectorize, log2(unroll + 1), parallel, and derived sizes: log2 of the
    innermost vector length, of the inner tile (S1*S2 over spatial loops), of the reduction
    inner tile (R1) and of the parallel extent. Then what the knobs mean for this kernel's loop
    nest (the split factors alone do not say which loop is contiguous in memory): per loop slot
    its log2 extent, reduction flag and whether it is the innermost spatial (contiguous) loop;
    and for the nest: the innermost non-trivial loop of the final order (log2 trip count,
    reduction?, contiguous?, vectorized?), log2 of the inner tile's iterations (spatial x
    reduction), of the outer trip count, of the unrolled body (min(unroll, inner body)), of the
    innermost spatial tile, of the output elements per reduction tile, a scalar-fallback flag
    (vectorize asked for but not applicable), log2 vector length (-1 if none) and a code-bloat
    flag (unroll >= 64 over a body of >= 256 iterations). Last, `hardware_features` of the kernel
    (`kind`, `dims`) on `host` (this machine's caches by default): zeros but the machine where
    the kind is unknown or not given."""
    if extents is None:
        extents = [math.prod(t) for t in config.tiles]
    out = np.zeros(CONFIG_FEATURES, dtype=np.float32)
    for i, tile in enumerate(config.tiles):
        out[i * 3 : i * 3 + len(tile)] = np.log2(np.asarray(tile, dtype=np.float64))
    base = MAX_LOOPS * 3
    out[base + config.order] = 1.0
    base += len(ORDERS)
    last_spatial = max(i for i, r in enumerate(is_reduce) if not r)
    vec = config.tiles[last_spatial][-1] if (config.vectorize and ORDERS[config.order].endswith("S2")) else 1
    spatial_tile = math.prod(t[1] * t[2] for t, r in zip(config.tiles, is_reduce) if not r)
    reduce_tile = math.prod(t[-1] for t, r in zip(config.tiles, is_reduce) if r)
    parallel_extent = math.prod(t[0] for t, r in zip(config.tiles, is_reduce) if not r) if config.parallel else 1
    out[base : base + 7] = [float(config.vectorize), math.log2(config.unroll + 1), float(config.parallel),
                            math.log2(vec), math.log2(spatial_tile), math.log2(reduce_tile), math.log2(parallel_extent)]
    base += 7
    for i, (extent, reduce) in enumerate(zip(extents, is_reduce)):
        out[base + i * _LOOP_FEATURES : base + (i + 1) * _LOOP_FEATURES] = [math.log2(max(int(extent), 1)), float(reduce), float(i == last_spatial)]
    base += MAX_LOOPS * _LOOP_FEATURES
    levels: dict[str, list[tuple[int, int]]] = {"S0": [], "S1": [], "S2": [], "R0": [], "R1": []}
    for i, (tile, reduce) in enumerate(zip(config.tiles, is_reduce)):
        for level, factor in enumerate(tile):
            levels[("R" if reduce else "S") + str(level)].append((i, factor))
    nest = [(level, i, f) for level in ORDERS[config.order].split() for i, f in levels[level]]
    level, loop, trip = ([n for n in nest if n[2] > 1] or nest)[-1]
    inner_spatial = math.prod(t[-1] for t, r in zip(config.tiles, is_reduce) if not r)
    total = math.prod(int(e) for e in extents)
    out[base : base + _NEST_FEATURES] = [
        math.log2(trip), float(level.startswith("R")), float(loop == last_spatial), float(level == "S2" and loop == last_spatial and vec > 1),
        math.log2(spatial_tile * reduce_tile), math.log2(max(total / (spatial_tile * reduce_tile), 1.0)),
        math.log2(min(config.unroll, inner_spatial * reduce_tile) + 1), math.log2(inner_spatial),
        math.log2(max(total / reduce_tile, 1.0)), float(config.vectorize and vec == 1), math.log2(vec) if vec > 1 else -1.0,
        float(config.unroll >= 64 and inner_spatial * reduce_tile >= 256)]
    out[_KNOB_FEATURES:] = hardware_features(config, is_reduce, extents, kind, dims, host)
    return out


def refresh_config_features(config_text: Sequence[str], is_reduce: Sequence[bool], extents: Sequence[int], *, kind: str = "",
                            dims: Sequence[int] = (), host: HostCaches | None = None) -> np.ndarray:
    """(C, CONFIG_FEATURES) from stored config texts: a dataset written before the features
    changed is read with the current ones (the texts and the loop nest are what was measured)."""
    return np.stack([config_features(TileConfig.from_text(t), is_reduce, extents, kind=kind, dims=dims, host=host) for t in config_text])
