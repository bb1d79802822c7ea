"""Fixtures shared by the tests of the learned parts (policy, RL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Two shared cores: torch's own thread pool only adds contention (and 10x wall time)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
