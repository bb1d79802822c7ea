"""Keep Python's cyclic garbage collector off what large graphs leave on the heap.

`gc_paused`: building 100k nodes allocates ~1M small objects; the collector's generation-2 scans
over that growing heap double the build time. Nothing built here is garbage, so scans are pure
waste.

`gc_frozen`: a search over a built graph (classical placement methods, GO's warm start, PPO and
polish, HDP) allocates short-lived arrays by the million, and every generation-2 collection then
walks all the graph's objects too: ~0.4 s each over the ~860k objects of 29k-node GNMT, every
second or third simulation (a single-device placement and its score: 0.10 s or 0.48-0.53 s by
whether a collection hit it). Freezing moves what exists at entry to the permanent generation, so
collections walk only what the search allocates; its cyclic garbage is still collected.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["gc_frozen", "gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_frozen_depth = 0


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """Freeze the heap as it is at entry for the block (module docstring). Nests: the outermost
    block unfreezes at exit, and only when nothing was frozen before it (a host process that froze
    its own heap, e.g. before forking workers, keeps it frozen)."""
    global _frozen_depth
    owner = _frozen_depth == 0 and gc.get_freeze_count() == 0
    _frozen_depth += 1
    gc.freeze()
    try:
        yield
    finally:
        _frozen_depth -= 1
        if owner:
            gc.unfreeze()
