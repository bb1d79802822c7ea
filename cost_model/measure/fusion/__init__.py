"""Fusion configurations measured for real: random legal groupings of a graph from the
`fuse-by-priority` pass (random priorities and threshold), each configuration run end to end on
this CPU (every group one XLA executable, dispatched in a topological order of the groups:
`cost_model.profiling.calibration.GroupExecutor`), timed by the `Harness`, and stored in the
layout form of the TpuGraphs schema."""

from __future__ import annotations

from cost_model.measure.fusion.collect import collect_fusion_dataset, fusion_record, random_fusion

__all__ = ["collect_fusion_dataset", "fusion_record", "random_fusion"]
