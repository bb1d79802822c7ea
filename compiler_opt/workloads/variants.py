"""Generated training graphs for the GO policy: workload specs drawn at random, reproducibly.

The policy's training split has nine graphs, and every CNN in it runs fastest on one device, so
the policy never learns to split branches. `random_variants` draws extra graphs that nobody
designed: cell networks with random cells from NASNet's search space (`randcell`) and RNN
language models of random depth and width (`rnnlm`), at sizes around the paper sizes. Each is a
spec (`randcell:inference@genotype=random-17@batch=64`) that `compiler-opt train --workloads`
and `bench` build like any suite workload, so a run's command records exactly what it used.
"""

from __future__ import annotations

import random

__all__ = ["VARIANT_FAMILIES", "random_variants"]

# family -> (size -> choices); sizes not named keep the workload's paper sizes.
VARIANT_FAMILIES: dict[str, dict[str, tuple[object, ...]]] = {
    "randcell": {"cells_per_stage": (2, 4, 6), "filters": (16, 32, 48), "batch": (16, 32, 64, 128)},
    "rnnlm": {"layers": (3, 5, 6), "hidden": (1024, 2048), "steps": (20, 40), "batch": (32, 64, 128)},
}


_MAX_REPEATS = 1000  # repeated draws after which a family counts as used up


def random_variants(count: int, *, seed: int = 0, mode: str = "inference", families: tuple[str, ...] = ("randcell", "rnnlm")) -> list[str]:
    """`count` distinct workload specs, the families taken in turn, sizes drawn with `seed`."""
    if count < 0:
        raise ValueError("count must be at least 0")
    unknown = [f for f in families if f not in VARIANT_FAMILIES]
    if unknown or not families:
        raise ValueError(f"families must be among {sorted(VARIANT_FAMILIES)}, got {list(families)}")
    rng = random.Random(seed)
    specs: list[str] = []
    seen: set[str] = set()
    misses = 0  # draws in a row that repeated an earlier spec
    while len(specs) < count:
        family = families[len(specs) % len(families)]
        sizes = {key: rng.choice(choices) for key, choices in VARIANT_FAMILIES[family].items()}
        if family == "randcell":
            sizes["genotype"] = f"random-{rng.randrange(10**6)}"
        spec = f"{family}:{mode}" + "".join(f"@{key}={sizes[key]}" for key in sorted(sizes))
        if spec in seen:
            misses += 1
            if misses > _MAX_REPEATS:  # the family's sizes are used up (rnnlm has 36 combinations)
                raise ValueError(f"{family} has no more distinct sizes: {count} variants are too many for families {list(families)}")
            continue
        misses = 0
        seen.add(spec)
        specs.append(spec)
    return specs
