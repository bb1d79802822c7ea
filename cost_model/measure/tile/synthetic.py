"""Synthetic tile kernels: shapes drawn at random rather than read from a graph, so a tile ranker
sees more of the shape space than the workload suite's few hundred kernels cover.

Every kind of `kernels.KINDS` can be drawn; matmuls most often (their loop order x vectorisation x
reduction extent interaction on unseen shapes is where the rankers miss most, RESULTS.md (i)).
Each size is log-uniform over a range like the suite's, then rounded to a power of two (half the
draws), a multiple of 8 (a quarter) or left as it is (a quarter: real graphs have 500s and 2000s);
windows 1-7, strides 1-2. Shapes are scaled to the same FLOP budget as the suite's
(`shapes.scale_to_budget`) and deduplicated by signature. The source is `synthetic/<seed>`, so
`dataset.program_of` puts them all in one program: a held-out-program split keeps them together.
`kind_weights` redraws the mix (e.g. toward the kinds a ranker misses most: reductions, NCHW convs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cost_model.measure.tile.kernels import KINDS, KernelSpec
from cost_model.measure.tile.shapes import scale_to_budget

__all__ = ["KIND_WEIGHTS", "parse_kind_weights", "synthetic_kernels"]

# relative draw frequency per kind (matmul-heavy: see the module docstring)
KIND_WEIGHTS = {"matmul": 4, "batch_matmul": 1, "conv2d_nhwc": 2, "conv2d_nchw": 1, "depthwise_nhwc": 1, "reduce": 1, "ew_reduce": 1}


def _draw_list(weights: Mapping[str, int]) -> list[str]:
    """Each kind repeated by its weight: one uniform integer draw picks a kind (the default mix's
    lists are unchanged by this, so seeds drawn before `kind_weights` existed draw the same shapes)."""
    unknown = sorted(set(weights) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kernel kind(s) {unknown} in synthetic kind weights; kinds are {list(KINDS)}")
    bad = {kind: w for kind, w in weights.items() if not isinstance(w, int) or w < 0}
    if bad:
        raise ValueError(f"synthetic kind weights must be integers >= 0, got {bad}")
    draw = [kind for kind, weight in weights.items() for _ in range(weight)]
    if not draw:
        raise ValueError("synthetic kind weights are all zero: no kind to draw")
    return draw


def parse_kind_weights(text: str) -> dict[str, int]:
    """`"reduce=3,matmul=2"` -> {"reduce": 3, "matmul": 2}; kinds not named get weight 0."""
    weights: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, value = item.partition("=")
        number = value.strip()
        if not sep or not (number.removeprefix("-").isascii() and number.removeprefix("-").isdigit()):
            raise ValueError(f"synthetic kind weight {item!r}: expected KIND=INTEGER (e.g. reduce=3)")
        weights[kind.strip()] = int(number)
    _draw_list(weights)  # validates
    return weights


def _size(rng: np.random.Generator, lo: int, hi: int) -> int:
    value = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    pick = rng.random()
    if pick < 0.5:
        return int(2 ** round(math.log2(value)))
    if pick < 0.75:
        return max(8, int(round(value / 8)) * 8)
    return max(1, int(round(value)))


def _dims(rng: np.random.Generator, kind: str) -> tuple[int, ...]:
    if kind == "matmul":  # m, n, k
        return (_size(rng, 1, 4096), _size(rng, 8, 4096), _size(rng, 8, 4096))
    if kind == "batch_matmul":  # b, m, n, k
        return (_size(rng, 1, 256), _size(rng, 1, 512), _size(rng, 1, 512), _size(rng, 1, 512))
    if kind in ("conv2d_nhwc", "conv2d_nchw"):  # n, h, w, c, f, kh, kw, stride
        window = int(rng.choice([1, 1, 3, 3, 5, 7]))
        return (_size(rng, 1, 32), _size(rng, 7, 56), _size(rng, 7, 56), _size(rng, 3, 256), _size(rng, 8, 256), window, window,
                int(rng.choice([1, 1, 2])))
    if kind == "depthwise_nhwc":  # n, h, w, c, kh, kw, stride
        window = int(rng.choice([3, 3, 5, 7]))
        return (_size(rng, 1, 32), _size(rng, 7, 56), _size(rng, 7, 56), _size(rng, 8, 256), window, window, int(rng.choice([1, 2])))
    return (_size(rng, 1, 4096), _size(rng, 8, 8192))  # reduce / ew_reduce: rows, cols


def _single_row_dims(rng: np.random.Generator) -> tuple[int, ...]:
    """A whole-vector reduction, (1, cols): cols log-uniform up to 8M elements (scaled to the FLOP
    budget after), the large one-row sums and norms of LLM graphs ([1, 655360] in the suite's HLO)."""
    return (1, _size(rng, 1024, 1 << 23))


def synthetic_kernels(count: int, *, seed: int = 0, max_flops: float = 8e6, min_flops: float = 1e4,
                      kind_weights: Mapping[str, int] | None = None, single_row: float = 0.0) -> list[KernelSpec]:
    """`count` distinct random kernel specs (module docstring), the same list for the same seed and
    weights; `kind_weights` (kind -> integer, unnamed kinds 0) replaces `KIND_WEIGHTS`. `single_row`:
    the share of reductions (reduce, ew_reduce) drawn as one long row, (1, cols) (`_single_row_dims`):
    the default draw makes them about 1% of reductions where the suite has 18%; 0 draws exactly
    what seeds drew before the option existed."""
    draw = _draw_list(KIND_WEIGHTS if kind_weights is None else kind_weights)
    if not 0.0 <= single_row <= 1.0:
        raise ValueError(f"synthetic single-row share must lie in [0, 1], got {single_row}")
    if count < 0:
        raise ValueError(f"synthetic kernel count must be >= 0, got {count}")
    if not 0 < min_flops <= max_flops:
        raise ValueError(f"synthetic kernels need 0 < min_flops <= max_flops, got {min_flops:g} and {max_flops:g}")
    rng = np.random.default_rng(seed)
    specs: dict[str, KernelSpec] = {}
    source = f"synthetic/{seed}"
    for _ in range(1000 * max(count, 1)):  # bounded: a budget too small for distinct shapes stops here
        if len(specs) >= count:
            break
        kind = draw[int(rng.integers(len(draw)))]
        # the extra draw only when asked: seeds drawn without the option draw the same shapes
        one_row = single_row > 0 and kind in ("reduce", "ew_reduce") and rng.random() < single_row
        dims = _single_row_dims(rng) if one_row else _dims(rng, kind)
        spec = scale_to_budget(KernelSpec(kind, dims, source), max_flops, min_flops=min_flops)
        if spec is not None:
            specs.setdefault(spec.signature, spec)
    if len(specs) < count:
        raise ValueError(f"only {len(specs)} distinct synthetic kernels fit max_flops={max_flops:g} / min_flops={min_flops:g} (asked for {count})")
    return list(specs.values())
