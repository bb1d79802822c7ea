"""Data collection for the learned cost model that needs the layers above `cost_model`:
kernels drawn from the workload suite (`suite.py`), and fusion configurations drawn with the
`fuse-by-priority` pass and scored with the simulator's roofline (`fusion_collect.py`, graphs
from `fusion_graphs.py`). The measuring itself is `cost_model.measure`'s harness."""

from __future__ import annotations

__all__: list[str] = []
