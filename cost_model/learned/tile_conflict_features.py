"""Cache-set conflicts of a tile configuration: what the capacity features cannot see.

`tile_hw_features` asks whether a tile's working set fits a cache by size. A set-associative
cache can still thrash a tile that fits: when a buffer's rows lie a multiple of (sets x line)
bytes apart (4 KiB for a 48 KiB 12-way L1), every row maps to the same few sets, and more rows
than the cache has ways evict each other before the tile is reused. Power-of-two shapes, the
common case in real models, do exactly this. Whether it happens is modular arithmetic on the
strides and the tile's extent, which trees over log sizes cannot learn from ~1,000 kernels.

For each cache level (L1 and L2, with their associativity from sysfs) and two tiles of the
loop nest (the largest tile that fits the level by capacity, and the tile of the two innermost
non-trivial loops), the lines every buffer touches in the tile anchored at the origin are mapped to
sets, each buffer's base at set 0 (page-aligned; where the allocator puts them relative to
each other is not known, so the buffers are counted alone and together):
- log2 of the fullest set's lines over the ways, all buffers together, and the worst buffer alone;
- the share of the tile's lines in sets holding more lines than ways.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["CONFLICT_FEATURES", "CONFLICT_FEATURE_NAMES", "CacheGeometry", "cache_geometry", "conflict_features"]

_F32 = 4
_MAX_ELEMENTS = 1 << 18  # a larger tile is sampled by rows: the count is of sets, not of every element

CONFLICT_FEATURE_NAMES = tuple(f"{level}_{tile}_{name}" for level in ("l1", "l2") for tile in ("fit", "inner")
                               for name in ("set_over_ways_all", "set_over_ways_worst", "share_over_ways"))
CONFLICT_FEATURES = len(CONFLICT_FEATURE_NAMES)


@dataclass(frozen=True)
class CacheGeometry:
    """Sets, ways and line bytes of one cache level."""

    size: int
    ways: int
    line: int = 64

    @property
    def sets(self) -> int:
        return max(1, self.size // (self.ways * self.line))


@functools.lru_cache(maxsize=None)
def cache_geometry() -> tuple[CacheGeometry, CacheGeometry]:
    """This machine's L1 data and L2 geometry (sysfs of cpu0, read as `tile_hw_features.host_caches` reads
    it, plus the ways it does not need); a typical x86 core where absent."""
    from cost_model.learned.tile_hw_features import sysfs_size_bytes

    found: dict[int, CacheGeometry] = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            if (index / "type").read_text().strip() not in ("Data", "Unified"):
                continue
            found[int((index / "level").read_text())] = CacheGeometry(sysfs_size_bytes((index / "size").read_text()), int((index / "ways_of_associativity").read_text()),
                                                                       int((index / "coherency_line_size").read_text()))
    except (OSError, ValueError):
        pass
    return found.get(1, CacheGeometry(32 * 1024, 8)), found.get(2, CacheGeometry(1024 * 1024, 16))


def _lines(indices: Sequence[Any], tile: Sequence[int], shape: Sequence[int], line: int) -> np.ndarray:
    """Distinct cache lines (from the buffer's base) of the elements `indices` reach over the tile."""
    from cost_model.learned.tile_hw_features import index_spans

    spans = index_spans(indices, tile)
    rows = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    inner = spans[-1]
    starts = np.zeros(1, dtype=np.int64)
    budget = max(1, _MAX_ELEMENTS // max(inner, 1))
    for d in range(len(spans) - 1):
        steps = np.arange(spans[d], dtype=np.int64)
        if starts.size * steps.size > budget:  # sample rows evenly; the set pattern of a stride repeats
            steps = steps[np.linspace(0, steps.size - 1, max(1, budget // max(starts.size, 1))).astype(np.int64)]
        starts = (starts[:, None] + steps[None, :] * rows[d]).ravel()
    first = starts * _F32 // line
    last = (starts + inner - 1) * _F32 // line
    width = int((last - first).max()) + 1
    lines = (first[:, None] + np.arange(width, dtype=np.int64)[None, :])
    lines = lines[lines <= last[:, None]]
    return np.unique(lines)


def _occupancy(per_buffer: Sequence[np.ndarray], cache: CacheGeometry) -> tuple[float, float, float]:
    together = np.zeros(cache.sets, dtype=np.int64)
    worst = 0
    for lines in per_buffer:
        counts = np.bincount(lines % cache.sets, minlength=cache.sets)
        worst = max(worst, int(counts.max()))
        together += counts
    over = together > cache.ways
    share = float(together[over].sum() / max(together.sum(), 1))
    return math.log2(max(int(together.max()), 1) / cache.ways), math.log2(max(worst, 1) / cache.ways), share


def conflict_features(config: Any, is_reduce: Sequence[bool], extents: Sequence[int], kind: str, dims: Sequence[int],
                      caches: tuple[CacheGeometry, CacheGeometry] | None = None) -> np.ndarray:
    """The (CONFLICT_FEATURES,) vector of the module docstring; zeros for a kind without an access pattern."""
    from cost_model.learned.tile_hw_features import access_pattern, index_spans, loop_nest, working_sets

    caches = caches or cache_geometry()
    out = np.zeros(CONFLICT_FEATURES, dtype=np.float32)
    pattern = access_pattern(kind, dims)
    if pattern is None:
        return out
    loops = len(extents)
    nest = loop_nest(config, is_reduce)
    sets = working_sets(nest, pattern, loops)
    shapes = [index_spans(indices, list(extents)) for _, _, indices in pattern]
    nontrivial = [q for q, n in enumerate(nest) if n[2] > 1]
    inner_q = nontrivial[-2] if len(nontrivial) >= 2 else (nontrivial[-1] if nontrivial else len(nest) - 1)
    f = 0
    for cache in caches:
        fit_q = next(i for i in range(len(sets)) if sum(sets[i]) <= cache.size or i == len(sets) - 1)
        for q in (fit_q, max(fit_q, inner_q)):
            tile = [1] * loops
            for _, loop, factor in nest[q:]:
                tile[loop] *= factor
            per_buffer = [_lines(indices, tile, shape, cache.line) for (_, _, indices), shape in zip(pattern, shapes)]
            out[f : f + 3] = _occupancy(per_buffer, cache)
            f += 3
    return out
