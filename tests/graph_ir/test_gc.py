"""graph_ir._gc: the collector kept off a built graph's objects during a search."""

from __future__ import annotations

import gc

import pytest

from graph_ir._gc import gc_frozen, gc_paused


@pytest.fixture(autouse=True)
def _unfrozen():
    if gc.get_freeze_count():
        pytest.skip("this process froze its heap before the test")
    yield
    gc.unfreeze()


def test_gc_frozen_freezes_then_restores() -> None:
    kept = [object() for _ in range(100)]
    with gc_frozen():
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0


def test_gc_frozen_nests_and_the_outer_block_unfreezes() -> None:
    with gc_frozen():
        with gc_frozen():
            pass
        assert gc.get_freeze_count() > 0, "an inner block must not unfreeze the outer one's heap"
    assert gc.get_freeze_count() == 0


def test_gc_frozen_as_decorator_and_on_error() -> None:
    @gc_frozen()
    def search() -> int:
        return gc.get_freeze_count()

    assert search() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError):
        with gc_frozen():
            raise RuntimeError("search failed")
    assert gc.get_freeze_count() == 0


def test_gc_frozen_keeps_a_host_freeze() -> None:
    gc.freeze()  # the host's own freeze (e.g. before forking workers)
    with gc_frozen():
        pass
    assert gc.get_freeze_count() > 0


def test_cyclic_garbage_made_inside_is_still_collected() -> None:
    class Node:
        pass

    with gc_frozen():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2


def test_gc_paused_restores_the_collector() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
